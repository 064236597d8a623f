"""`python -m tfhydra.sweep summary <sweep dir>` (also `tfhydra-sweep summary ...`): rebuild
summary.csv/.md/.png of any sweep directory, including one that was interrupted or is
still running, from what its jobs left on disk.
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
    args = parser.parse_args(argv)
    try:
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


if __name__ == "__main__":
    sys.exit(main())
