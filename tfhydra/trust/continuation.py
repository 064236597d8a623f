"""Whether an unfinished run, or a sweep's job directory, may be continued with the config about to run: its saved
config is read through the trust boundary (readers.py) and compared with the new one, less what a continued run
may change (tfhydra/record/lifecycle.py `RESUMABLE_CHANGES`). A completed run is never written into again
(`is_complete`); a sweep's completed job is kept only with exactly its config. Each refusal is one ConfigError line.
Nothing here imports TensorFlow.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.record.lifecycle import RESUMABLE_CHANGES, is_complete
from tfhydra.record.run_record import read_record
from tfhydra.record.rundir import STAGES, RunPaths, SweepPaths
from tfhydra.trust.readers import run_config


def check_continuable(run_dir: Path, job: DictConfig, key: str = "hydra.run.dir") -> None:
    """Never write into a finished run (Hydra would overwrite its .hydra/ before the job starts),
    and continue an unfinished one only with the config it was started with."""
    from tfhydra.config.schema import config_differences

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
