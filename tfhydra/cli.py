"""Command-line pre-flight: compose every job of the command and validate it before
Hydra creates a run directory or anything imports TensorFlow.

Hydra reports composition errors over several lines with its search path; users get
one line naming the key, the bad value and what is accepted instead. A sweep is
checked job by job, so a bad value in a sweep stops it before the first job starts.
"""
from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Iterator, Sequence

import yaml
from omegaconf import DictConfig, OmegaConf

from tfhydra.errors import ConfigError, suggestion
from tfhydra.rundir import RunPaths, check_creatable
from tfhydra.schema import config_differences
from tfhydra.trust import run_config

# Flags that print something and exit without running a job.
_INFO_FLAGS = {"--help", "-h", "--hydra-help", "--info", "-i", "--shell-completion", "-sc", "--version"}
_NO_JOB_FLAGS = {"--cfg", "-c", "--resolve", "--package", "-p"}  # print the config; no job runs
MAX_CHECKED_JOBS = 256  # beyond this a sweep's values are checked one override at a time
# How the user runs a training command, for the commands tfhydra prints (resume, reproduce): tfhydra/__main__.py
# sets it from the name it was started by; in another process, the checkout's or the installed one.
COMMAND = "python train.py" if (Path(__file__).resolve().parent.parent / "train.py").is_file() else "tfhydra-train"


