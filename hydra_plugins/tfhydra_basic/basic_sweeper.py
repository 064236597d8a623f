"""tfhydra's default sweeper (`hydra/sweeper=tfhydra_basic`, conf/hydra/sweeper/tfhydra_basic.yaml): Hydra's basic
sweeper (with `data.fold` swept when `sweep.folds` is set: tfhydra/sweep/folds.py), and screen-then-promote when the
config sets `sweep.promote` (docs/sweeps.md, "Screen, then promote") or
`sweep.decide=true` (the stages chosen from the grid and the data: tfhydra/sweep/decide.py).

Hydra instantiates sweepers only from the `hydra_plugins` package, so this class lives here. Without
`sweep.promote` it hands the sweep to Hydra's own BasicSweeper, unchanged (same jobs, numbers, directories,
multirun.yaml); with it, tfhydra/sweep/stages.py runs the two stages on whatever launcher the config chose.
"""

from __future__ import annotations

from typing import Any

from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class BasicSweeper(Sweeper):
    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        from tfhydra.config.hydra_api import basic_sweeper

        self.max_batch_size, self.params = max_batch_size, dict(params or {})
        self.basic = basic_sweeper(max_batch_size, params)
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.launcher: Any = None

    @property
    def _config(self) -> DictConfig:
        assert self.config is not None, "setup() first"  # Hydra calls setup() before sweep()
        return self.config

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from tfhydra.sweep.decide import decide_on
        from tfhydra.sweep.stages import stages_of

        self.config, self.hydra_context = config, hydra_context
        if stages_of(config) is None and not decide_on(config):
            self.basic.setup(hydra_context=hydra_context, task_function=task_function, config=config)
            return
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        from tfhydra.config.errors import sweep_error_line
        from tfhydra.config.hydra_api import split_sweep
        from tfhydra.sweep.decide import record_decision, sweep_stages
        from tfhydra.sweep.folds import fold_overrides, folds_of
        from tfhydra.sweep.preflight_checks import check_folds_config
        from tfhydra.sweep.rerun import check_batch
        from tfhydra.sweep.stages import run_stages

        assert self.hydra_context is not None, "setup() first"
        with sweep_error_line():
            check_folds_config(self._config)  # the pre-flight's answer, for a sweep started without it
        arguments = list(arguments) + fold_overrides(folds_of(self._config))  # k-fold: data.fold swept as any key
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        parsed = parser.parse_overrides([f"{k}={v}" for k, v in self.params.items()] + arguments)
        grid = [list(job) for batch in split_sweep(parsed) for job in batch]  # every setting, as Hydra's sweeper
        with sweep_error_line():
            stages = sweep_stages(self._config, len(grid))  # decide mode: chosen from the grid and the data
            if stages is None:  # job directories already there hold these jobs' configs, before multirun.yaml is
                check_batch(self._config, self.hydra_context, grid, 0)  # written again (tfhydra/sweep/rerun.py)
                return self.basic.sweep(arguments)
            if stages.why:
                record_decision(self._config, stages)  # multirun.yaml says what was decided, and why
            return run_stages(self._config, stages, grid, self._launch)

    def _launch(self, batch: list[list[str]], first: int) -> list[Any]:
        """One stage's jobs, in chunks of `max_batch_size` (all at once when unset), as Hydra's basic sweeper does."""
        from tfhydra.sweep.rerun import check_batch

        size = self.max_batch_size if self.max_batch_size and self.max_batch_size > 0 else max(len(batch), 1)
        returns = []
        for start in range(0, len(batch), size):
            chunk = [tuple(job) for job in batch[start : start + size]]
            self.validate_batch_is_legal(chunk)
            check_batch(self._config, self.hydra_context, chunk, first + start)
            returns += list(self.launcher.launch(chunk, initial_job_idx=first + start))
        return returns
