"""What the pre-flight (tfhydra/cli/preflight.py) checks of a `-m` command line, before Hydra creates a directory:
the jobs the sweep expands to, what its sweeper and launcher can do here, screen-then-promote as far as the
command line decides it, and a sweep run again into its directory. Each raises ConfigError at the first mistake,
which the pre-flight prints as one line; none imports TensorFlow.

Which sweeper and launcher the sweep has is tfhydra/sweep/kind.py's answer; whether an existing job directory
may be written into is tfhydra/record/lifecycle.py's.
"""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.record.monitor import MODES, Monitor
from tfhydra.record.rundir import STAGES, SweepPaths
from tfhydra.sweep.kind import GRID_SWEEPERS, launcher_kind, plugin_target, sweeper_kind

SCREEN, PROMOTE = STAGES
MAX_CHECKED_JOBS = 256  # beyond this a sweep's values are checked one override at a time


def jobs_of(parsed, overrides: list[str], multirun: bool) -> list[list[str]]:
    """The override lists of the command's jobs: one without -m (several values then need -m), else those a
    basic sweep would launch; a sweep of no job is refused."""
    several = next((o for o in parsed if o.is_sweep_override()), None)
    if several is not None and not multirun:
        raise ConfigError(
            several.get_key_element(),
            several.input_line.split("=", 1)[1],
            f"one value, or -m before the overrides to run one job per value (python train.py -m {several.input_line})",
            "several values without -m",
        )
    jobs = _expand_jobs(with_folds(parsed)) if multirun else [overrides]
    if not jobs:
        swept = " ".join(o.input_line for o in parsed if o.is_sweep_override())
        raise ConfigError(
            swept,
            None,
            "sweeps with at least one value each, e.g. optimizer.lr=1e-3,1e-4 or range(1,4)",
            "the sweep expands to no job",
        )
    return jobs