def check_command_line(config_dir: str | Path, config_name: str = "config", argv: Sequence[str] | None = None) -> None:
    """Exit 1 with a one-line message if any job of this command line is misconfigured."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a.split("=")[0] in _INFO_FLAGS for a in argv):
        return
    multirun = "-m" in argv or "--multirun" in argv
    printing = next((a for a in argv if a.split("=")[0] in _NO_JOB_FLAGS), None)
    try:
        if multirun and printing:
            raise ConfigError(printing, None, f"-m to run a sweep, or {printing} without -m to print one job's config",
                              "Hydra takes only one of them")
        check_overrides(config_dir, config_name, _overrides_of(argv), multirun=multirun)
    except ConfigError as error:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"Error: {error}", file=sys.stderr)
        sys.exit(1)
    if not multirun and not any(a.split("=")[0] in _NO_JOB_FLAGS for a in argv):
        preload_job()  # after the pre-flight: a mistake is answered without TensorFlow's start-up lines


def end_process() -> None:
    """Leave at once after a command that succeeded: everything the run keeps is written, closed and renamed
    into place by then, and a process that imported TensorFlow otherwise spends about a second tearing its
    objects down (measured: docs/performance.md). The atexit hooks still run (TensorFlow's remove its
    autograph temporary files, a user's hooks flush), then logs and streams are flushed, and the
    interpreter's own teardown is skipped. `TFHYDRA_FAST_EXIT=0` keeps Python's normal shutdown."""
    if os.environ.get("TFHYDRA_FAST_EXIT", "1") == "0" or "tensorflow" not in sys.modules:
        return
    import atexit

    atexit._run_exitfuncs()  # noqa: SLF001  (CPython's own entry point: what its shutdown runs first)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say anyway
            pass
    os._exit(0)


def preload_job() -> threading.Thread:
    """Import the job (TensorFlow and every room, about 2 s) in a background thread while Hydra composes the
    config again and makes the run directory (about 0.4 s), once the pre-flight has passed and a job will run.

    The import releases the GIL while it loads TensorFlow's shared libraries and reads files, so the two
    overlap on a machine with two cores (docs/performance.md). `tfhydra.run`'s own `import tfhydra.job`
    then waits on the import lock until this one is done. A failure here is left for that import to
    report. Not for sweeps: their launching process never needs TensorFlow (jobs may run elsewhere).
    """
    def load() -> None:
        try:
            importlib.import_module("tfhydra.job")
        except BaseException:  # noqa: BLE001  (tfhydra.run imports it again and reports the error)
            pass

    thread = threading.Thread(target=load, name="tfhydra-preload", daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Inside a single run, a ConfigError ends the process with its one line as the last line of stderr.

    Hydra would print it followed by a hint about HYDRA_FULL_ERROR. A sweep's jobs do not get
    here: tfhydra/sweep/trial.py records their errors and the sweep goes on; called from
    Python (tests, notebooks) the caller gets the ConfigError.
    """
    try:
        yield
    except ConfigError as error:
        if os.environ.get("HYDRA_FULL_ERROR") == "1" or not _in_single_run():
            raise
        logging.getLogger("tfhydra").error("%s", error)
        print(f"Error: {error}", file=sys.stderr, flush=True)
        sys.exit(1)


def start_summary() -> None:
    """A single run's first line: where it writes, and what the command changed from the defaults."""
    from hydra.core.hydra_config import HydraConfig

    hydra = HydraConfig.get()
    overrides = " ".join(hydra.overrides.task) or "none (the defaults)"
    logging.getLogger("tfhydra").info("run directory %s; overrides: %s", hydra.runtime.output_dir, overrides)


def end_summary() -> None:
    """After a single run: the result, the paths that matter and the commands that look further (from the
    record, so it says what the run directory holds)."""
    from hydra.core.hydra_config import HydraConfig

    from tfhydra.record import read_record

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    record = read_record(run_dir)
    if record is None:
        return
    log = logging.getLogger("tfhydra")
    shown = os.path.relpath(run_dir) if not os.path.relpath(run_dir).startswith("..") else str(run_dir)
    if record.exports:
        exported = ", ".join(record.exports.values())
        log.info("exported (in the run directory): %s%s", exported,
                 "; TF Serving: export/serving" if "saved_model" in record.exports else "")
    evaluate = "tfhydra-evaluate" if COMMAND.startswith("tfhydra") else "python -m tfhydra.evaluate"
    looks = [f"tensorboard --logdir {Path(shown) / 'tensorboard'}"] if (run_dir / "tensorboard").is_dir() else []
    if "saved_model" in (record.exports or {}):  # evaluate measures the SavedModel: no hint without one
        looks.append(f"{evaluate} {shown}")
    log.info("look further: %s", "  |  ".join([*looks, f"the record: {Path(shown) / 'metrics.json'}"]))


def resume_command(run_dir: str | Path) -> str:
    """The command that continues the run in `run_dir`: its overrides, pinned to that directory
    (`python train.py` alone would start a new, time-stamped one; for a sweep's job, a new sweep)."""
    import shlex

    from hydra.core.hydra_config import HydraConfig

    from tfhydra.project import config_dir_flags, primary_config_dir

    hydra = HydraConfig.get() if HydraConfig.initialized() else None
    overrides = list(hydra.overrides.task) if hydra else []
    flags = config_dir_flags(primary_config_dir(OmegaConf.to_container(hydra)) if hydra else None)
    return " ".join([COMMAND, *map(shlex.quote, [*flags, *overrides, f"hydra.run.dir={run_dir}"])])


def _in_single_run() -> bool:
    """True inside `python train.py` without -m (not in a sweep, not when called from Python)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.RUN


def _overrides_of(argv: list[str]) -> list[str]:
    from hydra._internal.utils import get_args_parser

    args, unknown = get_args_parser().parse_known_args(argv)
    if unknown:  # argparse would print its usage and `unrecognized arguments` over several lines
        raise ConfigError(unknown[0], None, "flags such as -m before the key=value overrides, e.g. python train.py -m "
                          "optimizer.lr=1e-3,1e-4", "not understood: an override after a flag, or an unknown flag")
    return list(args.overrides)


def check_overrides(config_dir: str | Path, config_name: str, overrides: list[str], multirun: bool = False) -> None:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException as error:
        override = getattr(error, "override", "an override")
        raise ConfigError(override, None, "key=value in Hydra's override syntax",
                          f"cannot parse it ({str(error).splitlines()[0]})") from None
    several = next((o for o in parsed if o.is_sweep_override()), None)
    if several is not None and not multirun:
        raise ConfigError(several.get_key_element(), several.input_line.split("=", 1)[1], "one value, or -m before "
                          f"the overrides to run one job per value (python train.py -m {several.input_line})",
                          "several values without -m")
    jobs = _expand_jobs(parsed) if multirun else [overrides]
    if not jobs:
        swept = " ".join(o.input_line for o in parsed if o.is_sweep_override())
        raise ConfigError(swept, None, "sweeps with at least one value each, e.g. optimizer.lr=1e-3,1e-4 or "
                          "range(1,4)", "the sweep expands to no job")

    if GlobalHydra.instance().is_initialized():  # called from inside a Hydra app: leave it alone
        return
    from tfhydra.plan import plan_run

    from tfhydra.project import CONFIG_DIR

    with initialize_config_dir(config_dir=str(Path(config_dir).resolve()), version_base="1.3"):
        groups = sorted({p.name for d in {Path(config_dir), CONFIG_DIR} for p in d.iterdir() if p.is_dir()})
        _check_globs(parsed)
        composed: dict[tuple[str, ...], DictConfig] = {}  # jobs of a sweep often share their group choices
        for number, job in enumerate(jobs):
            choices = tuple(o for o in job if _is_group_choice(o))
            if choices not in composed:
                composed[choices] = _compose(compose, config_name, list(choices), groups)
            defaults = composed[choices]
            _check_keys_exist(defaults, job)
            cfg = _with_values(defaults, [o for o in job if not _is_group_choice(o)], groups)
            if number == 0 and multirun:
                _check_sweeper_can_expand(cfg, parsed)
                _check_launcher_can_submit(cfg)
            plan_run(cfg, defaults)
            _check_output_dirs(cfg, multirun)
            _check_run_dir(cfg, multirun)
            if multirun and str(OmegaConf.select(cfg, "hydra.sweeper._target_", default="")).endswith("BasicSweeper"):
                _check_sweep_job_dir(cfg, job, number, {o.get_key_element() for o in parsed if o.is_sweep_override()})
    _warn_unread_additions(parsed)


def _check_globs(parsed) -> None:
    """`model=glob(zz*)` that matches no option would run a sweep of zero jobs and exit 0."""
    from hydra.core.override_parser.types import Glob

    for override in parsed:
        value = override.value() if override.is_sweep_override() else None
        if isinstance(value, Glob):
            group = override.get_key_element().lstrip("+~")
            options = _group_options(group)
            if options and not value.filter(options):
                raise ConfigError(group, override.input_line.split("=", 1)[1], f"a glob that matches an option of "
                                  f"{group}: {', '.join(options)}", "it matches no option, so the sweep has no job")


def _check_sweeper_can_expand(cfg: DictConfig, parsed) -> None:
    """interval() is for search sweepers (Optuna): Hydra's basic sweeper fails on it with a traceback. tfhydra's
    Optuna search needs the optional extra."""
    import importlib.util

    sweeper = str(OmegaConf.select(cfg, "hydra.sweeper._target_", default="") or "")
    if "tfhydra_optuna" in sweeper and importlib.util.find_spec("optuna") is None:
        raise ConfigError("hydra/sweeper", "tfhydra_optuna", "pip install -e '.[optuna]' (Optuna 4 or later), then the same "
                          "command", "Optuna is not installed")
    if not sweeper.endswith("BasicSweeper"):
        return
    for override in parsed:
        if override.is_sweep_override() and not override.is_discrete_sweep():
            raise ConfigError(override.get_key_element(), override.input_line.split("=", 1)[1],
                              "a list of values (a,b,c), range() or glob() with the basic sweeper; interval() "
                              "with a search sweeper (hparams_search=optuna, or hydra/sweeper=tfhydra_optuna)",
                              "the basic sweeper cannot expand it")


def _check_launcher_can_submit(cfg: DictConfig) -> None:
    """submitit's SLURM launcher needs SLURM's commands (submitit looks for srun): elsewhere it fails with a
    traceback once the sweep has started."""
    import shutil

    launcher = str(OmegaConf.select(cfg, "hydra.launcher._target_", default="") or "")
    if launcher.endswith("submitit_launcher.SlurmLauncher") and shutil.which("srun") is None:
        raise ConfigError("hydra/launcher", "submitit_slurm", "a machine of a SLURM cluster (its login node), or "
                          "hydra/launcher=submitit_local to run the same jobs here", "SLURM's srun is not on PATH")


def _warn_unread_additions(parsed) -> None:
    """`+trainer.foo=1` composes fine but nothing reads it: most often a misspelt key. Said, not refused: a
    user's `_target_` callable or callback may read keys tfhydra does not know."""
    unread = [o.input_line for o in parsed if o.is_add() and "_target_" not in o.key_or_group
              and not o.key_or_group.startswith("hydra") and "." in o.key_or_group
              and o.key_or_group.split(".")[0] in _SECTIONS_WITHOUT_TARGET]
    if unread:
        print(f"Warning: {', '.join(unread)}: added keys that tfhydra does not read (a misspelt key? `python "
              "train.py --cfg job` shows the keys there are)", file=sys.stderr, flush=True)


# Sections whose keys only tfhydra reads: an added key there is read by nobody (group options may be
# replaced by a user's _target_, whose callable takes its own keys, so they are left out).
_SECTIONS_WITHOUT_TARGET = ("trainer", "logging", "export")


def _expand_jobs(parsed) -> list[list[str]]:
    """The override lists of each job a basic sweep would launch (or one value at a time if huge)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    sweeps = [o for o in parsed if o.is_sweep_override()]
    if any(not o.is_discrete_sweep() for o in sweeps):  # ranges/intervals belong to a search plugin
        return [[o.input_line for o in parsed if not o.is_sweep_override()]]
    try:
        batches = BasicSweeper.split_arguments(parsed, None)
    except Exception:  # glob() and friends need the config loader: check the fixed overrides only
        return [[o.input_line for o in parsed if not o.is_sweep_override()]]
    jobs = [list(job) for batch in batches for job in batch]
    if len(jobs) <= MAX_CHECKED_JOBS:
        return jobs
    fixed = [o.input_line for o in parsed if not o.is_sweep_override()]
    return [fixed + [f"{o.get_key_element()}={v}"] for o in sweeps for v in o.sweep_string_iterator()]


def _is_group_choice(override: str) -> bool:
    key = override.split("=", 1)[0].lstrip("+~")
    return "." not in key


def _compose(compose, config_name: str, overrides: list[str], groups: list[str]) -> DictConfig:
    with _composition_errors(overrides, groups):
        return compose(config_name=config_name, overrides=overrides, return_hydra_config=True)


def _with_values(defaults: DictConfig, overrides: list[str], groups: list[str]) -> DictConfig:
    """`defaults` (composed from the group choices) with the key=value overrides applied by Hydra's own
    function, as its compose does after the defaults list: one composition per set of group choices
    instead of two per job (about 0.1 s each)."""
    import copy

    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser

    cfg = copy.deepcopy(defaults)
    if overrides:
        with _composition_errors(overrides, groups):
            ConfigLoaderImpl._apply_overrides_to_config(OverridesParser.create().parse_overrides(overrides), cfg)
    return cfg


@contextlib.contextmanager
def _composition_errors(overrides: list[str], groups: list[str]) -> Iterator[None]:
    """Hydra's composition errors, as one ConfigError line naming the override."""
    from hydra.errors import ConfigCompositionException, HydraException, MissingConfigException

    try:
        yield
    except MissingConfigException as error:
        group, _, option = (error.missing_cfg_file or "").rpartition("/")
        options = error.options or _group_options(group)  # Hydra lists none for an option of a list (logger=[a,b])
        accepted = options or "an existing YAML file in conf/"
        extras = {name: extra for name, extra in _PLUGIN_OPTIONS.get(group, {}).items() if name not in options}
        if option in extras:  # launchers come from optional extras: name the one this option needs
            extras = {option: extras[option]}
        if extras:
            accepted = f"one of {', '.join(options)}, or " + ", ".join(
                f"{name} after pip install -e '.[{extra}]'" for name, extra in extras.items())
        raise ConfigError(group or "config", option, accepted,
                          f"no such {group or 'config'} option{suggestion(option, options)}") from None
    except ConfigCompositionException as error:
        bad = next((o for o in overrides if f"'{o.split('=', 1)[0].lstrip('+~')}'" in str(error)), None)
        if bad is not None:
            key, _, value = bad.partition("=")
            raise ConfigError(key, value, f"a config group ({', '.join(groups)}) or an existing key",
                              "no such group or key") from None
        raise ConfigError(" ".join(overrides), None, "valid overrides", str(error).splitlines()[0]) from None
    except HydraException as error:
        raise ConfigError(" ".join(overrides), None, "valid overrides", str(error).splitlines()[0]) from None
    except yaml.YAMLError as error:  # a config file of the project's (or tfhydra's) own conf/ that does not parse
        mark = getattr(error, "problem_mark", None)
        where = f"{mark.name}:{mark.line + 1}" if mark is not None else "a config file"
        raise ConfigError(where, None, "a YAML file Hydra can compose (a mapping of keys to values)",
                          f"not readable YAML ({getattr(error, 'problem', None) or type(error).__name__})") from None


def _group_options(group: str) -> list[str]:
    """The options of `group` in the config search path Hydra is composing with; [] outside one."""
    from hydra.core.global_hydra import GlobalHydra

    if not group or not GlobalHydra.instance().is_initialized():
        return []
    return list(GlobalHydra.instance().config_loader().get_group_options(group))


# Options that Hydra plugins add, and tfhydra's extra that installs each (pyproject.toml).
_PLUGIN_OPTIONS = {"hydra/launcher": {"joblib": "sweeps", "submitit_local": "slurm", "submitit_slurm": "slurm",
                                      "ray": "ray", "ray_aws": "ray"}}


def _check_keys_exist(defaults: DictConfig, overrides: list[str]) -> None:
    """`optimizer.lrr=0.1` names the keys the node does have (Hydra only says 'not in struct')."""
    for override in overrides:
        if _is_group_choice(override) or override.startswith(("+", "~")):
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
        raise ConfigError(key, value, f"a key of {where}: {', '.join(map(str, names))} (add a new key with +{key}=...)",
                          f"unknown key{suggestion(leaf, names)}")


def _check_output_dirs(cfg: DictConfig, multirun: bool) -> None:
    """Directories tfhydra will create must be creatable: Hydra would fail with a traceback on the run
    directory, and TensorFlow on a cache file only once the data are built."""
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    value = OmegaConf.select(cfg, key, default=None)
    if value is not None and (str(value).strip() == "" or Path(value).expanduser().resolve() == Path.cwd().resolve()):
        raise ConfigError(key, str(value), "a directory of its own, e.g. outputs/my-run (Hydra writes .hydra/ and "
                          "the run's files there)", "it is the directory the command runs in")
    if value:
        check_creatable(key, value, Path(value).expanduser())
    cache = OmegaConf.select(cfg, "data.cache", default=None)
    if isinstance(cache, str) and cache != "memory":
        check_creatable("data.cache", cache, Path(cache).expanduser().parent)


# Keys that may change when an unfinished run is continued: they do not change what is trained.
RESUMABLE_CHANGES = ("trainer.epochs", "trainer.verbose", "trainer.resume", "logging.", "logger.", "export.")


def _check_run_dir(cfg: DictConfig, multirun: bool) -> None:
    if not multirun:
        job = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
        check_continuable(Path(OmegaConf.select(cfg, "hydra.run.dir", default="") or "."), job)


def _check_sweep_job_dir(cfg: DictConfig, job: list[str], number: int, swept: set[str]) -> None:
    """Running a sweep again into its directory continues it (docs/sweeps.md): a job directory that is already
    there must hold this job's config, or the command is refused before any job starts and nothing is
    rewritten. A completed job must match exactly (it is kept as it is); an unfinished one may differ only
    in what a resumed run may change (RESUMABLE_CHANGES)."""
    from tfhydra.record import run_status
    from tfhydra.sweep import job_dirname

    sweep_dir = OmegaConf.select(cfg, "hydra.sweep.dir", default=None)
    if not sweep_dir or not Path(sweep_dir).is_dir():
        return
    name = f"{number}_{job_dirname(job, swept=swept)}"
    saved = RunPaths(Path(sweep_dir) / name).config
    if not saved.is_file():
        return
    new = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
    differing = config_differences(run_config(saved.parent.parent, new, flag="a new hydra.sweep.dir"), new)
    if run_status(saved.parent.parent) != "completed":
        differing = [k for k in differing if not k.startswith(RESUMABLE_CHANGES)]
    if differing:
        raise ConfigError("hydra.sweep.dir", str(sweep_dir), "the command line that made that sweep (tfhydra-sweep "
                          "resume <sweep dir> repeats it), or a new hydra.sweep.dir",
                          f"its job {name} was run with another config: it differs in {', '.join(differing[:8])}"
                          + (f" and {len(differing) - 8} more" if len(differing) > 8 else ""))


def check_continuable(run_dir: Path, job: DictConfig, key: str = "hydra.run.dir") -> None:
    """Never write into a finished run (Hydra would overwrite its .hydra/ before the job starts),
    and continue an unfinished one only with the config it was started with."""
    from tfhydra.record import run_status

    if run_status(run_dir) == "completed":
        raise ConfigError(key, str(run_dir), "a new or unfinished run directory",
                          "it holds a completed run, which is never overwritten")
    saved = RunPaths(run_dir).config
    if saved.is_file() and OmegaConf.select(job, "trainer.resume", default=True):
        differing = [k for k in config_differences(run_config(run_dir, job, flag=f"a new {key}"), job)
                     if not k.startswith(RESUMABLE_CHANGES)]
        if differing:
            raise ConfigError(key, str(run_dir), "the config of the run being continued, a new directory, "
                              "or trainer.resume=false to start it over",
                              f"its saved config differs in {', '.join(differing)}")


_ABSENT = object()
