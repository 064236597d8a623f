"""The name the user runs tfhydra's training command by, for the commands tfhydra prints (resume, reproduce,
evaluate). A neutral module on the ground floor: the recipe, the sweep room and the console all print commands.

tfhydra/__main__.py sets it from the name the process was started by; in another process (a notebook, a sweep
worker started by a launcher) it is the checkout's `python train.py`, or the installed `tfhydra-train`.

It also knows the command line the user typed (`user_command`), which the record keeps: a job that a launcher
runs in a process of its own (submitit's `_submit.py` on a SLURM node, a Ray worker, a joblib worker) gets its
sweep's command line handed over in `TFHYDRA_COMMAND` (tfhydra/sweep/ `handover_overrides`), encoded so that
neither Hydra's override grammar nor OmegaConf's interpolation reads it."""

from __future__ import annotations

import base64
import json
import os
import shlex
import sys
from pathlib import Path

COMMAND_ENV = "TFHYDRA_COMMAND"
SYS_PATH_ENV = "TFHYDRA_SYS_PATH"  # the import path a caller (the notebook API) handed its command: a reproduce line's
CONFIG_FLAGS = ("--config-dir", "-cd", "--config-path", "-cp", "--config-name", "-cn")  # Hydra's: where the configs are

_CHECKOUT = (Path(__file__).resolve().parents[2] / "train.py").is_file()
_NAME = ["python train.py" if _CHECKOUT else "tfhydra-train"]
_BY_SCRIPT = {"__main__.py": "python -m tfhydra", "train.py": "python train.py"}


def set_command(script: str) -> None:
    """Called once by the entry point with `os.path.basename(sys.argv[0])`."""
    _NAME[0] = _BY_SCRIPT.get(script, "tfhydra-train")


def train_command() -> str:
    return _NAME[0]


def evaluate_command() -> str:
    return "tfhydra-evaluate" if _NAME[0].startswith("tfhydra") else "python -m tfhydra.evaluate"


def this_command() -> str:
    """This process's command line, shell-quoted, as `python train.py ...` reads."""
    return " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv])


def command_handover() -> str:
    """This process's command line for `TFHYDRA_COMMAND`: base64 of its JSON (letters, digits, `+/=`)."""
    return base64.b64encode(json.dumps(this_command()).encode()).decode()


def user_command() -> str:
    """The command line the user typed: the one handed over by the sweep that started this job, else this
    process's (a handed-over value that does not decode is ignored: it only names where a result came from)."""
    handed = os.environ.get(COMMAND_ENV)
    if handed:
        try:
            command = json.loads(base64.b64decode(handed, validate=True))
        except ValueError:
            command = None
        if isinstance(command, str):
            return command
    return this_command()


def config_flags(argv: list[str]) -> list[str]:
    """The flags of a command line that say where its configs are (`--config-dir DIR`, `-cn NAME`, ...)."""
    flags: list[str] = []
    for i, arg in enumerate(argv):
        if arg in CONFIG_FLAGS and i + 1 < len(argv):
            flags += [arg, argv[i + 1]]
        elif "=" in arg and arg.split("=", 1)[0] in CONFIG_FLAGS:
            flags.append(arg)
    return flags


def reproduce_command(overrides: list[str]) -> str:
    """A single run with `overrides`, as this command was started: the import path the caller handed it (the
    notebook's project on `sys.path`) and the config flags the user typed come along, so the line runs as printed
    from the directory the command ran in."""
    typed = shlex.split(user_command())
    path = os.environ.get(SYS_PATH_ENV, "")
    return " ".join(
        [
            *([f"PYTHONPATH={shlex.quote(path)}"] if path else []),
            train_command(),
            *(shlex.quote(a) for a in config_flags(typed)),
            *(shlex.quote(o) for o in overrides),
        ]
    )


def handed_import_path() -> dict[str, str]:
    """The environment that hands a child process this one's import path (a kernel's `sys.path`, less the
    interpreter's own directories): PYTHONPATH, and `SYS_PATH_ENV`, which the child's reproduce line names."""
    extra = [
        p
        for p in sys.path
        if p
        and Path(p).is_dir()
        and not Path(p).resolve().is_relative_to(sys.prefix)
        and not Path(p).resolve().is_relative_to(sys.base_prefix)
    ]
    handed = os.pathsep.join([*extra, *filter(None, [os.environ.get("PYTHONPATH")])])
    return {"PYTHONPATH": handed, SYS_PATH_ENV: handed}
