"""The Python API under the command: compose a config as `tfhydra-train <overrides>` would, and run it.

`tfhydra.compose` and `tfhydra.run` live here so that tfhydra/__init__.py stays a list of names;
tfhydra/notebook.py builds `tfhydra.train` and `tfhydra.multirun` (a run back as a `Result`) on them.
Nothing here imports TensorFlow: `run` imports tfhydra.runner.job (and with it TensorFlow) when it starts a job.
The arguments of these calls are checked here too (`override_list`, `path_argument`, `flag_argument`, `no_record`):
an argument of the wrong kind is one ConfigError naming it, and a directory argument becomes the command's own
override (`pinned`), so the pre-flight refuses it in the command's line (docs/notebook.md, "Refusals").
"""

from __future__ import annotations

import contextlib
import os
import shlex
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tfhydra.config.composition import with_open_keys
from tfhydra.config.errors import ConfigError
from tfhydra.config.project import CONFIG_DIR

# Flags of the command that a Python call takes as an argument or a call of its own; any other flag has no place there.
_FLAGS = {
    "-m": "tfhydra.multirun(overrides) to sweep",
    "--multirun": "tfhydra.multirun(overrides) to sweep",
    "--config-dir": "the config_dir argument",
    "-cd": "the config_dir argument",
    "--cfg": "tfhydra.compose(overrides) for the config",
    "-c": "tfhydra.compose(overrides) for the config",
}


# One run trains in a process at a time: Keras' global policy and seeds, TensorFlow's threads and the logging
# handlers a run sets are the process's, so a second run from another thread would change the first's under it.
_ACTIVE: dict[str, Any] = {"thread": None, "name": "", "depth": 0}
_GUARD, _COMPOSING = threading.Lock(), threading.Lock()


@contextlib.contextmanager
def one_run_at_a_time(call: str) -> Iterator[None]:
    """Refuses, in one line, a run started from another thread while one trains; the same thread may nest
    (`tfhydra.train` calls `tfhydra.run`)."""
    me = threading.get_ident()
    with _GUARD:
        if _ACTIVE["thread"] not in (None, me):
            raise ConfigError(
                call,
                None,
                "one run at a time in a process: wait for the other to return, or tfhydra.multirun([...]) for "
                "several (each job in a process of its own)",
                f"another run is training in this process (thread {_ACTIVE['name']})",
            )
        _ACTIVE.update(thread=me, name=threading.current_thread().name, depth=_ACTIVE["depth"] + 1)
    try:
        yield
    finally:
        with _GUARD:
            _ACTIVE["depth"] -= 1
            if not _ACTIVE["depth"]:
                _ACTIVE["thread"] = None


def compose(overrides=(), config_dir=None):
    """The config `tfhydra-train <overrides>` would run, checked by the same pre-flight (one ConfigError
    for the first mistake), with its `hydra` node: `run(compose([...]), run_dir=...)` then records the
    overrides in `.hydra/` like the command line does. For notebooks and scripts (docs/notebook.md).

    `config_dir` is a project's own config directory (tfhydra/config/project.py); without one, `./conf` or
    `$TFHYDRA_CONFIG_DIR` is used as the command does, and tfhydra's own configs otherwise."""
    from hydra import compose as hydra_compose

    from tfhydra.cli.preflight import check_overrides
    from tfhydra.config.hydra_api import initialize
    from tfhydra.config.project import project_config_dir

    overrides, config_dir = override_list(overrides), path_argument(config_dir, "config_dir")
    primary = project_config_dir(["--config-dir", str(config_dir)] if config_dir is not None else ()) or CONFIG_DIR
    check_overrides(primary, "config", overrides)
    with _COMPOSING, initialize(primary):  # Hydra's global state: one composition at a time, others wait
        return hydra_compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def run(cfg, run_dir=None):
    """Train one job from a composed config; returns the monitored validation metric. Without `run_dir` (and
    outside Hydra) the run goes where the command would put it (`hydra.run.dir`: outputs/<date>/<time.micro>/).
    `tfhydra.train` (tfhydra/notebook.py) does the same and returns the run as a `Result`.

    TensorFlow is imported here, not at package import, so `--help`, `--cfg` and
    configuration errors answer without paying for it. A job of a sweep (`-m`) records a
    failure and returns NaN instead of raising, so the rest of the sweep still runs
    (tfhydra/sweep/trial.py); the sweep's exit code reports it at the end.
    """
    from tfhydra.config.errors import one_line_errors
    from tfhydra.sweep.kind import auto_threads, in_sweep

    run_dir = path_argument(run_dir, "run_dir")

    def job(cfg, run_dir=None, callbacks=()):
        from tfhydra.config.keras_choice import choose_keras

        choose_keras(cfg.keras)  # a config composed elsewhere: its Keras before TensorFlow loads, or one line
        from tfhydra.runner.job import run_job  # imports TensorFlow: inside, so a sweep records even that failing

        return run_job(cfg, run_dir=run_dir, threads=auto_threads(), callbacks=callbacks)  # threads: 0, or per job

    try:
        if run_dir is None and in_sweep():
            from tfhydra.sweep.trial import run_trial

            return run_trial(cfg, job)
        from tfhydra.runner.hydra_files import chosen_run_dir, under_hydra

        if run_dir is None and not under_hydra():  # from Python: where the command would run it
            run_dir = chosen_run_dir(cfg)
        with one_line_errors(), one_run_at_a_time("tfhydra.run"):
            if run_dir is not None:  # from Python: the caller knows where and what
                return job(cfg, run_dir=run_dir)
            from tfhydra.cli.console import end_summary, start_summary

            start_summary()
            returned = job(cfg)
            end_summary()
            return returned
    except KeyboardInterrupt as interrupt:  # tfhydra.trainer.state.Interrupted: SIGTERM or Ctrl-C
        if (
            run_dir is not None
            or not (hasattr(interrupt, "exit_code") and hasattr(interrupt, "reason"))  # tfhydra's Interrupted
            or os.environ.get("HYDRA_FULL_ERROR") == "1"
        ):
            raise
        import sys

        print(f"Stopped: {interrupt.reason}; {resume_hint()}", file=sys.stderr, flush=True)
        sys.exit(interrupt.exit_code)


