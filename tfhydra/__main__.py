"""`tfhydra-train`, `python -m tfhydra` and the checkout's `python train.py`: one command, three names.

The configs are the project's `conf/` followed by tfhydra's own (installed with the package;
tfhydra/config/project.py). Then: the pre-flight, Hydra, the run, the fast exit.
"""

from __future__ import annotations

import contextlib
import os
import sys

import tfhydra  # first: tfhydra/platform/keras_env.py sets TF_USE_LEGACY_KERAS before anything can import TensorFlow

# isort: split
from tfhydra.config.composition import with_open_keys
from tfhydra.config.project import CONFIG_DIR, import_from_working_directory, project_config_dir
from tfhydra.platform import startclock
from tfhydra.platform.command import set_command
from tfhydra.platform.quiet import QUIET


def main(argv: list[str] | None = None) -> None:
    startclock.mark("main")  # the interpreter, tfhydra and Hydra are imported
    argv = with_open_keys(list(sys.argv[1:] if argv is None else argv))  # trainer.stop_at.<metric>=... as typed
    if "--version" in argv:
        print(version_line())
        return
    set_command(os.path.basename(sys.argv[0]))
    try:
        project = project_config_dir(argv)
    except tfhydra.ConfigError as error:
        print(f"Error: {error}", file=sys.stderr)
        sys.exit(1)
    if {"--help", "-h"} & set(argv):  # tfhydra's page, its descriptions from conf/'s comments (tfhydra/cli/help.py)
        from tfhydra.cli.help import print_help
        from tfhydra.platform.command import train_command

        sys.exit(print_help(project or CONFIG_DIR, argv, train_command()))
    import_from_working_directory()
    if not {"-m", "--multirun"} & set(argv):  # a sweep's jobs may be other processes sharing descriptor 2
        QUIET.start()  # TensorFlow's lines held back, kept in train.log (tfhydra/platform/quiet.py)
    try:
        from tfhydra.cli.preflight import checked_command_line

        checked = checked_command_line(project or CONFIG_DIR, argv=argv)  # then TensorFlow starts loading
        startclock.mark("preflight")

        import hydra

        from tfhydra.config.hydra_api import execution_whitelist, mode_from_preflight, version_base

        sys.argv = [sys.argv[0], *argv]  # Hydra reads the command line from sys.argv
        from tfhydra.launch.lost_jobs import guarded_launchers

        # Hydra 1.4 calls only what the composed config names in hydra.callbacks (docs/design.md, "Hydra 1.3 and 1.4")
        options = {**version_base(), **execution_whitelist(checked.hydra_calls, keyword="execution_whitelist")}
        # a job a cluster killed: the summary and one line (tfhydra/launch/lost_jobs.py); the run mode the pre-flight
        # composed, so Hydra does not compose the whole config a third time to read it
        mode = mode_from_preflight(checked.mode) if checked.mode_known else contextlib.nullcontext()
        with guarded_launchers(), mode:
            hydra.main(config_path=str(project or CONFIG_DIR), config_name="config", **options)(tfhydra.run)()
    finally:
        QUIET.release()  # also for a run that ends before training: what it said is passed on first
    tfhydra.end_process()


def version_line() -> str:
    """tfhydra's version and those of what it runs on, read from the installed packages' metadata (no
    TensorFlow import: a second, not a few milliseconds)."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    others = ", ".join(f"{name} {installed(name)}" for name in ("hydra-core", "tensorflow", "tf-keras"))
    return f"tfhydra {tfhydra.__version__} ({others}; configs: {CONFIG_DIR})"


if __name__ == "__main__":
    main()
