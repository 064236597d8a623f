"""The labels of a source that can be read without TensorFlow, read cheaply for the run plan: a CSV's label
column(s) (`data=csv`, `data=text_csv`) and an npz's training labels (`data=npz`), so that a label that does not fit
the run's task (a numeric target under `task=classification`, class names under `task=regression`) is one line
before TensorFlow is imported and before a run directory exists (tfhydra/runner/plan.py asks the task,
tfhydra/task/checks.py).

The pre-flight runs before every command and plans every job of a sweep, so the read is bounded and remembered:
at most `MAX_BYTES` of a CSV (the first rows; the rest of the file is never read) and of an npz's label array (its
header, then the first rows' bytes, never the other arrays); an npz array of Python objects is refused, as the job's
reader refuses it (numpy's allow_pickle=False: loading one runs code). What the sample cannot decide (a file that
does not parse, a missing column, a damaged row) is left to the job, which names it with its line. No TensorFlow.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import zipfile
import zlib
from pathlib import Path

import numpy as np

from tfhydra.config.contracts import LabelSample
from tfhydra.config.errors import ConfigError
from tfhydra.data.splits import training_share

MAX_BYTES = 1 << 20  # of a CSV, or of an npz's label array: a table under 1 MiB is read whole
SOURCES = ("csv", "text_csv", "npz")  # the registered sources whose labels this reads
# what numpy's and zipfile's readers raise on a file that is not an npz or is damaged
UNREADABLE = (
    OSError,
    ValueError,
    TypeError,
    EOFError,
    zipfile.BadZipFile,
    zlib.error,
    NotImplementedError,
    RuntimeError,
)


def read_label_sample(cfg_data) -> LabelSample | None:
    """The labels of `cfg_data`'s source as a bounded sample; None when the source is not one whose labels can be
    read here (another source, a user's `_target_`) or the file cannot say (the job then reads it and names why)."""
    name = cfg_data.get("name")
    columns: tuple[str, ...] = ()
    if cfg_data.get("_target_") or name not in SOURCES or not isinstance(cfg_data.get("path"), str):
        return None
    path = Path(cfg_data.path).expanduser()
    try:
        stat = path.stat()
    except OSError:
        return None
    if not path.is_file():
        return None
    if name == "npz":
        array = cfg_data.get("y_train")
        if not isinstance(array, str):
            return None
        read = _npz_labels(str(path), stat.st_mtime_ns, stat.st_size, array)
        if read is None:
            return None
        values, whole = read
        ships_validation, ships_test = cfg_data.get("x_val") is not None, cfg_data.get("x_test") is not None
        where = f"{path}[{array}]"
    else:
        label = cfg_data.get("label")
        columns = (str(label),) if isinstance(label, str) else tuple(str(c) for c in label or ())
        delimiter = cfg_data.get("delimiter")
        if not columns or not isinstance(delimiter, str) or len(delimiter) != 1:
            return None
        read = _csv_labels(str(path), stat.st_mtime_ns, stat.st_size, columns, delimiter)
        if read is None:
            return None
        values, whole = read
        ships_validation = ships_test = False
        where = f"{path} ({', '.join(columns)} column{'s' * (len(columns) > 1)})"
    share = training_share(cfg_data, ships_validation, ships_test)
    return LabelSample(values, where, columns, whole, max(1, math.floor(len(values) * share)))


@functools.lru_cache(maxsize=32)  # every job of a sweep plans again; a changed file has another mtime or size
def _csv_labels(
    path: str, mtime_ns: int, size: int, columns: tuple[str, ...], delimiter: str
) -> tuple[np.ndarray, bool] | None:
    """(the label cells of the first rows, as strings: one column, or one per label column; every row read?)."""
    with open(path, "rb") as file:
        data = file.read(MAX_BYTES + 1)
    whole = len(data) <= MAX_BYTES
    if not whole:
        data = data[: data.rfind(b"\n", 0, MAX_BYTES) + 1]  # whole lines only (a cut character would not decode)
    try:
        rows = list(csv.reader(io.StringIO(data.decode("utf-8"), newline=""), delimiter=delimiter))
    except (UnicodeDecodeError, csv.Error):
        return None
    if len(rows) < 2 or not all(c in rows[0] for c in columns):
        return None
    header = rows[0]
    indices = [header.index(c) for c in columns]
    body = rows[1:] if whole else rows[1:-1]  # the last line read may end inside a quoted field that goes on
    cells = [[row[i] for i in indices] for row in body if len(row) == len(header)]
    cells = [row for row in cells if all(cell.strip() for cell in row)]  # an empty label: the job names its line
    if not cells:
        return None
    values = np.array(cells, dtype=str)
    return (values[:, 0] if len(columns) == 1 else values), whole


@functools.lru_cache(maxsize=32)
def _npz_labels(path: str, mtime_ns: int, size: int, array: str) -> tuple[np.ndarray, bool] | None:
    """(the first rows of the npz's `array`, as stored; every row read?), reading its .npy header and at most
    MAX_BYTES of its data."""
    from numpy.lib import format as npy

    try:
        with zipfile.ZipFile(path) as archive:
            if f"{array}.npy" not in archive.namelist():
                return None
            with archive.open(f"{array}.npy") as member:
                version = npy.read_magic(member)
                if version not in ((1, 0), (2, 0)):
                    return None
                header = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
                shape, fortran, dtype = header(member)
                if dtype.hasobject:
                    raise ConfigError(
                        f"{path}[{array}]",
                        None,
                        "a NumPy .npz file (numpy.savez) of numeric arrays",
                        "the array holds Python objects, which tfhydra does not load (numpy's allow_pickle=False: "
                        "loading them runs code); save the labels as numbers or strings",
                    )
                per_row = dtype.itemsize * math.prod(shape[1:]) if shape else 0
                if not shape or not shape[0] or not per_row or per_row > MAX_BYTES:  # no labels, or a row over the cap
                    return None
                rows = min(shape[0], MAX_BYTES // per_row)
                if fortran and len(shape) > 1 and rows < shape[0]:
                    return None  # a column-major array's first rows are not its first bytes
                count = rows * math.prod(shape[1:])
                data = member.read(count * dtype.itemsize)
                if len(data) != count * dtype.itemsize:
                    return None
                values = np.frombuffer(data, dtype=dtype, count=count)
                values = values.reshape((rows, *shape[1:]), order="F" if fortran else "C")
    except UNREADABLE:  # not an npz, damaged, an entry zipfile cannot open: the job's reader names what is wrong
        return None
    return values, rows == shape[0]
