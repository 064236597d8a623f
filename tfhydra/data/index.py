"""The label index: each shard's labels, read once per dataset and kept outside the user's data.

A stratified split, `data.fraction` or an unknown number of classes needs every training label, which a
TFRecord shard holds only inside its records: one full read of the data. The index keeps the result per
file, keyed by the file's path and stamp (size and modification time; for a local file also its inode and
status-change time, which no copy or `touch -d` sets back), so later runs read a small JSON file instead;
a shard whose stamp changed is read again (its stale entry is never used) and the index rewritten. (Version
1 keyed by size and mtime alone, and kept a shard rewritten with the same size and mtime: issue 35.)

Where: `$TFHYDRA_CACHE_DIR/index`, else `$XDG_CACHE_HOME/tfhydra/index`, else `~/.cache/tfhydra/index`,
never beside the data (which may be read-only or shared). One file per set of shards and label feature.
An index file is data, not code: it is read as JSON and every entry is checked for plain values of the
expected types; anything else is ignored (and rebuilt) with a log line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tfhydra.config.bounded import load_json_bounded, read_text_bounded
from tfhydra.record.report import write_atomically

log = logging.getLogger("tfhydra")
VERSION = 2


def index_dir() -> Path:
    root = os.environ.get("TFHYDRA_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "index"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "tfhydra" / "index"


def index_path(files: list[str], label_key: str) -> Path:
    digest = hashlib.sha256(json.dumps([label_key, sorted(files)]).encode()).hexdigest()[:20]
    return index_dir() / f"labels-{digest}.json"


def file_stamp(path: str) -> list[int]:
    """[size in bytes, modification time in ns] through tf.io.gfile, so gs:// and hdfs:// shards work too; for a
    local file also [inode, status-change time in ns]: the kernel sets those on every write and replace."""
    import tensorflow as tf

    stat = tf.io.gfile.stat(path)
    stamp = [int(stat.length), int(stat.mtime_nsec)]
    if "://" not in path:
        local = os.stat(path)
        stamp += [int(local.st_ino), int(local.st_ctime_ns)]
    return stamp


def indexed_labels(files: list[str], label_key: str, scan: Callable[[str], np.ndarray]) -> list[np.ndarray]:
    """Each file's labels in record order: from the index where the file is unchanged, else `scan(file)`."""
    path = index_path(files, label_key)
    entries = read_index(path, label_key)
    labels, scanned, fresh = [], [], []
    for file in files:
        stamp = file_stamp(file)
        entry = entries.get(file)
        if entry is not None and entry["stamp"] == stamp:
            found = np.asarray(entry["labels"], dtype=np.int64)
        else:
            found = np.asarray(scan(file), dtype=np.int64)
            scanned.append(file)
        labels.append(found)
        fresh.append({"path": file, "stamp": stamp, "labels": found.tolist()})
    if scanned:
        stale = sum(file in entries for file in scanned)
        write_index(path, label_key, fresh)
        log.info(
            "data: read the labels of %d of %d file(s) (%s); label index %s",
            len(scanned),
            len(files),
            f"{stale} changed since the index was written" if stale else "not indexed yet",
            path,
        )
    else:
        log.info("data: labels of %d file(s) from the label index %s (no file changed)", len(files), path)
    return labels


def read_index(path: Path, label_key: str) -> dict[str, dict]:
    """{file path: entry} of a valid index file; {} when there is none or it is not one (logged)."""
    try:
        text = read_text_bounded(path)
    except (OSError, ValueError):
        return {}
    try:
        loaded = load_json_bounded(text)
        return _valid_entries(loaded, label_key)
    except (ValueError, TypeError, KeyError) as error:
        log.warning("data: ignoring the label index %s (%s); reading the labels again", path, error)
        return {}


def _valid_entries(loaded, label_key: str) -> dict[str, dict]:
    if not isinstance(loaded, dict) or loaded.get("version") != VERSION or loaded.get("label_key") != label_key:
        raise ValueError("not a tfhydra label index of this version and label feature")
    entries = {}
    for entry in loaded["files"]:  # KeyError, TypeError: not an index (the caller warns)
        if set(entry) != {"path", "stamp", "labels"} or not isinstance(entry["path"], str):
            raise ValueError("an entry without exactly path, stamp, labels")
        if (
            not isinstance(entry["labels"], list)
            or not isinstance(entry["stamp"], list)
            or not all(type(n) is int for n in [*entry["stamp"], *entry["labels"]])
        ):
            raise ValueError(f"the entry of {entry['path']} holds values that are not integers")
        entries[entry["path"]] = entry
    return entries


def write_index(path: Path, label_key: str, entries: list[dict]) -> None:
    """Replace the index whole (a reader never sees half a file); a cache directory that cannot be written
    costs a scan on every run, not the run."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        index = {"version": VERSION, "label_key": label_key, "files": entries}
        write_atomically(path, json.dumps(index, separators=(",", ":")))
    except OSError as error:
        log.warning(
            "data: cannot write the label index %s (%s); set TFHYDRA_CACHE_DIR to a writable folder to "
            "read the labels only once",
            path,
            error,
        )
