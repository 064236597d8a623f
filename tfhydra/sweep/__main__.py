"""`python -m tfhydra.sweep summary <sweep dir>` (also `tfhydra-sweep summary ...`): rebuild
summary.csv/.md/.png of any sweep directory, including one that was interrupted or is
still running, from what its jobs left on disk.

`tfhydra-sweep resume [--trust-sweep] [--config-dir DIR] <sweep dir> [hydra settings]`: run the sweep's
recorded command (multirun.yaml) again into its directory, which continues it: completed jobs are kept,
interrupted ones resume, the others run. What multirun.yaml says passes the trust boundary first
(tfhydra/trust): only plain values of config keys and options of the user's own config directories. Hydra
settings (launcher, sweeper, their keys, the jobs' environment, callbacks) come only from this command
line, after the directory: one that the file records and the command does not give is refused by name. The
config directory is this command's (`--config-dir`, `$TFHYDRA_CONFIG_DIR` or `./conf`), never the one the
file names, unless `--trust-sweep`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tfhydra.config.errors import ConfigError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tfhydra.sweep", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    summary = commands.add_parser("summary", help="write summary.csv, summary.md and summary.png of a sweep")
    summary.add_argument("sweep_dir", type=Path, help="the sweep's directory (outputs/multirun/<date>/<time>)")
    resume = commands.add_parser("resume", help="run a sweep's recorded command again into its directory")
    resume.add_argument("sweep_dir", type=Path, help="the sweep's directory (outputs/multirun/<date>/<time>)")
    resume.add_argument(
        "settings",
        nargs="*",
        help="hydra settings of this resume (hydra/launcher=submitit_slurm, "
        "hydra.launcher.partition=gpu ...): taken from here only, never from multirun.yaml",
    )
    resume.add_argument(
        "--trust-sweep",
        action="store_true",
        help="take multirun.yaml as it is (its hydra settings, "
        "interpolations, _target_ nodes and config directory): only for a sweep you trust",
    )
    resume.add_argument(
        "--config-dir",
        "-cd",
        default=None,
        help="your project's config directory (default: $TFHYDRA_CONFIG_DIR, else ./conf)",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "resume":
            return _resume(args.sweep_dir, args.trust_sweep, args.config_dir, args.settings)
        return _summary(args.sweep_dir)
    except ConfigError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1


def _summary(sweep_dir: Path) -> int:
    from tfhydra.sweep.summary import summarize

    if not sweep_dir.is_dir():
        raise ConfigError(
            "sweep_dir", str(sweep_dir), "a sweep directory (outputs/multirun/<date>/<time>)", "no such directory"
        )
    result = summarize(sweep_dir, write=False)
    if not result.jobs:
        raise ConfigError(
            "sweep_dir", str(sweep_dir), "a sweep directory holding job directories or multirun.yaml", "no jobs found"
        )
    from tfhydra.sweep.summary import write_summary

    write_summary(result)
    print(result.report())
    return 0


def resume_command(
    sweep_dir: Path, trusted: bool = False, config_dir: str | None = None, settings: list[str] | None = None
) -> list[str]:
    """`python -m tfhydra [--config-dir <dir>] -m <the recorded overrides> hydra.sweep.dir=<sweep dir>`: the
    sweep's command from its multirun.yaml, read through the trust boundary (tfhydra/trust). The config
    directory is this command's (tfhydra/config/project.py), or with `trusted` the one the sweep recorded."""
    from tfhydra.config.project import project_config_dir
    from tfhydra.trust.readers import sweep_command

    if not sweep_dir.is_dir():
        raise ConfigError(
            "sweep_dir",
            str(sweep_dir),
            "a sweep directory with the multirun.yaml its command wrote",
            "no such directory",
        )
    project = project_config_dir(["--config-dir", config_dir] if config_dir else [])
    recorded = sweep_command(sweep_dir, project, trusted, check_settings(settings or []))
    primary = recorded.recorded_config_dir if trusted and recorded.recorded_config_dir else project
    flags = ["--config-dir", str(primary)] if primary else []
    return [
        sys.executable,
        "-m",
        "tfhydra",
        *flags,
        "-m",
        *recorded.hydra,
        *recorded.task,
        f"hydra.sweep.dir={sweep_dir.resolve()}",
    ]


def check_settings(settings: list[str]) -> list[str]:
    """resume's own arguments after the directory: hydra settings only (the sweep itself is multirun.yaml's)."""
    for setting in settings:
        key = setting.lstrip("+~").split("=", 1)[0]
        if "=" not in setting or not key.startswith(("hydra.", "hydra/")):
            raise ConfigError(
                setting,
                None,
                "hydra settings such as hydra/launcher=joblib or hydra.launcher.n_jobs=2 "
                "(to change what the sweep trains, run a new sweep)",
                "resume runs the recorded sweep",
            )
    return settings


def _resume(
    sweep_dir: Path, trusted: bool = False, config_dir: str | None = None, settings: list[str] | None = None
) -> int:
    import os
    import shlex

    from tfhydra.trust.readers import trusted_warning

    command = resume_command(sweep_dir, trusted, config_dir, settings)
    if settings:
        print(
            f"resume: hydra settings from this command line (never from multirun.yaml): {' '.join(settings)}",
            file=sys.stderr,
            flush=True,
        )
    if trusted:
        warning = trusted_warning("--trust-sweep", sweep_dir)
        print(warning, file=sys.stderr, flush=True)
        _log_trusted(sweep_dir, warning, command)
    print(" ".join(shlex.quote(c) for c in command[1:]), flush=True)
    os.execv(command[0], command)  # the sweep's own command, in this process: its exit code is the sweep's


def _log_trusted(sweep_dir: Path, warning: str, command: list[str]) -> None:
    """A lifted gate is written where the sweep keeps its record: `<sweep>/trusted.log`, one line per resume."""
    import shlex
    import time

    from tfhydra.record.rundir import SweepPaths, contained

    try:
        with open(contained(SweepPaths(sweep_dir).trusted_log, sweep_dir), "a", encoding="utf-8") as log:
            log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {warning}: {' '.join(map(shlex.quote, command[1:]))}\n")
    except OSError as error:
        raise ConfigError(
            str(sweep_dir), None, "a sweep directory you can write to", f"cannot record the trust ({error.strerror})"
        ) from None


if __name__ == "__main__":
    sys.exit(main())
