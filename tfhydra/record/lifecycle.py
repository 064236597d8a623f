"""A run's lifecycle: is it complete, may it continue, from where, and how an unfinished one is recorded.

One module decides this for runs, phases and sweep jobs, so the command line, the recipe (tfhydra/runner/job.py)
and the sweep room ask the same questions the same way:
- `is_complete`: a completed run is never written into again (its phases are skipped, a sweep keeps the job);
- `check_continuable` / `check_sweep_job_dir`: an unfinished run continues only with the config it was
  started with, less what a resumed run may change (`RESUMABLE_CHANGES`); the saved config is read through
  the trust boundary (tfhydra/trust), against the config about to run;
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

from omegaconf import DictConfig, OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.record.run_record import RunRecord, Status, provenance, read_record, run_status
from tfhydra.record.rundir import STAGES, RunPaths, SweepPaths

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


def check_continuable(run_dir: Path, job: DictConfig, key: str = "hydra.run.dir") -> None:
    """Never write into a finished run (Hydra would overwrite its .hydra/ before the job starts),
    and continue an unfinished one only with the config it was started with."""
    from tfhydra.config.schema import config_differences
    from tfhydra.trust.readers import run_config

    if is_complete(run_dir):
        raise ConfigError(
            key,
            str(run_dir),
            "a new or unfinished run directory",
            "it holds a completed run, which is never overwritten",
        )
    if RunPaths(run_dir).config.is_file() and job.trainer.resume:
        differing = [
            k
            for k in config_differences(run_config(run_dir, job, flag=f"a new {key}"), job)
            if not k.startswith(RESUMABLE_CHANGES)
        ]
        if differing:
            raise ConfigError(
                key,
                str(run_dir),
                "the config of the run being continued, a new directory, or trainer.resume=false to start it over",
                f"its saved config differs in {', '.join(differing)}{before_test_split(run_dir)}",
            )


def check_sweep_job_dir(cfg: DictConfig, job_dir: Path) -> None:
    """Running a sweep again into its directory continues it (docs/sweeps.md): a job directory that is already
    there must hold this job's config, or the command is refused before any job starts and nothing is
    rewritten. A completed job must match exactly (it is kept as it is); an unfinished one may differ only
    in what a resumed run may change (RESUMABLE_CHANGES)."""
    from tfhydra.config.schema import config_differences
    from tfhydra.trust.readers import run_config

    if not RunPaths(job_dir).config.is_file():
        return
    new = OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "hydra"])
    differing = config_differences(run_config(job_dir, new, flag="a new hydra.sweep.dir"), new)
    if not is_complete(job_dir):
        differing = [k for k in differing if not k.startswith(RESUMABLE_CHANGES)]
    if differing:
        staged = job_dir.parent.name in STAGES and SweepPaths(job_dir.parent.parent).multirun.is_file()
        sweep_dir = job_dir.parent.parent if staged else job_dir.parent  # a staged sweep's job is in its stage's folder
        name = job_dir.relative_to(sweep_dir).as_posix()
        raise ConfigError(
            "hydra.sweep.dir",
            str(sweep_dir),
            "the command line that made that sweep (tfhydra-sweep "
            "resume <sweep dir> repeats it), or a new hydra.sweep.dir",
            f"its job {name} was run with another config: it differs in "
            f"{', '.join(differing[:8])}"
            + (f" and {len(differing) - 8} more" if len(differing) > 8 else "")
            + before_test_split(job_dir),
        )


def before_test_split(run_dir: Path) -> str:
    """Why a run recorded before the three splits (schema_version < 2) differs from today's config: it has no
    data.test_fraction or data.split_seed, and its epochs trained on another split of the data (docs/data.md)."""
    record = read_record(run_dir)
    if record is None or not record.before_test_split:
        return ""
    return (
        f" (recorded before the test split, metrics.json schema_version {record.schema_version}: it trained on "
        "another split of the data, so it is not continued on the three splits)"
    )


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
