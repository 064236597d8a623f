"""The `csv` source read as a stream: bounded passes gather what the run needs, then every split streams from the file.

Before training (each pass chunked, its memory independent of the file's size):
1. the line scan (csv_lines.py `count_lines`): every physical line within `MAX_LINE_BYTES`, and their number;
2. the label pass (`scan`): every record parsed by TensorFlow's CSV op in batches of `BATCH` lines, all its fields
   checked (their number; the feature cells finite numbers), the label cells kept: the run's task reads them whole
   (the split is stratified over them, as before), as the TFRecord source keeps its label index;
3. the statistics pass (`train_statistics`): mean and deviation of each feature over the training rows only.
The label cells, the row count and the statistics are kept in the CSV index (csv_index.py), so a later run of an
unchanged file reads none of them. A cell TensorFlow refuses is looked up again by Python's `csv` module from the
failing batch on, so the line names the file, the line and the column as before.

Training, validation and test are then `TextLineDataset`s of the file, each keeping its rows (by position) and their
labels `BATCH` lines at a time, then decoded and standardised `BATCH` lines at a time (`decode_all`): no split is held
in memory (a split read again may be cached in memory by `data.cache=auto` when it fits the budget: docs/data.md). A
record must be one line: a quoted field holding a line break does not stream (refused in one line).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from tfhydra.config.errors import ConfigError, first_line
from tfhydra.data.csv_index import Scan, statistics_key
from tfhydra.data.csv_lines import numbers, records
from tfhydra.data.source import AUTOTUNE, Serving

BATCH = 4096  # lines parsed at once by tf.io.decode_csv
MAX_CLASSES = 100_000  # distinct label values, when the task reads classes


@dataclass(frozen=True)
class Table:
    """A CSV file as the passes read it: its header, delimiter, the label and feature columns by position."""

    path: Path
    header: list[str]
    delimiter: str
    label_columns: list[int]
    feature_columns: list[int]

    def lines(self) -> tf.data.Dataset:
        return tf.data.TextLineDataset(str(self.path), buffer_size=1 << 20).skip(1)

    def parse_all(self, lines):
        """Every field of a batch of lines: labels and unused columns as strings (empty allowed), features float64."""
        defaults = [
            tf.constant([], tf.float64) if i in self.feature_columns else tf.constant([""], tf.string)
            for i in range(len(self.header))
        ]
        fields = tf.io.decode_csv(lines, defaults, field_delim=self.delimiter)
        labels = tf.stack([fields[i] for i in self.label_columns], axis=1)
        return labels, tf.stack([fields[i] for i in self.feature_columns], axis=1)

    def features(self, lines):
        """The feature columns of a batch of lines, float64, in `feature_columns` order."""
        order = sorted(self.feature_columns)
        fields = tf.io.decode_csv(
            lines, [tf.constant([], tf.float64)] * len(order), field_delim=self.delimiter, select_cols=order
        )
        return tf.stack([fields[order.index(i)] for i in self.feature_columns], axis=1)


def scan(table: Table) -> Scan:
    """The label pass: (rows, each row's label cells as strings), every record checked on the way."""
    batches = table.lines().batch(BATCH).map(table.parse_all, num_parallel_calls=AUTOTUNE)
    cells, done = [], 0
    iterator = iter(batches)
    while True:
        try:
            labels, features = next(iterator)
        except StopIteration:
            break
        except (tf.errors.OpError, UnicodeDecodeError) as error:  # TensorFlow's message holding the bad bytes
            raise locate(table, 2 + done, error) from None
        if not np.isfinite(features.numpy()).all():
            raise locate(table, 2 + done, None)
        cells.append(labels.numpy().astype(bytes))
        done += len(cells[-1])
    if not done:
        raise ConfigError(str(table.path), None, "a header row and at least one data row", "it has no data row")
    found = np.concatenate(cells)
    try:
        text = np.char.decode(found, "utf-8")
    except UnicodeDecodeError:
        raise locate(table, 2, None) from None
    blank = np.char.strip(text) == ""
    empty = np.flatnonzero(blank.any(axis=1))
    if len(empty):  # it would become a class of its own, and the split would blame data.val_fraction
        column = table.header[table.label_columns[int(np.argmax(blank[empty[0]]))]]
        raise ConfigError(
            f"{table.path}:{empty[0] + 2}",
            None,
            f"a label in every row of column {column}",
            f"the {column} cell is empty",
        )
    return Scan(done, text)


def locate(table: Table, start: int, error: Exception | None) -> ConfigError:
    """The first bad record from line `start` on, as Python's `csv` module reads it (the checks of before: the
    fields' number, finite numbers), in one line; a batch it reads without fault holds a record spanning lines."""
    for line, row in records(table.path, table.delimiter, start):
        if len(row) != len(table.header):
            return ConfigError(
                f"{table.path}:{line}",
                None,
                f"{len(table.header)} fields per row (data.delimiter={table.delimiter!r})",
                f"the row has {len(row)} fields",
            )
        for i in table.feature_columns:
            numbers([row[i]], table.header[i], table.path, first_row=line)
        if line >= start + BATCH:
            break
    return ConfigError(
        f"{table.path}:{start}",
        None,
        "one CSV record per line (a quoted field holding a line break does not stream)",
        f"cannot read the lines from {start} on ({first_line(error) if error else 'a record spans lines'})",
    )


def check_classes(values: np.ndarray, where: str) -> None:
    """Refuse more distinct label values than `MAX_CLASSES` before the task makes a class of each."""
    distinct = len(np.unique(values))
    if distinct > MAX_CLASSES:
        raise ConfigError(
            where,
            None,
            f"at most {MAX_CLASSES} classes (a limit of tfhydra's CSV reader)",
            f"the label column holds {distinct} distinct values",
        )


def train_statistics(table: Table, scanned: Scan, train_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and deviation (population, a constant feature's 1) of each feature over the training rows: kept in the
    scan under a digest of the columns and rows, else one pass merging each batch's (count, mean, squared
    deviations) exactly as numpy's two-pass figures would be, to rounding."""
    names = [table.header[i] for i in table.feature_columns]
    key = statistics_key(names, train_rows)
    kept = scanned.statistics.get(key)
    if kept is not None and valid(kept, len(names)):
        return np.asarray(kept[0], dtype=np.float64), np.asarray(kept[1], dtype=np.float64)
    keep = np.zeros(scanned.rows, dtype=bool)
    keep[train_rows] = True
    count, mean, squares, done = 0, np.zeros(len(names)), np.zeros(len(names)), 0
    for batch in table.lines().batch(BATCH).map(table.features, num_parallel_calls=AUTOTUNE):
        x = batch.numpy()
        x, done = x[keep[done : done + len(x)]], done + len(x)
        if not len(x):
            continue
        batch_mean = x.mean(axis=0)
        batch_squares = ((x - batch_mean) ** 2).sum(axis=0)
        total = count + len(x)
        delta = batch_mean - mean
        mean = mean + delta * (len(x) / total)
        squares = squares + batch_squares + delta**2 * (count * len(x) / total)
        count = total
    std = np.sqrt(squares / max(count, 1))
    std = np.where(std > 0, std, 1.0)
    scanned.statistics[key] = [mean.tolist(), std.tolist()]
    return mean, std


def valid(kept, width: int) -> bool:
    return (
        isinstance(kept, list)
        and len(kept) == 2
        and all(isinstance(v, list) and len(v) == width for v in kept)
        and all(type(n) is float and np.isfinite(n) for v in kept for n in v)
        and all(n > 0 for n in kept[1])
    )


def split_lines(table: Table, chosen: np.ndarray, labels: tf.Tensor) -> tf.data.Dataset:
    """(line, label) of the rows at `chosen` (sorted), in file order, from `labels` (one per row of the file): the
    lines are kept by position `BATCH` at a time (a per-line filter costs ten times the whole decode)."""
    keep = np.zeros(int(labels.shape[0]), dtype=bool)
    keep[chosen] = True
    mask = tf.constant(keep)

    def select(batch, lines):
        start = batch * BATCH
        rows = tf.range(start, start + tf.cast(tf.shape(lines)[0], tf.int64))
        kept = tf.gather(mask, rows)
        return tf.boolean_mask(lines, kept), tf.gather(labels, tf.boolean_mask(rows, kept))

    return table.lines().batch(BATCH).enumerate().map(select).unbatch()


def decoder(table: Table, mean: np.ndarray, std: np.ndarray):
    """`Source.decode_all`: (line, label) elements to (standardised float32 features, label), `BATCH` at a time."""
    shift, scale = tf.constant(mean, tf.float64), tf.constant(std, tf.float64)

    def decode(lines, labels):
        return tf.cast((table.features(lines) - shift) / scale, tf.float32), labels

    def decode_all(dataset: tf.data.Dataset, count: int) -> tf.data.Dataset:
        return dataset.batch(BATCH).map(decode, num_parallel_calls=AUTOTUNE).unbatch()

    return decode_all


def raw_reader(table: Table, dataset: tf.data.Dataset | None):
    """A function reading a split's raw features (float32, as stored) and labels, for evaluate's raw inputs."""
    if dataset is None:
        return None

    def read() -> tuple[np.ndarray, np.ndarray]:
        parts = [(table.features(x).numpy().astype(np.float32), y.numpy()) for x, y in dataset.batch(BATCH)]
        return np.concatenate([x for x, _ in parts]), np.concatenate([y for _, y in parts])

    return read


class StreamedServing(Serving):
    """A Serving whose raw validation and test examples are read from the file on first use (evaluate), not
    held from the build on: the arguments are the functions that read them (None: no such split)."""

    _reads: dict

    @property
    def raw_validation(self):
        return self._read("validation")

    @raw_validation.setter
    def raw_validation(self, read):
        self._set("validation", read)

    @property
    def raw_test(self):
        return self._read("test")

    @raw_test.setter
    def raw_test(self, read):
        self._set("test", read)

    def _set(self, split: str, read) -> None:
        # the dataclass's __init__ calls the setters before any other attribute exists
        vars(self).setdefault("_reads", {})[split] = [read, None]

    def _read(self, split: str):
        read, value = self._reads[split]
        if value is None and read is not None:
            value = self._reads[split][1] = read()
        return value
