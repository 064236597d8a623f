"""A run's lifecycle: is it complete, may it continue, from where, and how an unfinished one is recorded.

One module decides this for runs, phases and sweep jobs, so the command line, the recipe (tfhydra/runner/job.py)
and the sweep room ask the same questions the same way:
- `is_complete`: a completed run is never written into again (its phases are skipped, a sweep keeps the job);
- `RESUMABLE_CHANGES`: what a continued run may change (tfhydra/trust/continuation.py compares the saved config,
  read through the trust boundary, with the config about to run);
- `resume_command`: the command that continues a run (its overrides, pinned to its directory);
- `record_stopped`: the one writer of a failed or interrupted record, whatever stopped the run (an error in
  the job, a job that failed before it could write its own record, a job its launcher lost).
How a phase starts (fresh, from its saved state, after training, kept) is decided once by tfhydra/record/resume.py,
which asks `kept_record` here. The statuses themselves, and what each means, are `tfhydra.record.Status`.
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import logging
import shlex
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.record.run_record import RunRecord, Status, provenance, read_record, run_status

log = logging.getLogger("tfhydra")
# Keys that may change when an unfinished run is continued: they do not change what is trained.
RESUMABLE_CHANGES = (
    "trainer.epochs",
    "trainer.verbose",
    "trainer.resume",
    "logging.",
    "logger.",
    "export.",
    "data.service.timeout",
    "data.service.progress_timeout",
    "sweep.cluster_timeout",
)


def is_complete(run_dir: str | Path) -> bool:
    return run_status(run_dir) == Status.COMPLETED


def kept_record(run_dir: str | Path) -> RunRecord | None:
    """The record of a completed run (a sweep run again keeps its completed jobs as they are), else None."""
    record = read_record(run_dir)
    return record if record is not None and record.status == Status.COMPLETED else None


def resume_command(run_dir: str | Path) -> str:
    """The command that continues the run in `run_dir`: its overrides, pinned to that directory
    (`python train.py` alone would start a new, time-stamped one; for a sweep's job, a new sweep)."""
    from hydra.core.hydra_config import HydraConfig

    from tfhydra.config.project import config_dir_flags, primary_config_dir
    from tfhydra.platform.command import train_command

    hydra = HydraConfig.get() if HydraConfig.initialized() else None
    overrides = list(hydra.overrides.task) if hydra else []
    flags = config_dir_flags(primary_config_dir(OmegaConf.to_container(hydra)) if hydra else None)
    return " ".join([train_command(), *map(shlex.quote, [*flags, *overrides, f"hydra.run.dir={run_dir}"])])


def error_line(error: BaseException) -> str:
    """What a record says stopped the run: a ConfigError's own line, else the error's type and reason."""
    if isinstance(error, ConfigError):
        return str(error)
    reason = getattr(error, "reason", None) if isinstance(error, KeyboardInterrupt) else None
    return " ".join(f"{type(error).__name__}: {reason or error}".split())


def record_stopped(
    run_dir: str | Path,
    error: BaseException | str,
    record: RunRecord | None = None,
    status: Status | None = None,
    **fields: Any,
) -> RunRecord:
    """Write the record of a run that stopped before completing: `interrupted` for a signal (KeyboardInterrupt),
    else `failed`, with the one line of `error`. `record`: the run's own (what it got to is kept); without one,
    the record on disk, or a new one with where the run came from. A full disk must not hide the error the user
    has to see, so a record that cannot be written is logged, not raised."""
    status = status or (Status.INTERRUPTED if isinstance(error, KeyboardInterrupt) else Status.FAILED)
    message = error if isinstance(error, str) else error_line(error)
    record = record or read_record(run_dir) or RunRecord(run_dir=str(run_dir), **provenance())
    record.update(**fields, status=status, error=" ".join(message.split()))
    try:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        record.write(run_dir)
    except OSError as written:
        log.warning("the record of %s could not be written (%s): %s", run_dir, written.strerror, message)
    return record
