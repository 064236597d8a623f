"""A digest of the data a run read (`data.digest` in metrics.json), so runs compared later can say whether their
data changed (tfhydra-compare marks it). Never a full read of large data at the run's start: a file up to
`HASHED_BYTES` is hashed whole; a larger file, or a directory (its first `LISTED` entries, sorted), is named by its
sizes and modification times. A source without a path (a dataset shipped with tfhydra or downloaded by Keras,
TFDS) has no digest: null. No TensorFlow.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

HASHED_BYTES = 16 * 2**20  # files up to this are hashed whole (about 30 ms at 500 MB/s)
LISTED = 10_000  # directory entries a digest walks at most


def data_digest(path: object) -> str | None:
    """`sha256:<hex16>` of a small file's bytes, `stat:<hex16>` of a large file's or a directory's sizes and
    modification times, None for no path or one that is not a regular file or directory."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        return None
    root = Path(path).expanduser()
    try:
        if root.is_file():
            size = root.stat().st_size
            if size <= HASHED_BYTES:
                return "sha256:" + hashlib.sha256(root.read_bytes()).hexdigest()[:16]
            return "stat:" + _hashed([f"{size}:{root.stat().st_mtime_ns}"])
        if root.is_dir():
            return "stat:" + _hashed(_listing(root))
    except OSError:
        return None
    return None


def _listing(root: Path) -> list[str]:
    entries: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if len(entries) >= LISTED:
                return entries
            path = Path(folder) / name
            stat = path.stat()
            entries.append(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}")
    return entries


def _hashed(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
