"""tfhydra: declarative, Hydra-configured TensorFlow training.

The TensorFlow Model Optimization Toolkit works with Keras 2 only, so tfhydra uses
tf_keras everywhere and makes `tf.keras` mean tf_keras for the user's own code too:
`TF_USE_LEGACY_KERAS=1` must be set before TensorFlow is first imported, which is why
this module sets it and imports nothing heavy.
"""
import os

os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep C++ info logs out of train.log

from tfhydra.preflight import check_command_line  # noqa: E402  (light: Hydra and OmegaConf only)
from tfhydra.startup import end_process  # noqa: E402
from tfhydra.errors import ConfigError  # noqa: E402
from tfhydra.project import CONFIG_DIR  # noqa: E402  (tfhydra's conf/: the checkout's, or the wheel's)
from tfhydra.sweep import register_resolvers  # noqa: E402
from tfhydra.api import compose, run, resume_hint  # noqa: E402,F401  (the Python API: compose a config, run it)
from tfhydra.notebook import Result, load_result, multirun, train  # noqa: E402  (... and get the run back)

register_resolvers()  # conf/tfhydra.yaml names sweep job directories with them

__all__ = ["train", "multirun", "Result", "load_result", "run", "compose", "check_command_line", "end_process",
           "ConfigError"]
__version__ = "0.1.0"
