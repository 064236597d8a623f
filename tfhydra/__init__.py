"""tfhydra: declarative, Hydra-configured TensorFlow training.

The TensorFlow Model Optimization Toolkit works with Keras 2 only, so tfhydra uses
tf_keras everywhere and makes `tf.keras` mean tf_keras for the user's own code too:
`TF_USE_LEGACY_KERAS=1` must be set before TensorFlow is first imported, which is why
this module sets it and imports nothing heavy.
"""
import os

os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep C++ info logs out of train.log

from tfhydra.cli import check_command_line  # noqa: E402  (light: Hydra and OmegaConf only)
from tfhydra.errors import ConfigError  # noqa: E402
from tfhydra.sweep import register_resolvers  # noqa: E402

register_resolvers()  # conf/config.yaml names sweep job directories with them

__all__ = ["run", "check_command_line", "ConfigError"]
__version__ = "0.1.0"


def run(cfg, run_dir=None):
    """Train one job from a composed config; returns the monitored validation metric.

    TensorFlow is imported here, not at package import, so `--help`, `--cfg` and
    configuration errors answer without paying for it. A job of a sweep (`-m`) records a
    failure and returns NaN instead of raising, so the rest of the sweep still runs
    (tfhydra/sweep/trial.py); the sweep's exit code reports it at the end.
    """
    from tfhydra.cli import one_line_errors
    from tfhydra.sweep import in_sweep

    if run_dir is None and in_sweep():
        from tfhydra.sweep.trial import run_trial

        return run_trial(cfg)
    from tfhydra.job import run_job

    with one_line_errors():
        return run_job(cfg, run_dir=run_dir)
