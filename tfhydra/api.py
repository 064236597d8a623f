"""The Python API under the command: compose a config as `tfhydra-train <overrides>` would, and run it.

`tfhydra.compose` and `tfhydra.run` live here so that tfhydra/__init__.py stays a list of names;
tfhydra/notebook.py builds `tfhydra.train` and `tfhydra.multirun` (a run back as a `Result`) on them.
Nothing here imports TensorFlow: `run` imports tfhydra.runner.job (and with it TensorFlow) when it starts a job.
"""

from __future__ import annotations

import os

from tfhydra.config.project import CONFIG_DIR


def compose(overrides=(), config_dir=None):
    """The config `tfhydra-train <overrides>` would run, checked by the same pre-flight (one ConfigError
    for the first mistake), with its `hydra` node: `run(compose([...]), run_dir=...)` then records the
    overrides in `.hydra/` like the command line does. For notebooks and scripts (README, "From Python").

    `config_dir` is a project's own config directory (tfhydra/config/project.py); without one, `./conf` or
    `$TFHYDRA_CONFIG_DIR` is used as the command does, and tfhydra's own configs otherwise."""
    from hydra import compose as hydra_compose

    from tfhydra.cli.preflight import check_overrides
    from tfhydra.config.hydra_api import initialize
    from tfhydra.config.project import project_config_dir

    primary = project_config_dir(["--config-dir", str(config_dir)] if config_dir is not None else ()) or CONFIG_DIR
    check_overrides(primary, "config", list(overrides))
    with initialize(primary):
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
        with one_line_errors():
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
