"""The Hydra callback of every sweep (`hydra.callbacks.sweep` in conf/tfhydra.yaml).

It runs in the process that launched the sweep, whatever the launcher:
- at the start: writes into every job's config what it needs to know about its sweep (the swept
  keys, for job directory names and HParams values; under Ray, an absolute sweep directory), makes the Ray
  launcher able to join a running cluster, and writes the HParams experiment at the sweep root;
- with logger=mlflow, starts the sweep's parent MLflow run and hands it to every job (its children), and
  ends it with the sweep (tfhydra/logger/mlflow_run.py);
- at the end: writes summary.csv/.md/.png, prints the best job, and exits 1 when any job
  did not complete (jobs record their failures instead of raising, tfhydra/sweep/trial.py,
  so this is where a failed sweep becomes a failed command).

Hydra turns an exception in a callback into a warning; SystemExit is not an Exception, so
the exit code gets through.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from tfhydra.record.rundir import SweepPaths
from tfhydra.sweep.folds import FOLD, folds_of
from tfhydra.sweep.handover import handover_overrides, override_quoted
from tfhydra.sweep.kind import launcher_kind
from tfhydra.trainer.checks import metric_names

log = logging.getLogger("tfhydra")


class SweepCallback(Callback):
    def __init__(self) -> None:
        self.progress = SweepProgress()

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.progress.job_started(config)

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        self.progress.job_ended()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.progress.sweep_started(config)
        swept = swept_values(config)
        with read_write(config.hydra):  # the launcher composes each job with these (Hydra's load_sweep_config)
            config.hydra.overrides.hydra.extend(
                handover_overrides(swept, str(config.hydra.sweep.dir), launcher_kind(config))
            )
            join_ray_cluster(config)
            config.hydra.overrides.hydra.extend(tracker_handover(config))
        if config.logging.tensorboard:  # the composed value (logger=tensorboard sets it): conf/ is its one default
            from tfhydra.sweep.hparams import write_experiment

            names = {key.lstrip("+~"): values for key, values in swept.items()}  # as trial.py names them
            write_experiment(
                SweepPaths(config.hydra.sweep.dir).hparams,
                names,
                config.trainer.monitor,
                metric_names(config.trainer.metrics),
            )

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        finish_sweep(config)


def finish_sweep(config: DictConfig, lost_line: str | None = None) -> None:
    """The sweep's end: summary files, the best job, its trackers ended, and exit 1 with one `Error:` line when
    any job did not complete. `lost_line`: what a launcher lost (tfhydra/launch/lost_jobs.py), said instead."""
    from tfhydra.sweep.summary import summarize

    sweep_dir = Path(config.hydra.sweep.dir)
    try:
        summary = summarize(sweep_dir)
    except Exception as error:  # the jobs ran, but the sweep's record is missing: say so, and fail
        end_tracker_runs(config, succeeded=False)
        log.exception("could not write the sweep summary")
        print(
            f"Error: {sweep_dir}: could not write the sweep summary ({type(error).__name__}: {error}); "
            "rebuild it with python -m tfhydra.sweep summary <sweep dir>",
            file=sys.stderr,
            flush=True,
        )
        sys.exit(1)
    print(summary.report(), flush=True)
    end_tracker_runs(config, succeeded=not summary.unsuccessful and lost_line is None)
    if summary.unsuccessful or lost_line is not None:
        others = [
            f"{j.name or j.num} ({j.status})"
            for j in summary.unsuccessful
            if not (lost_line and j.name and j.name in lost_line)
        ]
        said = "; ".join(([lost_line] if lost_line else []) + [", ".join(others)] * bool(others))
        print(
            f"Error: {len(summary.unsuccessful)} of {len(summary.jobs)} jobs did not complete: {said}",
            file=sys.stderr,
            flush=True,
        )
        sys.exit(1)


class SweepProgress:
    """On a terminal, which job of how many starts, and the sweep's ETA from the jobs finished so far (their mean
    duration times the jobs left). Jobs that run in this process only (the basic launcher; the others run
    them elsewhere, and print their own lines); nothing without a terminal, where the summary says it all."""

    def __init__(self) -> None:
        self.total: int | None = None
        self.durations: list[float] = []
        self._started: float | None = None

    def sweep_started(self, config: DictConfig) -> None:
        from tfhydra.platform.terminal import on_terminal

        self.total = planned_jobs(config) if on_terminal() else None

    def job_started(self, config: DictConfig) -> None:
        import time

        if self.total is None:
            return
        self._started = time.monotonic()
        left = self.total - len(self.durations)
        eta = sum(self.durations) / len(self.durations) * left if self.durations else None
        print(
            f"sweep: job {len(self.durations) + 1} of {self.total} ({' '.join(config.hydra.overrides.task)})"
            + (f", sweep ETA {_duration(eta)}" if eta is not None else ""),
            file=sys.stderr,
            flush=True,
        )

    def job_ended(self) -> None:
        import time

        if self._started is not None:
            self.durations.append(time.monotonic() - self._started)
            self._started = None


def planned_jobs(config: DictConfig) -> int | None:
    """How many jobs the sweep will launch: the basic sweeper's grid (and what a staged sweep promotes), or a
    search's n_trials."""
    sweeper = config.hydra.sweeper
    if OmegaConf.select(sweeper, "n_trials", default=None):
        return int(sweeper.n_trials)
    try:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        from tfhydra.config.hydra_api import split_sweep
        from tfhydra.sweep.decide import sweep_stages

        parsed = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
        settings = sum(len(batch) for batch in split_sweep(parsed))
        stages = sweep_stages(config, settings)  # a staged sweep: every setting screened, then the promoted ones
        return settings + (stages.promote if stages else 0)
    except Exception:  # noqa: BLE001  (glob() and friends: no count, no ETA)
        return None


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


