"""The CSV index: what the `csv` source's streaming passes learn of a file, kept so a later run reads none of them.

As the TFRecord label index (index.py, same directory, same stamp: size, modification time, inode, status-change
time), keyed by the file, its delimiter and label columns: the row count and the label cells as stored (an `.npy`
of fixed-width strings beside a small JSON, loaded without pickle and only when its declared shape is the rows the
JSON says and its bytes fit the file), and the training statistics of each training split seen (keyed by a digest
of the feature columns and the training rows, so another split seed or fraction computes its own; the last
`KEPT_STATISTICS` are kept). A file whose stamp changed is scanned again. Anything else found is ignored (logged).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tfhydra.config.bounded import load_json_bounded, read_text_bounded
from tfhydra.data.index import file_stamp, index_dir
from tfhydra.record.report import atomic_path, write_atomically

log = logging.getLogger("tfhydra")
VERSION = 1
KEPT_STATISTICS = 8


@dataclass
class Scan:
    """What one streaming pass found: data rows, and each row's label cells (shape (rows, label columns))."""

    rows: int
    labels: np.ndarray
    statistics: dict[str, list[list[float]]] = field(default_factory=dict)  # digest: [mean, std]


def paths(path: Path, delimiter: str, label_columns: list[str]) -> tuple[Path, Path]:
    key = json.dumps([str(path.resolve()), delimiter, label_columns])
    stem = index_dir() / f"csv-{hashlib.sha256(key.encode()).hexdigest()[:20]}"
    return stem.with_suffix(".json"), stem.with_suffix(".npy")


def statistics_key(features: list[str], train_rows: np.ndarray) -> str:
    digest = hashlib.sha256(json.dumps(features).encode())
    digest.update(np.ascontiguousarray(train_rows, dtype=np.int64).tobytes())
    return digest.hexdigest()[:24]


def load(path: Path, delimiter: str, label_columns: list[str]) -> Scan | None:
    """The kept scan of an unchanged file, or None."""
    meta_path, labels_path = paths(path, delimiter, label_columns)
    try:
        meta = load_json_bounded(read_text_bounded(meta_path))
    except (OSError, ValueError):
        return None
    try:
        if meta["version"] != VERSION or meta["stamp"] != file_stamp(str(path)):
            return None
        rows, stats = meta["rows"], meta["statistics"]
        if type(rows) is not int or not isinstance(stats, dict):
            raise ValueError("rows or statistics of the wrong type")
        return Scan(rows, load_labels(labels_path, rows, len(label_columns)), stats)
    except (OSError, ValueError, TypeError, KeyError) as error:
        log.warning("data: ignoring the CSV index %s (%s); reading the file again", meta_path, error)
        return None


def load_labels(path: Path, rows: int, columns: int) -> np.ndarray:
    """The label cells, read only when the header declares (rows, columns) of strings whose bytes the file holds."""
    with open(path, "rb") as file:
        header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
        version = np.lib.format.read_magic(file)
        if version not in header:
            raise ValueError(f"an .npy file of version {version}")
        shape, fortran, dtype = header[version](file)
        size = os.fstat(file.fileno()).st_size
        if shape != (rows, columns) or dtype.kind != "U" or fortran or dtype.itemsize * rows * columns > size:
            raise ValueError(f"label cells of shape {shape} and dtype {dtype}, not ({rows}, {columns}) strings")
        return np.fromfile(file, dtype=dtype, count=rows * columns).reshape(shape)


def save(path: Path, delimiter: str, label_columns: list[str], scan: Scan) -> None:
    """Replace the index of this file whole (a reader never sees half of it); an unwritable cache directory
    costs a scan on every run, not the run."""
    meta_path, labels_path = paths(path, delimiter, label_columns)
    kept = dict(list(scan.statistics.items())[-KEPT_STATISTICS:])
    meta = {"version": VERSION, "path": str(path), "stamp": file_stamp(str(path)), "rows": scan.rows}
    try:
        meta_path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(labels_path) as cells, open(cells, "wb") as file:
            np.save(file, np.ascontiguousarray(scan.labels), allow_pickle=False)
        write_atomically(meta_path, json.dumps({**meta, "statistics": kept}, separators=(",", ":")))
    except OSError as error:
        log.warning(
            "data: cannot write the CSV index %s (%s); set TFHYDRA_CACHE_DIR to a writable folder to scan the "
            "file only once",
            meta_path,
            error,
        )
