"""tfhydra: declarative, Hydra-configured TensorFlow training.

A list of names. Importing it sets the Keras environment (tfhydra/platform/keras_env.py: tf_keras, before TensorFlow
loads) and registers conf/'s resolvers (tfhydra/config/resolvers.py), and nothing else: the pre-flight, the sweep room
and the Python API load when one of their names is first used (PEP 562), so `import tfhydra.record` does not
load the command line.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

from tfhydra.platform import keras_env  # noqa: F401  (first: TF_USE_LEGACY_KERAS before anything can import TensorFlow)

# isort: split
from tfhydra.config.errors import ConfigError
from tfhydra.config.project import CONFIG_DIR  # tfhydra's conf/ (hydra_plugins/tfhydra_conf looks for this module)
from tfhydra.config.resolvers import register_resolvers

register_resolvers()  # conf/tfhydra.yaml names sweep job directories with them

# name -> the module that defines it, imported on first use
_LAZY = {
    "check_command_line": "tfhydra.cli.preflight",
    "end_process": "tfhydra.platform.startup",
    "compose": "tfhydra.api",
    "run": "tfhydra.api",
    "resume_hint": "tfhydra.api",
    "train": "tfhydra.notebook",
    "multirun": "tfhydra.notebook",
    "Result": "tfhydra.notebook",
    "load_result": "tfhydra.notebook",
    "compare": "tfhydra.comparison.table",
}


# Where the modules of tfhydra's flat layout (before 0.2) live now: `from tfhydra.errors import ConfigError` in a
# user's code, or a `_target_` naming an old path, keeps working, with a DeprecationWarning naming the new path
# (docs/design.md, "The map"). 0.2 is the first release that warns; the paths go in the next-but-one minor, so a
# user upgrading one minor at a time sees the warning for two releases before the import fails.
_REMOVED_IN = "0.4"
_MOVED = {
    "keras_env": "platform.keras_env",
    "private_api": "platform.private_api",
    "runtime": "platform.runtime",
    "hostmemory": "platform.hostmemory",
    "startclock": "platform.startclock",
    "terminal": "platform.terminal",
    "command": "platform.command",
    "errors": "config.errors",
    "contracts": "config.contracts",
    "registry": "config.registry",
    "schema": "config.schema",
    "hydra_api": "config.hydra_api",
    "project": "config.project",
    "resolvers": "config.resolvers",
    "composition": "config.composition",
    "help": "cli.help",
    "preflight": "cli.preflight",
    "console": "cli.console",
    "startup": "platform.startup",
    "preload": "launch.preload",
    "launch.launch_errors": "launch.lost_jobs",
    "bounded": "config.bounded",
    "trust.bounded": "config.bounded",
    "dirlock": "trust.locks",
    "rundir": "record.rundir",
    "lifecycle": "record.lifecycle",
    "resume": "record.resume",
    "report": "record.report",
    "monitor": "record.monitor",
    "job": "runner.job",
    "phase": "runner.phase",
    "plan": "runner.plan",
    "hydra_files": "runner.hydra_files",
    "sweep_kind": "sweep.kind",
    "job_errors": "config.errors",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an old module path with the module that now holds its code (the same module object), and warns
    once per old path: the module then stays in `sys.modules` under the old name, so this finder is not asked
    again."""

    def __init__(self) -> None:
        self._own_specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        moved = _MOVED.get(fullname.removeprefix("tfhydra.")) if fullname.startswith("tfhydra.") else None
        return importlib.util.spec_from_loader(fullname, self) if moved else None

    def create_module(self, spec):
        new = "tfhydra." + _MOVED[spec.name.removeprefix("tfhydra.")]
        warnings.warn(
            f"{spec.name} is deprecated and will be removed in tfhydra {_REMOVED_IN}; import {new} instead",
            DeprecationWarning,
            stacklevel=_importer_level(),
        )
        module = importlib.import_module(new)
        self._own_specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module) -> None:
        """The module ran when it was first imported under its own name. The import system has just set its
        `__spec__` to the old path's (for every module it loads); the module's own is put back, so it still
        knows its own name (`importlib.reload` reads it)."""
        module.__spec__ = self._own_specs.pop(module.__spec__.name)


def _importer_level() -> int:
    """The `stacklevel` of the code that imported an old path (a warning attributed to the user's line is shown
    by Python's default filters when that line is `__main__`'s). `warnings.warn` itself steps over the import
    system's frozen frames; `importlib.import_module`'s own frame (Hydra's `_target_` lookup goes through it) is
    counted here."""
    import inspect

    frame = inspect.currentframe()
    frame, level = (frame.f_back.f_back if frame and frame.f_back else None), 2  # create_module's caller is 2
    while frame is not None and frame.f_code.co_filename.startswith(("<frozen importlib", importlib.__file__)):
        level += frame.f_code.co_filename == importlib.__file__
        frame = frame.f_back
    return level


sys.meta_path.append(_MovedModules())


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'tfhydra' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


def __dir__() -> list:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "train",
    "multirun",
    "Result",
    "load_result",
    "compare",
    "run",
    "compose",
    "check_command_line",
    "end_process",
    "ConfigError",
    "CONFIG_DIR",
]
__version__ = "0.1.0"
