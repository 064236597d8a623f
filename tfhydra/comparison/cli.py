"""`tfhydra-compare RUN_OR_SWEEP_DIR... [--sort COLUMN] [--desc] [--format table|markdown|csv] [--output FILE]`.

Prints tfhydra/comparison/table.py's table: a terminal table by default, Markdown or CSV on request; `--output`
writes it to a file instead. A mistake is one `Error:` line. No TensorFlow.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tfhydra.config.errors import ConfigError

USAGE = (
    "usage: tfhydra-compare RUN_OR_SWEEP_DIR... [--sort COLUMN] [--desc] [--format table|markdown|csv] "
    "[--output FILE] (also python -m tfhydra.comparison)"
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise ConfigError("command line", None, USAGE.removeprefix("usage: "), message)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    parser = _Parser(prog="tfhydra-compare", add_help=False)
    parser.add_argument("directories", nargs="+")
    parser.add_argument("--sort", default=None)
    parser.add_argument("--desc", action="store_true")
    parser.add_argument("--format", choices=("table", "markdown", "csv"), default="table")
    parser.add_argument("--output", "-o", default=None)
    try:
        args = parser.parse_intermixed_args(argv)
        from tfhydra.comparison.table import compare

        table = compare(args.directories)
        if args.sort:
            table = table.sorted_by(args.sort, args.desc)
        text = {"table": table.to_text, "markdown": table.to_markdown, "csv": table.to_csv}[args.format]()
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
        else:
            print(text, end="")
    except ConfigError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"Error: --output={args.output}: {error.strerror}", file=sys.stderr)
        return 1
    return 0
