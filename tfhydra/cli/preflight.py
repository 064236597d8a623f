"""Command-line pre-flight: compose every job of the command and validate it before Hydra creates a run directory
or anything imports TensorFlow.

Hydra reports composition errors over several lines with its search path; users get one line naming the key, the
bad value and what is accepted instead. A sweep is checked job by job, so a bad value in a sweep stops it before
the first job starts. How a composition error reads is tfhydra/config/composition.py's; whether an existing run or
sweep directory may be written into is tfhydra/record/lifecycle.py's; what only a `-m` command line needs checked
(its jobs, sweeper, launcher, stages, a sweep run again) is tfhydra/sweep/preflight_checks.py's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from omegaconf import DictConfig, OmegaConf

from tfhydra.config.bounded import MAX_BYTES, MAX_DEPTH, MAX_NODES, TooLarge, check_yaml_shape, written_too_large
from tfhydra.config.composition import (
    check_group_values,
    compose_choices,
    in_user_words,
    is_group_choice,
    unparsed,
    with_values,
)
from tfhydra.config.errors import ConfigError, short_list, suggestion
from tfhydra.config.keras_choice import choose_keras
from tfhydra.record.rundir import STAGES, check_creatable
from tfhydra.sweep import preflight_checks as sweep_checks
from tfhydra.sweep.kind import expands_grid

SCREEN, PROMOTE = STAGES

# Flags that print something and exit without running a job.
_INFO_FLAGS = {"--help", "-h", "--hydra-help", "--info", "-i", "--shell-completion", "-sc", "--version"}
_NO_JOB_FLAGS = {"--cfg", "-c", "--resolve", "--package", "-p"}  # print the config; no job runs
Argv = Sequence[str] | None  # the command line after the program name; None: sys.argv's


class Checked(NamedTuple):
    """What the pre-flight learnt of a command line that passed it."""

    launcher: str | None  # the sweep's launcher (its kind), if any
    hydra_calls: list[str] | None  # the `_target_`s Hydra itself instantiates (hydra.callbacks); None: not known
    mode: Any = None  # `hydra.mode` as composed (None, RUN, MULTIRUN); mode_known False: no job was composed
    mode_known: bool = False


def check_command_line(config_dir: str | Path, config_name: str = "config", argv: Argv = None) -> list[str] | None:
    """Exit 1 with a one-line message if any job of this command line is misconfigured. Returns the `_target_`s
    Hydra itself will instantiate for it (hydra.callbacks), for `hydra.main`'s execution whitelist; None when the
    command runs no job or they are not known."""
    return checked_command_line(config_dir, config_name, argv).hydra_calls


def checked_command_line(config_dir: str | Path, config_name: str = "config", argv: Argv = None) -> Checked:
    """`check_command_line` returning all it learnt (the entry point hands Hydra the run mode too)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a.split("=")[0] in _INFO_FLAGS for a in argv):
        return Checked(None, None)
    multirun = "-m" in argv or "--multirun" in argv
    printing = next((a for a in argv if a.split("=")[0] in _NO_JOB_FLAGS), None)
    try:
        if multirun and printing:
            accepted = f"-m to run a sweep, or {printing} without -m to print one job's config"
            raise ConfigError(printing, None, accepted, "Hydra takes only one of them")
        checked = check_overrides(config_dir, config_name, _overrides_of(argv), multirun=multirun)
    except ConfigError as error:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"Error: {error}", file=sys.stderr)
        sys.exit(1)
    if not multirun and not any(a.split("=")[0] in _NO_JOB_FLAGS for a in argv):
        from tfhydra.platform.startup import preload_job

        # after the pre-flight: a mistake is answered without TensorFlow's start-up lines
        preload_job("tfhydra.runner.job")
    elif multirun and checked.launcher == "tfhydra":
        from tfhydra.launch.fork_server import start_fork_server

        start_fork_server()  # its TensorFlow import runs beside Hydra's composition of the sweep
    return checked


