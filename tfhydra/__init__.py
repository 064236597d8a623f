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

register_resolvers()  # conf/tfhydra.yaml names sweep job directories with them

__all__ = ["run", "compose", "check_command_line", "end_process", "ConfigError"]
__version__ = "0.1.0"


def compose(overrides=(), config_dir=None):
    """The config `tfhydra-train <overrides>` would run, checked by the same pre-flight (one ConfigError
    for the first mistake), with its `hydra` node: `run(compose([...]), run_dir=...)` then records the
    overrides in `.hydra/` like the command line does. For notebooks and scripts (README, "From Python").

    `config_dir` is a project's own config directory (tfhydra/project.py); without one, `./conf` or
    `$TFHYDRA_CONFIG_DIR` is used as the command does, and tfhydra's own configs otherwise."""
    from hydra import compose as hydra_compose, initialize_config_dir

    from tfhydra.preflight import check_overrides
    from tfhydra.project import project_config_dir

    primary = project_config_dir(["--config-dir", str(config_dir)] if config_dir is not None else ()) or CONFIG_DIR
    check_overrides(primary, "config", list(overrides))
    with initialize_config_dir(config_dir=str(primary), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def run(cfg, run_dir=None):
    """Train one job from a composed config; returns the monitored validation metric.

    TensorFlow is imported here, not at package import, so `--help`, `--cfg` and
    configuration errors answer without paying for it. A job of a sweep (`-m`) records a
    failure and returns NaN instead of raising, so the rest of the sweep still runs
    (tfhydra/sweep/trial.py); the sweep's exit code reports it at the end.
    """
    from tfhydra.console import one_line_errors
    from tfhydra.runtime import auto_threads, in_sweep

    def job(cfg, run_dir=None, callbacks=()):
        from tfhydra.job import run_job  # imports TensorFlow: inside, so a sweep records even that failing

        return run_job(cfg, run_dir=run_dir, threads=auto_threads(), callbacks=callbacks)  # threads: 0, or per job

    try:
        if run_dir is None and in_sweep():
            from tfhydra.sweep.trial import run_trial

            return run_trial(cfg, job)
        with one_line_errors():
            if run_dir is not None:  # from Python: the caller knows where and what
                return job(cfg, run_dir=run_dir)
            from tfhydra.console import end_summary, start_summary

            start_summary()
            returned = job(cfg)
            end_summary()
            return returned
    except KeyboardInterrupt as interrupt:  # tfhydra.trainer.state.Interrupted: SIGTERM or Ctrl-C
        if run_dir is not None or not hasattr(interrupt, "exit_code") or os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        import sys

        print(f"Stopped: {interrupt.reason}; {resume_hint()}", file=sys.stderr, flush=True)
        sys.exit(interrupt.exit_code)


def resume_hint() -> str:
    """How to continue what a signal stopped: the run's own command, pinned to its directory."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from tfhydra.lifecycle import resume_command

    hydra = HydraConfig.get()
    hint = f"resume with: {resume_command(hydra.runtime.output_dir)}"
    if hydra.mode == RunMode.MULTIRUN:
        hint += (f" (python -m tfhydra.sweep summary {hydra.sweep.dir} lists the sweep's completed, interrupted and "
                 "not started jobs)")
    return hint
