"""A sweep run again: a job directory already there is kept (completed) or continued (unfinished) only when it holds
the config of the job about to run in it, asked before the launcher is handed the job.

Why here and not in the job: Hydra's `run_job` rewrites the job directory's `.hydra/config.yaml` before the task
function starts, under every launcher, so a job that found out itself would already have overwritten the record of
the config its completed run was trained with. The pre-flight (tfhydra/cli/preflight.py) asks the same question of
every job of a grid it can expand; this asks it of every batch a sweeper launches, so sweeps the pre-flight cannot
expand (`glob()`, more than 256 jobs, Optuna's trials) are held to it too: tfhydra's basic sweeper asks it of the
whole grid before Hydra's sweeper writes multirun.yaml again; a staged sweep and the Optuna search of each batch
they launch. The answer is tfhydra/trust/continuation.py's (`check_sweep_job_dir`, the saved config read through the
trust boundary): one `Error:` line, exit 1, before the jobs start; nothing in a job's directory is rewritten.
Nothing here imports TensorFlow.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, open_dict

from tfhydra.record.rundir import SweepPaths


def check_batch(config: DictConfig, hydra_context: Any, batch: Sequence[Sequence[str]], first: int) -> None:
    """Raise ConfigError when a job of `batch` (numbered from `first`) would run in a directory that holds another
    config. Each job whose directory may exist is composed as its launcher will compose it (about 0.1 s each);
    a new sweep composes nothing."""
    from hydra.core.hydra_config import HydraConfig

    from tfhydra.trust.continuation import check_sweep_job_dir

    numbers = existing_job_numbers(SweepPaths(Path(str(config.hydra.sweep.dir))))
    if not numbers:
        return
    saved = HydraConfig.instance().cfg
    try:
        for idx, overrides in enumerate(batch, start=first):
            if numbers is not ANY and idx not in numbers:
                continue
            job = hydra_context.config_loader.load_sweep_config(config, list(overrides))
            with open_dict(job):  # as the launchers number a job before Hydra's run_job names its directory
                job.hydra.job.num = idx
                job.hydra.job.id = f"{job.hydra.job.name}_{idx}"
            HydraConfig.instance().set_config(job)
            check_sweep_job_dir(job, Path(str(job.hydra.sweep.dir)) / str(job.hydra.sweep.subdir))
    finally:
        HydraConfig.instance().cfg = saved


ANY = frozenset({-1})  # job directories not named `<num>_...` (a hydra.sweep.subdir of one's own): check every job


def existing_job_numbers(sweep: SweepPaths) -> frozenset[int]:
    """The numbers of the job directories there are (`<num>_...`, conf/tfhydra.yaml's hydra.sweep.subdir), ANY
    when one is named otherwise, empty for a new sweep."""
    numbers = set()
    for directory in sweep.jobs():
        prefix = directory.name.split("_", 1)[0]
        if not prefix.isdigit():
            return ANY
        numbers.add(int(prefix))
    return frozenset(numbers)