def with_folds(parsed) -> list:
    """The command's overrides with what `sweep.folds=K` adds to each job (tfhydra/sweep/folds.py), parsed."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from tfhydra.sweep.folds import command_folds, fold_overrides

    added = fold_overrides(command_folds(parsed))
    return list(parsed) + (OverridesParser.create().parse_overrides(added) if added else [])


def check_folds_command(cfg: DictConfig, parsed, multirun: bool) -> None:
    """k-fold as a sweep (tfhydra/sweep/folds.py) as far as the command line decides it: one value, under -m, with
    data.fold and data.folds left to it, on a source whose validation tfhydra holds out; then check_folds_config."""
    from tfhydra.data.checks import shipped_validation
    from tfhydra.sweep.folds import FOLD, FOLDS, KEY

    for override in parsed:
        key = override.get_key_element().lstrip("+~")
        if key == KEY and override.is_sweep_override():
            raise ConfigError(
                KEY, override.input_line.split("=", 1)[1], "one value: the folds of the whole sweep", "several values"
            )
        if key in (FOLD, FOLDS) and OmegaConf.select(cfg, "sweep.folds", default=None) is not None:
            raise ConfigError(
                key,
                override.input_line.split("=", 1)[1],
                f"left out: {KEY} sets {FOLDS} and {FOLD} for each job",
                f"set with {KEY}",
            )
    folds = OmegaConf.select(cfg, KEY, default=None)
    if folds is None:
        return
    if not multirun:
        raise ConfigError(
            KEY,
            folds,
            f"-m before the overrides (python train.py -m {KEY}={folds} ...), or {FOLDS}={folds} {FOLD}=I to run "
            "fold I alone",
            "k-fold runs one job per fold: a sweep",
        )
    shipped = shipped_validation(cfg.data)
    if shipped:
        raise ConfigError(
            KEY,
            folds,
            "null, or a source whose validation tfhydra holds out (docs/data.md)",
            f"{shipped}: nothing to fold",
        )
    check_folds_config(cfg)


def check_folds_config(cfg: DictConfig) -> None:
    """`sweep.folds` needs tfhydra's grid sweeper, which draws the folds, and no screen-then-promote (each setting
    runs on every fold); the sweeper asks it too, for a sweep started without the pre-flight."""
    from tfhydra.sweep.decide import decide_on
    from tfhydra.sweep.folds import KEY
    from tfhydra.sweep.stages import stages_of

    folds = OmegaConf.select(cfg, KEY, default=None)
    if folds is None:
        return
    sweeper = sweeper_kind(cfg)
    if sweeper != "tfhydra_basic":
        name = sweeper if sweeper != "other" else plugin_target(cfg, "sweeper")
        raise ConfigError(
            KEY,
            folds,
            "tfhydra's default sweeper (hydra/sweeper=tfhydra_basic) over a grid, e.g. -m sweep.folds=5 "
            "optimizer.lr=1e-3,1e-4",
            f"hydra/sweeper={name} does not draw folds",
        )
    if stages_of(cfg) is not None or decide_on(cfg):
        raise ConfigError(
            KEY,
            folds,
            "sweep.promote=null and sweep.decide=false: a k-fold sweep runs every setting on every fold",
            "screen-then-promote would rank one fold's screen",
        )


def _expand_jobs(parsed) -> list[list[str]]:
    """The override lists of each job a basic sweep would launch (or one value at a time if huge)."""
    from tfhydra.config.hydra_api import split_sweep

    sweeps = [o for o in parsed if o.is_sweep_override()]
    if any(not o.is_discrete_sweep() for o in sweeps):  # ranges/intervals belong to a search plugin
        return [[o.input_line for o in parsed if not o.is_sweep_override()]]
    try:
        batches = split_sweep(parsed)
    except Exception:  # noqa: BLE001  (glob() and friends need the config loader: check the fixed overrides only)
        return [[o.input_line for o in parsed if not o.is_sweep_override()]]
    jobs = [list(job) for batch in batches for job in batch]
    if len(jobs) <= MAX_CHECKED_JOBS:
        return jobs
    fixed = [o.input_line for o in parsed if not o.is_sweep_override()]
    return [fixed + [f"{o.get_key_element()}={v}"] for o in sweeps for v in o.sweep_string_iterator()]


def check_globs(parsed) -> None:
    """`model=glob(zz*)` that matches no option would run a sweep of zero jobs and exit 0."""
    from hydra.core.override_parser.types import Glob

    from tfhydra.config.composition import group_options

    for override in parsed:
        value = override.value() if override.is_sweep_override() else None
        if isinstance(value, Glob):
            group = override.get_key_element().lstrip("+~")
            options = group_options(group)
            if options and not value.filter(options):
                raise ConfigError(
                    group,
                    override.input_line.split("=", 1)[1],
                    f"a glob that matches an option of {group}: {', '.join(options)}",
                    "it matches no option, so the sweep has no job",
                )


def check_plugins(cfg: DictConfig, parsed) -> str:
    """The sweep's sweeper can expand its values and its launcher can submit from here; returns the launcher's
    kind (tfhydra/sweep/kind.py)."""
    check_sweeper_can_expand(cfg, parsed)
    check_launcher_can_submit(cfg)
    return launcher_kind(cfg)


def check_sweeper_can_expand(cfg: DictConfig, parsed) -> None:
    """interval() is for search sweepers (Optuna): Hydra's basic sweeper fails on it with a traceback. tfhydra's
    Optuna search needs the optional extra."""
    import importlib.util

    sweeper = sweeper_kind(cfg)
    if sweeper == "tfhydra_optuna" and importlib.util.find_spec("optuna") is None:
        raise ConfigError(
            "hydra/sweeper",
            "tfhydra_optuna",
            "pip install -e '.[optuna]' (Optuna 4 or later), then the same command",
            "Optuna is not installed",
        )
    if sweeper == "tfhydra_optuna":
        check_search_direction(cfg)
    if sweeper not in GRID_SWEEPERS:
        return
    for override in parsed:
        if override.is_sweep_override() and not override.is_discrete_sweep():
            raise ConfigError(
                override.get_key_element(),
                override.input_line.split("=", 1)[1],
                "a list of values (a,b,c), range() or glob() with the basic sweeper; interval() "
                "with a search sweeper (hparams_search=optuna, or hydra/sweeper=tfhydra_optuna)",
                "the basic sweeper cannot expand it",
            )


def check_search_direction(cfg: DictConfig) -> None:
    """Optuna told to maximize what the runs minimize (`trainer.monitor=val_loss trainer.monitor_mode=min` with the
    preset's `direction: maximize`) searches for the worst settings while every record, summary and export ranks the
    other way; nothing would say so."""
    direction, mode = OmegaConf.select(cfg, "hydra.sweeper.direction"), OmegaConf.select(cfg, "trainer.monitor_mode")
    if mode not in MODES or direction not in ("maximize", "minimize"):
        return  # the schema and Optuna answer other values
    wanted = Monitor(str(cfg.trainer.monitor), mode).direction
    if direction != wanted:
        raise ConfigError(
            "hydra.sweeper.direction",
            direction,
            f"{wanted}, as trainer.monitor_mode={mode} ranks "
            f"trainer.monitor={cfg.trainer.monitor} (or change trainer.monitor_mode)",
            "the search would go the other way from the runs' own ranking",
        )


def check_launcher_can_submit(cfg: DictConfig) -> None:
    """submitit's SLURM launcher needs SLURM's commands (submitit looks for srun): elsewhere it fails with a
    traceback once the sweep has started."""
    import shutil

    if launcher_kind(cfg) == "submitit_slurm" and shutil.which("srun") is None:
        raise ConfigError(
            "hydra/launcher",
            "submitit_slurm",
            "a machine of a SLURM cluster (its login node), or hydra/launcher=submitit_local to run the same jobs here",
            "SLURM's srun is not on PATH",
        )


def check_stages_command(cfg: DictConfig, parsed, multirun: bool):
    """Screen, then promote (tfhydra/sweep/stages.py) as far as the command line decides it: sweep.* is one value
    for the whole sweep, the sweeper must be tfhydra's, and the grid must have more settings than it promotes. A
    single run ignores the section (said, not refused: a staged sweep's job is a run with sweep.* set). Returns
    the sweep's Stages, None when it is not staged."""
    from tfhydra.sweep.decide import KEY as DECIDE
    from tfhydra.sweep.decide import decide_on, sweep_stages
    from tfhydra.sweep.stages import KEYS, check_promote, set_values, stages_of

    swept = next((o for o in parsed if o.is_sweep_override() and o.get_key_element() in (*KEYS, DECIDE)), None)
    if swept is not None:
        raise ConfigError(
            swept.get_key_element(),
            swept.input_line.split("=", 1)[1],
            "one value: the sweep's stages are set once for the whole sweep",
            "several values (a sweep of sweeps)",
        )
    if not multirun:
        told = set_values(cfg) + ([f"{DECIDE}=true"] if decide_on(cfg) else [])
        if told:
            print(
                f"Warning: {' '.join(told)}: read by -m sweeps only (screen, then promote); this single "
                "run ignores them",
                file=sys.stderr,
                flush=True,
            )
        return None
    if stages_of(cfg) is None and not decide_on(cfg):
        return None
    sweeper = sweeper_kind(cfg)
    if sweeper != "tfhydra_basic":
        key = DECIDE if decide_on(cfg) else next(k for k in KEYS if OmegaConf.select(cfg, k, default=None) is not None)
        name = sweeper if sweeper != "other" else plugin_target(cfg, "sweeper")
        raise ConfigError(
            key,
            OmegaConf.select(cfg, key),
            "tfhydra's default sweeper (hydra/sweeper=tfhydra_basic) "
            "for screen-then-promote; a search screens with experiment=prescreen and prunes instead",
            f"hydra/sweeper={name} does not screen and promote",
        )
    settings = _grid_size(parsed)
    stages = sweep_stages(cfg, settings)  # decide mode: chosen from the grid's size and the data
    if stages is not None and settings is not None:
        check_promote(stages.promote, settings)
    return stages


def _grid_size(parsed) -> int | None:
    """How many settings a grid sweep runs; None where it cannot be told without the config (glob())."""
    from tfhydra.config.hydra_api import split_sweep

    try:
        return sum(len(batch) for batch in split_sweep(parsed))
    except Exception:  # noqa: BLE001  (glob() needs the config loader: the sweeper checks it, tfhydra/sweep/stages.py)
        return None


def check_rerun_job_dir(
    cfg: DictConfig, job: list[str], number: int, swept: set[str], stage: str | None = None
) -> None:
    """A sweep run again into its directory: each job directory already there must hold this job's config
    (tfhydra/record/lifecycle.py decides). A staged sweep's jobs are in their stage's folder; which number a promoted
    setting has depends on the screen, so any promoted job of this setting (its directory's name after the
    number) is checked against the setting's full config."""
    from tfhydra.config.jobnames import job_dirname
    from tfhydra.trust.continuation import check_sweep_job_dir

    sweep_dir = OmegaConf.select(cfg, "hydra.sweep.dir", default=None)
    if not sweep_dir or not Path(sweep_dir).is_dir():
        return
    name = job_dirname(job, swept=swept)
    if stage == PROMOTE:
        folder = SweepPaths(sweep_dir).stage(PROMOTE)
        found = (
            [d for d in folder.iterdir() if d.is_dir() and d.name.partition("_")[2] == name] if folder.is_dir() else []
        )
    else:
        found = [(SweepPaths(sweep_dir).stage(stage) if stage else Path(sweep_dir)) / f"{number}_{name}"]
    for directory in found:
        check_sweep_job_dir(cfg, directory)
