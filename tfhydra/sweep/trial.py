"""One job of a sweep: its HParams trial for TensorBoard, and a failure recorded rather than raised.

Hydra's launchers raise the first failed job's exception once the batch has run, which
would end the sweep early (and skip the summary). A job that raises is therefore
recorded here (`metrics.json` status `failed` with the error, the traceback in
`train.log`) and returns NaN like a diverged job, so the sweep runs to its end, a search
sweeper simply sees a bad trial, and the sweep callback turns any failure into the
exit code.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig

from tfhydra.config.errors import ConfigError
from tfhydra.config.jobnames import current_swept_keys
from tfhydra.record.lifecycle import kept_record, record_stopped
from tfhydra.record.resume import KEPT, how_it_starts, say
from tfhydra.record.run_record import RunRecord, Status, provenance, read_record
from tfhydra.record.rundir import RunPaths
from tfhydra.sweep.hparams import Trial, plain
from tfhydra.sweep.search import make_pruner, storage_url, trial_number

log = logging.getLogger("tfhydra")


def run_trial(cfg: DictConfig, run_job: Callable[..., float]) -> float:
    """Run one sweep job with `run_job` (tfhydra.run hands over tfhydra.runner.job's); returns its monitored metric,
    NaN when it diverged or failed."""
    from hydra.core.hydra_config import HydraConfig

    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    overrides = list(hydra_cfg.overrides.task)
    start = how_it_starts(RunPaths(run_dir), cfg.trainer.resume)  # decided and recorded in the job's phase unless kept
    if start.kind == KEPT:  # a sweep run again: its config was checked before launch (tfhydra/sweep/rerun.py)
        name = job_name(run_dir, Path(str(hydra_cfg.sweep.dir)))
        say(start)  # in the job's train.log; its record, completed, is never rewritten
        kept = kept_record(run_dir)
        assert kept is not None  # KEPT: the phase's record says completed (tfhydra/record/resume.py)
        print(f"kept: {name} (completed in an earlier run of this sweep)", flush=True)
        best = kept.best_monitored
        return float(best) if best is not None else math.nan
    trial = None
    if cfg.logging.tensorboard:
        trial = Trial(
            RunPaths(run_dir).tensorboard_validation,
            run_dir.name,  # two runs per job, not three
            swept_values(overrides, current_swept_keys()),
        )
    started = time.perf_counter()
    try:
        result = run_job(cfg, callbacks=search_callbacks(cfg, hydra_cfg, run_dir))
    except KeyboardInterrupt as interrupt:  # Ctrl-C still ends the sweep, before its summary: say how to get one
        if hasattr(interrupt, "exit_code"):  # stopped by tfhydra's signal handling: tfhydra.run says it all
            raise
        print(
            f"sweep interrupted in {run_dir.name}: python -m tfhydra.sweep summary {hydra_cfg.sweep.dir} lists "
            "its completed, interrupted and not started jobs",
            file=sys.stderr,
            flush=True,
        )
        raise
    except Exception as error:
        if isinstance(error, ConfigError):
            log.error("job failed: %s", error)
        else:
            log.exception("job failed: %s: %s", type(error).__name__, error)
        record_failure(run_dir, cfg, overrides, error, time.perf_counter() - started)
        result = math.nan
    if trial is not None:
        record = read_record(run_dir) or RunRecord(status=Status.FAILED)
        trial.end(
            record.status,
            cfg.trainer.monitor,
            (record.best or {}).get(cfg.trainer.monitor),
            (record.best or {}).get("epoch"),
            record.test_metric(cfg.trainer.monitor),
            record.history,
            record.monitor_mode or "max",
        )
    return result


def job_name(run_dir: Path, sweep_dir: Path) -> str:
    """The job's path in its sweep (`3_...`; a staged sweep's `screen/3_...`), else its directory's name."""
    try:
        return run_dir.resolve().relative_to(sweep_dir.resolve()).as_posix()
    except ValueError:
        return run_dir.name


def search_callbacks(cfg: DictConfig, hydra_cfg, run_dir: Path) -> list:
    """A job of tfhydra's Optuna search reports to its trial (tfhydra/sweep/pruning.py); other jobs need nothing."""
    number = trial_number(cfg)
    if number is None:
        return []
    from tfhydra.sweep.pruning import ReportToTrial  # imports tf_keras: only in the job's process

    sweeper = hydra_cfg.sweeper
    return [
        ReportToTrial(
            storage_url(Path(hydra_cfg.sweep.dir), sweeper.get("storage")),
            sweeper.get("study_name"),
            number,
            cfg.trainer.monitor,
            make_pruner(sweeper.pruner, cfg.trainer.epochs),
        )
    ]


def swept_values(overrides: list[str], swept: set[str]) -> dict:
    """{key: value} of this job's swept overrides, typed as Hydra parses them (0.001 is a number)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    values = {}
    for override in OverridesParser.create().parse_overrides(overrides):
        if override.get_key_element() in swept:
            values[override.key_or_group] = plain(override.value())
    return values


def record_failure(run_dir: Path, cfg: DictConfig, overrides: list[str], error: Exception, seconds: float) -> None:
    """Keep the record the job wrote when it failed itself; otherwise (it failed before it could write one,
    e.g. importing TensorFlow) write a minimal one."""
    record = read_record(run_dir)
    if record is not None and record.status == Status.FAILED:
        return
    record = record or RunRecord(
        run_dir=str(run_dir),
        overrides=overrides,
        monitor=cfg.trainer.monitor,
        monitor_mode=cfg.trainer.monitor_mode,
        **provenance(),
    )
    record_stopped(run_dir, error, record, status=Status.FAILED, wall_seconds=seconds)


KILLED = "lost by the launcher (killed on the cluster? out of memory, a lost node, SIGKILL)"


def record_lost(run_dir: Path, overrides: list[str], said: str, status: Status = Status.FAILED) -> bool:
    """A job its launcher lost (killed by SIGKILL on a cluster, or a cluster that stopped answering:
    tfhydra/launch/lost_jobs.py) recorded with `status` and why (`said`: the launcher's reason after `KILLED`, or
    the watch's words); False when its record says it ended on its own (completed, failed ...)."""
    record = read_record(run_dir)
    if record is not None and record.status.finished:
        return False
    record = record or RunRecord(run_dir=str(run_dir), overrides=overrides, **provenance())
    record_stopped(run_dir, said, record, status=status)
    return True
