"""Hydra's entry to tfhydra's Optuna search (`hydra/sweeper=optuna`, conf/hydra/sweeper/optuna.yaml).

Hydra instantiates sweepers only from the `hydra_plugins` package, so this class lives here; it hands
everything to tfhydra/sweep/search.py and keeps whatever launcher the config chose underneath.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class OptunaSweeper(Sweeper):
    def __init__(
        self,
        direction: str = "maximize",
        n_trials: int = 20,
        n_jobs: int = 1,
        study_name: str = "tfhydra",
        storage: str | None = None,
        sampler: str = "tpe",
        seed: int | None = None,
        pruner: str = "median",
        params: DictConfig | None = None,
    ) -> None:
        self.settings: dict[str, Any] = {  # run_search's keyword arguments
            "direction": direction,
            "n_trials": n_trials,
            "n_jobs": n_jobs,
            "study_name": study_name,
            "storage": storage,
            "sampler": sampler,
            "seed": seed,
            "pruner": pruner,
            "params": dict(params or {}),
        }
        self.config: DictConfig | None = None
        self.launcher: Any = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context = config, hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> None:
        from tfhydra.config.errors import sweep_error_line  # here, not at import: Hydra imports every plugin it finds
        from tfhydra.sweep.rerun import check_batch
        from tfhydra.sweep.search import run_search

        config = self.config
        assert config is not None, "setup() first"  # Hydra calls setup() before sweep()

        def launch(overrides: Sequence[Sequence[str]], first_number: int) -> list:
            check_batch(config, self.hydra_context, overrides, first_number)  # a trial's directory already there
            return list(self.launcher.launch([tuple(o) for o in overrides], initial_job_idx=first_number))

        with sweep_error_line():
            run_search(config=config, arguments=arguments, launch=launch, **self.settings)