def tracker_handover(config: DictConfig) -> list[str]:
    """logger=mlflow: the sweep's parent run, started here, as an override every job is composed with."""
    from tfhydra.logger import mlflow_run

    node = mlflow_run.selected(config)
    parent = (
        mlflow_run.start_sweep_run(node, Path(config.hydra.sweep.dir), list(config.hydra.overrides.task))
        if node is not None
        else None
    )
    if parent is None:
        return []
    return [f"++hydra.job.env_set.{mlflow_run.PARENT_ENV}={override_quoted(mlflow_run.parent_handover(parent))}"]


def end_tracker_runs(config: DictConfig, succeeded: bool) -> None:
    from tfhydra.logger import mlflow_run

    node = mlflow_run.selected(config)
    if node is not None:
        mlflow_run.end_sweep_run(node, Path(config.hydra.sweep.dir), succeeded)


def join_ray_cluster(config: DictConfig) -> None:
    """hydra-ray-launcher 1.2 passes `object_store_memory` to `ray.init` unless it is set, which Ray refuses
    when `ray.init.address` names a running cluster (facebookresearch/hydra#2893): set it to null there."""
    init = OmegaConf.select(config, "hydra.launcher.ray.init", default=None)
    if isinstance(init, DictConfig) and init.get("address") and "object_store_memory" not in init:
        with open_dict(init):
            init.object_store_memory = None


def swept_values(config: DictConfig) -> dict[str, list]:
    """{swept key: its values when a grid lists them, [] for ranges a search sampler draws from}."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    lines = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
    try:
        parsed = OverridesParser.create().parse_overrides(lines)
    except Exception:  # noqa: BLE001  (the pre-flight check has reported malformed overrides already)
        return {}
    fixed = {o.get_key_element() for o in parsed[len(params) :] if not o.is_sweep_override()}
    swept: dict[str, list] = {}
    for override in parsed:
        if override.is_sweep_override() and override.get_key_element() not in fixed:  # a fixed value wins
            try:
                values = list(override.sweep_iterator())
            except Exception:  # noqa: BLE001  (interval(), glob(): not a list of values)
                values = []
            swept[override.get_key_element()] = values
    folds = folds_of(config)  # k-fold: data.fold is swept by tfhydra's sweeper, not typed (tfhydra/sweep/folds.py)
    if folds is not None:
        swept[FOLD] = list(range(folds))
    return swept
