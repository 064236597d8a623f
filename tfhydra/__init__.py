"""tfhydra: declarative, Hydra-configured TensorFlow training.

A list of names. Importing it sets the Keras environment (tfhydra/keras_env.py: tf_keras, before TensorFlow
loads) and registers conf/'s resolvers (tfhydra/resolvers.py), and nothing else: the pre-flight, the sweep room
and the Python API load when one of their names is first used (PEP 562), so `import tfhydra.record` does not
load the command line.
"""
from tfhydra import keras_env  # noqa: F401  (first: TF_USE_LEGACY_KERAS before anything can import TensorFlow)
from tfhydra.errors import ConfigError
from tfhydra.project import CONFIG_DIR  # tfhydra's conf/ (hydra_plugins/tfhydra_conf looks for this module)
from tfhydra.resolvers import register_resolvers

register_resolvers()  # conf/tfhydra.yaml names sweep job directories with them

# name -> the module that defines it, imported on first use
_LAZY = {"check_command_line": "tfhydra.preflight", "end_process": "tfhydra.startup",
         "compose": "tfhydra.api", "run": "tfhydra.api", "resume_hint": "tfhydra.api",
         "train": "tfhydra.notebook", "multirun": "tfhydra.notebook", "Result": "tfhydra.notebook",
         "load_result": "tfhydra.notebook"}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'tfhydra' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)


def __dir__() -> list:
    return sorted({*globals(), *_LAZY})


__all__ = ["train", "multirun", "Result", "load_result", "run", "compose", "check_command_line", "end_process",
           "ConfigError", "CONFIG_DIR"]
__version__ = "0.1.0"
