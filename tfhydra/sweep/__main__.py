"""`python -m tfhydra.sweep summary <sweep dir>` (also `tfhydra-sweep summary ...`): rebuild
summary.csv/.md/.png of any sweep directory, including one that was interrupted or is
still running, from what its jobs left on disk.

`tfhydra-sweep resume <sweep dir>`: run the sweep's recorded command (multirun.yaml) again into its
directory, which continues it: completed jobs are kept, interrupted ones resume, the others run.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tfhydra.errors import ConfigError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tfhydra.sweep", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    summary = commands.add_parser("summary", help="write summary.csv, summary.md and summary.png of a sweep")
    summary.add_argument("sweep_dir", type=Path, help="the sweep's directory (outputs/multirun/<date>/<time>)")
    resume = commands.add_parser("resume", help="run a sweep's recorded command again into its directory")
    resume.add_argument("sweep_dir", type=Path, help="the sweep's directory (outputs/multirun/<date>/<time>)")
    args = parser.parse_args(argv)
    try:
        if args.command == "resume":
            return _resume(args.sweep_dir)
        return _summary(args.sweep_dir)
    except ConfigError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1


def _summary(sweep_dir: Path) -> int:
    from tfhydra.sweep.summary import summarize

    if not sweep_dir.is_dir():
        raise ConfigError("sweep_dir", str(sweep_dir), "a sweep directory (outputs/multirun/<date>/<time>)",
                          "no such directory")
    result = summarize(sweep_dir, write=False)
    if not result.jobs:
        raise ConfigError("sweep_dir", str(sweep_dir), "a sweep directory holding job directories or multirun.yaml",
                          "no jobs found")
    from tfhydra.sweep.summary import write_summary

    write_summary(result)
    print(result.report())
    return 0


def resume_command(sweep_dir: Path) -> list[str]:
    """`python -m tfhydra --config-dir <its primary config dir> -m <the recorded overrides> hydra.sweep.dir=<sweep
    dir>` from the sweep's multirun.yaml: the same configs, its own project's included, from any directory."""
    import yaml

    from tfhydra.project import CONFIG_DIR, primary_config_dir
    from tfhydra.rundir import SweepPaths
    from tfhydra.sweep import SWEPT_KEYS_ENV

    accepted = "a sweep directory with the multirun.yaml its command wrote"
    if not sweep_dir.is_dir():
        raise ConfigError("sweep_dir", str(sweep_dir), accepted, "no such directory")
    try:
        recorded = yaml.safe_load(SweepPaths(sweep_dir).multirun.read_text())
        overrides = recorded["hydra"]["overrides"]
        task, hydra = list(overrides.get("task") or []), list(overrides.get("hydra") or [])
        if not all(isinstance(o, str) for o in task + hydra):
            raise TypeError("overrides that are not strings")
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as error:
        raise ConfigError("sweep_dir", str(sweep_dir), accepted, f"cannot read its multirun.yaml ({error})") from None
    handed_over = f"++hydra.job.env_set.{SWEPT_KEYS_ENV}="  # written by the sweep callback, which writes it again
    hydra = [o for o in hydra if not o.startswith(("hydra.sweep.dir=", "hydra.mode=", handed_over))]
    primary = primary_config_dir(recorded["hydra"]) or str(CONFIG_DIR)  # the project's conf/, or tfhydra's
    return [sys.executable, "-m", "tfhydra", "--config-dir", primary, "-m", *hydra, *task,
            f"hydra.sweep.dir={sweep_dir.resolve()}"]


def _resume(sweep_dir: Path) -> int:
    import os
    import shlex

    command = resume_command(sweep_dir)
    print(" ".join(shlex.quote(c) for c in command[1:]), flush=True)
    os.execv(command[0], command)  # the sweep's own command, in this process: its exit code is the sweep's


if __name__ == "__main__":
    sys.exit(main())