def resume_hint() -> str:
    """How to continue what a signal stopped: the run's own command, pinned to its directory."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from tfhydra.record.lifecycle import resume_command

    hydra = HydraConfig.get()
    hint = f"resume with: {resume_command(hydra.runtime.output_dir)}"
    if hydra.mode == RunMode.MULTIRUN:
        hint += (
            f" (python -m tfhydra.sweep summary {hydra.sweep.dir} lists the sweep's completed, interrupted and "
            "not started jobs)"
        )
    return hint


def override_list(overrides: Any, name: str = "overrides") -> list[str]:
    """The overrides of a Python call as the command's list of `key=value` strings (None: none). A string is one
    override; a string of several (`"a=1 b=2"`) is refused, not taken apart (Python would iterate it character by
    character, and whether a space separates overrides only the caller knows): the refusal shows the list it
    would make. A flag of the command is named with the argument or call that does its work."""
    example = "a list of key=value strings, e.g. ['model=mlp', 'trainer.epochs=3']"
    if overrides is None:
        return []
    if isinstance(overrides, str):
        try:
            listed = shlex.split(overrides)
        except ValueError:  # an unclosed quote: one override, as Hydra's parser will say
            listed = [overrides]
        if len(listed) > 1:
            raise ConfigError(
                name, overrides, f"a list of key=value strings: {listed!r}", "a string of several overrides"
            )
        return with_open_keys([overrides])  # one override, as a string
    if isinstance(overrides, Mapping):
        listed = [f"{key}={value}" for key, value in overrides.items()]
        raise ConfigError(name, str(dict(overrides)), f"a list of key=value strings: {listed!r}", "a mapping")
    if not isinstance(overrides, Iterable):
        raise ConfigError(name, repr(overrides), example, f"not a list ({type(overrides).__name__})")
    listed = list(overrides)
    for number, override in enumerate(listed):
        if not isinstance(override, str):
            raise ConfigError(f"{name}[{number}]", repr(override), example, f"not a string ({type(override).__name__})")
        flag = override.split("=", 1)[0]
        if flag.startswith("-"):
            raise ConfigError(
                f"{name}[{number}]",
                override,
                _FLAGS.get(flag, "key=value overrides (flags belong to the command line)"),
                "a flag of the command, not an override",
            )
    return with_open_keys(listed)


def path_argument(value: Any, name: str) -> Path | None:
    """A directory argument of a Python call (`run_dir`, `sweep_dir`, `config_dir`) as a Path; None when not given."""
    if value is None or isinstance(value, Path):
        return value
    if isinstance(value, (str, os.PathLike)):
        if str(value).strip():
            return Path(value)
        raise ConfigError(name, repr(value), "a directory, as a str or pathlib.Path", "an empty path")
    raise ConfigError(
        name, repr(value), "a directory, as a str or pathlib.Path", f"not a path ({type(value).__name__})"
    )


def pinned(overrides: list[str], key: str, folder: Path) -> list[str]:
    """`overrides` with `key` (hydra.run.dir, hydra.sweep.dir) set to `folder`, as the command line would set it:
    a directory argument goes through the pre-flight as the same override would, and is refused in the same line."""
    from tfhydra.sweep.handover import override_quoted

    mine = [o for o in overrides if o.lstrip("+").split("=", 1)[0] != key]
    return [*mine, f"{key}={override_quoted(str(folder))}"]


def flag_argument(value: Any, name: str) -> bool:
    """A True/False argument: `quiet="no"` would be true, and quiet."""
    if not isinstance(value, bool):
        raise ConfigError(name, repr(value), "True or False", f"not a bool ({type(value).__name__})")
    return value


RUN_ACCEPTED = (
    "the directory of a run, holding the metrics.json its run wrote (tfhydra.train, a sweep's job, the command)"
)


def no_record(folder: Path, error: Exception) -> str:
    """Why `folder` gives no Result: no directory, a sweep's, a run with no record yet, an unreadable one."""
    from tfhydra.record.rundir import RunPaths, SweepPaths

    metrics = RunPaths(folder).metrics
    if not folder.exists():
        return "no such directory"
    if not folder.is_dir():
        return "a file, not a directory"
    if not metrics.exists() and (SweepPaths(folder).multirun.is_file() or SweepPaths(folder).jobs()):
        return "a sweep's directory: each of its jobs has a record (tfhydra.multirun returns them all)"
    if not metrics.exists():
        return "it has no metrics.json (not a run directory, or a run that has not written its record yet)"
    reason = str(error).removeprefix(f"{metrics}: ") if not isinstance(error, OSError) else error.strerror
    return f"its metrics.json cannot be read ({reason})"