def _overrides_of(argv: list[str]) -> list[str]:
    from tfhydra.config.hydra_api import parse_command_line

    args, unknown = parse_command_line(argv)
    if unknown:  # argparse would print its usage and `unrecognized arguments` over several lines
        raise ConfigError(
            unknown[0],
            None,
            "flags such as -m before the key=value overrides, e.g. python train.py -m optimizer.lr=1e-3,1e-4",
            "not understood: an override after a flag, or an unknown flag",
        )
    return list(args.overrides)


def check_overrides(config_dir: str | Path, config_name: str, overrides: list[str], multirun: bool = False) -> Checked:
    """Raise ConfigError at the first misconfigured job; return what the jobs showed (Checked)."""
    from hydra import compose
    from hydra.core.global_hydra import GlobalHydra

    parsed = _parsed(overrides)
    jobs = sweep_checks.jobs_of(parsed, overrides, multirun)

    if GlobalHydra.instance().is_initialized():  # called from inside a Hydra app: leave it alone
        return Checked(None, None)
    launcher, hydra_calls, mode, mode_known = None, None, None, False
    from tfhydra.config.hydra_api import initialize
    from tfhydra.config.project import CONFIG_DIR
    from tfhydra.runner.plan import RULES, plan_run
    from tfhydra.sweep.stages import screen_job

    with initialize(config_dir):
        groups = sorted({p.name for d in {Path(config_dir), CONFIG_DIR} for p in d.iterdir() if p.is_dir()})
        sweep_checks.check_globs(parsed)
        check_group_values(parsed, groups)
        composed: dict[tuple[str, ...], DictConfig] = {}  # jobs of a sweep often share their group choices
        stages, swept = None, {o.get_key_element() for o in sweep_checks.with_folds(parsed) if o.is_sweep_override()}
        majors: set[int] = set()  # the Keras of each job: one for the whole command
        for number, job in enumerate(jobs):
            choices = tuple(o for o in job if is_group_choice(o))
            if choices not in composed:
                composed[choices] = compose_choices(compose, config_name, list(choices), groups, RULES)
            defaults = composed[choices]
            _check_keys_exist(defaults, job)
            cfg = with_values(defaults, [o for o in job if not is_group_choice(o)], groups, RULES)
            majors = _one_keras(majors, cfg.keras)  # before the plan, which imports what `_target_`s name
            if number == 0 and multirun:
                launcher = sweep_checks.check_plugins(cfg, parsed)
            if number == 0:
                _check_config_read_back(cfg)  # the other jobs differ in swept values, each checked above
                sweep_checks.check_folds_command(cfg, parsed, multirun)  # before the plan: sweep.folds named
            try:
                plan_run(cfg, defaults)  # once per job: the pre-flight's costliest check after composing
            except ConfigError as error:
                raise in_user_words(error, job) from None
            if number == 0:  # after its plan, which checks the sweep section's values
                hydra_calls, mode, mode_known = _hydra_calls(cfg), cfg.hydra.mode, True  # one hydra node per command
                stages = sweep_checks.check_stages_command(cfg, parsed, multirun)
            _check_job(cfg, job, number, swept, multirun, stage=PROMOTE if stages else None)
            if stages is not None:  # its screen job too: the screen's epochs and share of the data
                screen = screen_job(job, stages)
                screen_cfg = with_values(defaults, [o for o in screen if not is_group_choice(o)], groups, RULES)
                plan_run(screen_cfg, defaults)
                _check_job(screen_cfg, screen, number, swept, multirun, stage=SCREEN)
    _warn_unread_additions(parsed)
    return Checked(launcher, hydra_calls, mode, mode_known)


def _hydra_calls(cfg: DictConfig) -> list[str] | None:
    """The `_target_`s of hydra.callbacks (one set for a whole sweep: Hydra composes its node once), resolved; None
    if they cannot be before Hydra runs (a callback reading `${hydra:...}`): Hydra 1.4 then only warns."""
    from omegaconf.errors import OmegaConfBaseException

    from tfhydra.config.registry import callable_targets

    callbacks = cfg.hydra.callbacks
    try:
        return callable_targets(callbacks) if callbacks else []
    except OmegaConfBaseException:
        return None


