"""Sources read from one CSV file with a header row: `csv` (numeric features) and `text_csv`.

Both hold out a stratified `data.test_fraction` and `data.val_fraction` of the rows (tfhydra/data/splits.py),
then fit what they learn from the data (feature mean and deviation; the text vocabulary) on the training rows
only, so nothing about the validation or test rows leaks into training.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf

from tfhydra.config.contracts import CLASSES, DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.data import csv_index, csv_stream
from tfhydra.data.csv_lines import count_lines, read_header, records
from tfhydra.data.csv_stream import Table, check_classes
from tfhydra.data.features import normalization
from tfhydra.data.inputs import RAW_TEXT, wanted_inputs
from tfhydra.data.labels import label_reader
from tfhydra.data.schemas import CsvDataConfig, TextCsvDataConfig
from tfhydra.data.source import DATA, Serving, Source, read_labels, source_from_arrays
from tfhydra.data.splits import hold_out


def read_table(path_text: str, delimiter: str) -> tuple[Path, dict[str, list[str]]]:
    """The file's columns by header name, as strings, held whole (text_csv, tfhydra-predict's inputs, labels CSVs;
    `csv` streams instead): read through csv_lines.py, so every line and field is within its limit."""
    path = Path(path_text).expanduser()
    header = read_header(path, delimiter)
    rows = []
    for number, row in records(path, delimiter, start=2):
        if len(row) != len(header):
            raise ConfigError(
                f"{path}:{number}",
                None,
                f"{len(header)} fields per row (data.delimiter={delimiter!r})",
                f"the row has {len(row)} fields",
            )
        rows.append(row)
    if not rows:
        raise ConfigError(str(path), None, "a header row and at least one data row", "it has 1 row(s)")
    return path, {name: [row[i] for row in rows] for i, name in enumerate(header)}


def column(columns: dict, name: str, key: str, path: Path):
    if name not in columns:
        raise ConfigError(key, name, list(columns), f"no such column in {path}")
    return columns[name]


def label_columns(cfg) -> list[str]:
    """`data.label`: one column name, or a list of them (several targets, or one 0/1 column per label)."""
    return [str(cfg.label)] if isinstance(cfg.label, str) else [str(name) for name in cfg.label]


def split_rows(cfg, path: Path, columns: dict[str, list[str]], seed: int):
    """(labels as the run's task reads them, output names, HeldOut: train, validation and test row indices)."""
    names = label_columns(cfg)
    cells = []
    for name in names:
        cells.append(column(columns, name, "data.label", path))
        empty = next((row for row, cell in enumerate(cells[-1]) if not cell.strip()), None)
        if empty is not None:  # it would become a class of its own, and the split would blame data.val_fraction
            raise ConfigError(
                f"{path}:{empty + 2}", None, f"a label in every row of column {name}", f"the {name} cell is empty"
            )
    values = np.array(cells[0]) if len(cells) == 1 else np.stack([np.array(c) for c in cells], axis=1)
    return held_labels(cfg, path, values, names, seed)


def held_labels(cfg, path: Path, values: np.ndarray, names: list[str], seed: int):
    """The label cells (one column, or one per label column) read by the run's task, and the held-out rows."""
    where = f"{path} ({', '.join(names)} column{'s' * (len(names) > 1)})"
    if values.ndim == 1 and label_reader().label_kind == CLASSES:
        check_classes(values, where)
    labels, outputs = read_labels(values, where, cfg, None, tuple(names))
    return labels, outputs, hold_out(labels, cfg, seed)


@DATA.register("csv", schema=CsvDataConfig)
def build_csv(cfg, seed: int) -> Source:
    """Numeric feature columns standardised with the training rows' mean and standard deviation, streamed from the
    file (csv_stream.py): what the run needs is gathered by bounded passes and kept in the CSV index."""
    path = Path(cfg.path).expanduser()
    header = read_header(path, cfg.delimiter)
    names = label_columns(cfg)
    lookup = {name: i for i, name in enumerate(header)}
    for name in names:
        column(lookup, name, "data.label", path)
    features = list(cfg.features) if cfg.features is not None else [c for c in header if c not in names]
    if not features:
        raise ConfigError("data.features", features, "at least one feature column", f"{path} has no other column")
    positions = [column(lookup, name, "data.features", path) for name in features]
    table = Table(path, header, cfg.delimiter, [lookup[name] for name in names], positions)
    scanned = kept = csv_index.load(path, cfg.delimiter, names)
    if scanned is None:
        count_lines(path)  # every line within its limit before TensorFlow reads one
        scanned = csv_stream.scan(table)
    cells = scanned.labels[:, 0] if len(names) == 1 else scanned.labels
    labels, outputs, held = held_labels(cfg, path, cells, names, seed)
    known = len(scanned.statistics)
    mean, std = csv_stream.train_statistics(table, scanned, held.train)
    if kept is None or known != len(scanned.statistics):
        csv_index.save(path, cfg.delimiter, names, scanned)
    return streamed_source(table, labels, outputs, held, (mean, std), features)


def streamed_source(table: Table, labels, outputs, held, statistics, features: list[str]) -> Source:
    """The three splits as (line, label) streams, decoded and standardised `BATCH` lines at a time."""
    stored = tf.constant(labels.astype(np.int64 if labels.dtype.kind in "iub" else np.float32))  # as in memory
    split = {
        name: csv_stream.split_lines(table, chosen, stored) if len(chosen) else None
        for name, chosen in (("train", held.train), ("validation", held.validation), ("test", held.test))
    }
    spec = DataSpec(
        (len(features),),
        len(outputs),
        tuple(outputs),
        len(held.train),
        len(held.validation),
        dtype="float32",
        test_size=len(held.test),
    )
    layer = normalization(*statistics)
    source = Source(
        split["train"],
        split["validation"],
        spec,
        decode_all=csv_stream.decoder(table, *statistics),
        train_labels=labels[held.train],
        test=split["test"],
    )
    source.serving = csv_stream.StreamedServing(
        tf.TensorSpec((len(features),), tf.float32),
        layer,
        csv_stream.raw_reader(table, split["validation"]),
        (layer,),
        f"the {len(features)} raw feature columns {features} as float32, standardised with the training rows' mean "
        "and deviation in the graph",
        csv_stream.raw_reader(table, split["test"]),
    )
    return source


@DATA.register("text_csv", schema=TextCsvDataConfig)
def build_text_csv(cfg, seed: int) -> Source:
    """Token ids from a TextVectorization fitted on the training rows (standardised: lowercase, no punctuation).

    Examples are int64 ids of shape (sequence_length,): 0 pads, 1 is out-of-vocabulary.
    """
    from tfhydra.platform.keras_lib import keras

    path, columns = read_table(cfg.path, cfg.delimiter)
    labels, names, held = split_rows(cfg, path, columns, seed)
    train_idx, val_idx, test_idx = held.train, held.validation, held.test
    texts = np.array(column(columns, cfg.text, "data.text", path), dtype=object)
    if wanted_inputs() == RAW_TEXT:
        return raw_text_source(texts.astype(str), labels, names, held)
    vectorize = keras.layers.TextVectorization(max_tokens=cfg.vocab_size, output_sequence_length=cfg.sequence_length)
    vectorize.adapt(texts[train_idx], batch_size=1024)
    if vectorize.vocabulary_size() <= 2:  # only padding and out-of-vocabulary: nothing to look words up in
        raise ConfigError(
            f"{path} ({cfg.text} column)",
            None,
            "texts with words in the training rows",
            "no word to learn a vocabulary from (the texts are empty or punctuation only)",
        )
    ids = vectorize(texts).numpy()
    source = source_from_arrays(
        ids[train_idx],
        labels[train_idx],
        ids[val_idx],
        labels[val_idx],
        names,
        vocab_size=int(vectorize.vocabulary_size()),
        test=(ids[test_idx], labels[test_idx]) if len(test_idx) else None,
    )
    source.serving = Serving(
        tf.TensorSpec((), tf.string),
        vectorize,
        (texts[val_idx].astype(str), labels[val_idx]),
        (vectorize,),
        f"raw text (one string per example), split into the {vectorize.vocabulary_size()}-word "
        "vocabulary fitted on the training rows in the graph",
        (texts[test_idx].astype(str), labels[test_idx]) if len(test_idx) else None,
    )
    return source


def raw_text_source(texts: np.ndarray, labels: np.ndarray, names: tuple[str, ...], held) -> Source:
    """The texts themselves, one string per example, for a model that tokenizes them with its own preprocessor
    (model=keras_hub: the preset's tokenizer, in the model's graph): no vocabulary is fitted here, and the export
    serves the same strings (`prepare` is the identity)."""
    train_idx, val_idx, test_idx = held.train, held.validation, held.test
    source = source_from_arrays(
        texts[train_idx],
        labels[train_idx],
        texts[val_idx],
        labels[val_idx],
        names,
        test=(texts[test_idx], labels[test_idx]) if len(test_idx) else None,
    )
    source.serving = Serving(
        tf.TensorSpec((), tf.string),
        tf.identity,
        (texts[val_idx], labels[val_idx]),
        (),
        "raw text (one string per example), tokenized in the graph by the model's own preprocessor",
        (texts[test_idx], labels[test_idx]) if len(test_idx) else None,
    )
    return source
