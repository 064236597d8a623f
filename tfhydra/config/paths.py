"""The paths a run reads, checked before anything opens them: an existing regular file or a directory, never a
special file (a FIFO blocks the open until a writer comes; /dev/zero never ends). No TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfhydra.config.schema import Rule, exists


def special_kind(path: Path) -> str | None:
    """`a FIFO`, `a character device`, `a block device` or `a socket` for such a path (opening or reading one can
    block forever or never end: /dev/zero, a named pipe); None for a regular file, a directory or no such path."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    kinds = (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), None)


def special_refusal(path: Path) -> str | None:
    """The one-line problem of a special file (`a FIFO, which tfhydra never reads ...`), or None for any other path:
    what every key naming a file or directory to read says of one."""
    kind = special_kind(path)
    return f"{kind}, which tfhydra never reads (it could block or never end)" if kind else None


def is_readable_path(v: Any) -> bool:
    """An existing regular file or directory: never a special file."""
    return exists(v) and special_kind(Path(v).expanduser()) is None


@dataclass(frozen=True)
class PathRule(Rule):
    """A path the run reads: it must exist and be a regular file or a directory; the refusal says which it is not."""

    def problem(self, value: Any) -> str:
        if value is None:
            return super().problem(value)
        return special_refusal(Path(str(value)).expanduser()) or self.refusal