# What a run writes, every reader reads back (tfhydra/config/bounded.py): a value over the readers' limits is refused
# here, on the key that holds it, not later as a saved config that resume, evaluate or a sweep summary refuses.
_READ_BACK = (
    f"a value a run can read back: its saved config at most {MAX_BYTES} bytes, {MAX_DEPTH} levels deep and "
    f"{MAX_NODES} values (docs/reliability.md)"
)


def _parsed(overrides: list[str]) -> list:
    """The overrides as Hydra's parser reads them, each value measured as its readers would measure it once written."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    _check_written_size(overrides)  # before the parser, which takes minutes over megabytes
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException as error:
        raise unparsed(error) from None
    _check_values_read_back(parsed)  # before OmegaConf's recursive code walks them
    return parsed


def _check_written_size(overrides: list[str]) -> None:
    total = sum(len(o.encode("utf-8", "surrogatepass")) for o in overrides)
    if total > MAX_BYTES:
        longest = max(overrides, key=len)
        problem = f"the overrides are {total} bytes, above the {MAX_BYTES}-byte limit for a saved config"
        raise ConfigError(longest.split("=", 1)[0].lstrip("+~"), None, _READ_BACK, problem)


def _check_values_read_back(parsed) -> None:
    from hydra.core.override_parser.types import ChoiceSweep

    for override in parsed:
        value = override.value()
        if override.is_sweep_override() and not isinstance(value, ChoiceSweep):
            continue  # range(), interval(), glob(): numbers and option names
        for one in value.list if isinstance(value, ChoiceSweep) else [value]:
            problem = written_too_large(override.key_or_group, one)
            if problem is not None:
                raise ConfigError(override.key_or_group, None, _READ_BACK, problem)


def _check_config_read_back(cfg: DictConfig) -> None:
    """The job's config as .hydra/config.yaml will hold it, measured as its readers measure it; a config over the
    limits (values of the user's config files, or several overrides together) is blamed on its section."""
    sections = [str(k) for k in cfg if k != "hydra"]
    try:
        check_yaml_shape(OmegaConf.to_yaml(OmegaConf.masked_copy(cfg, sections)))
    except TooLarge as error:
        raise ConfigError(
            _heaviest(cfg, sections), None, _READ_BACK, f"the saved config would be refused: {error}"
        ) from None


def _heaviest(cfg: DictConfig, sections: list[str]) -> str:
    for section in sections:
        try:
            check_yaml_shape(OmegaConf.to_yaml(OmegaConf.masked_copy(cfg, [section])))
        except TooLarge:
            return section
    return max(sections, key=lambda section: len(OmegaConf.to_yaml(cfg[section])))


def _one_keras(majors: set[int], major: int) -> set[int]:
    """The jobs' Keras so far with this job's: the first job's is chosen (TF_USE_LEGACY_KERAS before anything imports
    TensorFlow, docs/keras.md); a sweep over `keras` is refused, since a process (and a sweep's workers, forked from
    one that imported TensorFlow) holds one Keras."""
    if not majors:
        choose_keras(major)
    elif major not in majors:
        raise ConfigError(
            "keras",
            major,
            f"one keras for the whole sweep: keras={next(iter(majors))} or keras={major}, as two sweeps",
            "a sweep runs on one Keras (its workers share one TensorFlow import)",
        )
    return {major}


def _check_job(
    cfg: DictConfig,
    job: list[str],
    number: int,
    swept: set[str],
    multirun: bool,
    stage: str | None = None,
) -> None:
    """One planned job of the command: its directories, and (a sweep run again) the directory it would use.
    `stage`: a staged sweep's screen job (`screen`) or a setting's full job (`promote`), in its stage's folder."""
    _check_output_dirs(cfg, multirun)
    _check_run_dir(cfg, multirun, first=number == 0)
    if multirun and expands_grid(cfg):
        sweep_checks.check_rerun_job_dir(cfg, job, number, swept, stage)


def _warn_unread_additions(parsed) -> None:
    """`+trainer.foo=1` composes fine but nothing reads it: most often a misspelt key. Said, not refused: a
    user's `_target_` callable or callback may read keys tfhydra does not know."""
    unread = [
        o.input_line
        for o in parsed
        if o.is_add()
        and "_target_" not in o.key_or_group
        and not o.key_or_group.startswith("hydra")
        and "." in o.key_or_group
        and o.key_or_group.split(".")[0] in _SECTIONS_WITHOUT_TARGET
    ]
    if unread:
        print(
            f"Warning: {', '.join(unread)}: added keys that tfhydra does not read (a misspelt key? `python "
            "train.py --cfg job` shows the keys there are)",
            file=sys.stderr,
            flush=True,
        )


# Sections whose keys only tfhydra reads: an added key there is read by nobody (group options may be
# replaced by a user's _target_, whose callable takes its own keys, so they are left out).
_SECTIONS_WITHOUT_TARGET = ("trainer", "logging", "export")


def _check_keys_exist(defaults: DictConfig, overrides: list[str]) -> None:
    """`optimizer.lrr=0.1` names the keys the node does have (Hydra only says 'not in struct')."""
    for override in overrides:
        if is_group_choice(override) or override.startswith(("+", "~")):
            continue
        key, _, value = override.partition("=")
        if OmegaConf.select(defaults, key, default=_ABSENT, throw_on_missing=False) is not _ABSENT:
            continue
        parent_key, _, leaf = key.rpartition(".")
        parent = OmegaConf.select(defaults, parent_key, default=None) if parent_key else defaults
        while parent is None and parent_key:
            parent_key, _, _ = parent_key.rpartition(".")
            parent = OmegaConf.select(defaults, parent_key, default=None) if parent_key else defaults
        names = [k for k in parent if k != "hydra"] if isinstance(parent, DictConfig) else []
        where = parent_key or "the config"
        keys = short_list(leaf, names, "python train.py --cfg job shows them").removeprefix("one of ")
        raise ConfigError(
            key,
            value,
            f"a key of {where}: {keys} (add a new key with +{key}=...)",
            f"unknown key{suggestion(leaf, names)}",
        )


def _check_output_dirs(cfg: DictConfig, multirun: bool) -> None:
    """Directories tfhydra will create must be creatable: Hydra would fail with a traceback on the run
    directory, and TensorFlow on a cache file only once the data are built."""
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    value = OmegaConf.select(cfg, key, default=None)
    if value is not None and (str(value).strip() == "" or Path(value).expanduser().resolve() == Path.cwd().resolve()):
        raise ConfigError(
            key,
            str(value),
            "a directory of its own, e.g. outputs/my-run (Hydra writes .hydra/ and the run's files there)",
            "it is the directory the command runs in",
        )
    if value:
        check_creatable(key, value, Path(value).expanduser())
    cache = OmegaConf.select(cfg, "data.cache", default=None)
    if isinstance(cache, str) and cache != "memory":
        check_creatable("data.cache", cache, Path(cache).expanduser().parent)


def _check_run_dir(cfg: DictConfig, multirun: bool, first: bool = True) -> None:
    """Another process writing the directory (tfhydra/trust/locks.py) is said first: its config may be half-written.
    A sweep's directory (and its jobs') is asked once, with its first job."""
    from tfhydra.trust.continuation import check_continuable
    from tfhydra.trust.locks import check_free, check_sweep_free

    if multirun:
        if first:
            check_sweep_free(OmegaConf.select(cfg, "hydra.sweep.dir", default="") or ".")
        return
    run_dir = Path(OmegaConf.select(cfg, "hydra.run.dir", default="") or ".")
    check_free(run_dir)
    check_continuable(run_dir, OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "hydra"]))


_ABSENT = object()
