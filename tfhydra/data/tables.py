"""Sources read from one CSV file with a header row: `csv` (numeric features) and `text_csv`.

Both hold out a stratified `data.test_fraction` and `data.val_fraction` of the rows (tfhydra/data/splits.py),
then fit what they learn from the data (feature mean and deviation; the text vocabulary) on the training rows
only, so nothing about the validation or test rows leaks into training.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import tensorflow as tf

from tfhydra.config.errors import ConfigError
from tfhydra.data.features import feature_source
from tfhydra.data.inputs import RAW_TEXT, wanted_inputs
from tfhydra.data.schemas import CsvDataConfig, TextCsvDataConfig
from tfhydra.data.source import DATA, Serving, Source, read_labels, source_from_arrays
from tfhydra.data.splits import hold_out


def read_table(path_text: str, delimiter: str) -> tuple[Path, dict[str, list[str]]]:
    """The file's columns by header name, as strings."""
    path = Path(path_text).expanduser()
    try:
        with open(path, newline="", encoding="utf-8") as file:
            rows = list(csv.reader(file, delimiter=delimiter))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise ConfigError(str(path), None, "a UTF-8 CSV file with a header row", f"cannot read it ({error})") from None
    if len(rows) < 2:
        raise ConfigError(str(path), None, "a header row and at least one data row", f"it has {len(rows)} row(s)")
    header = rows[0]
    check_header(header, path)
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise ConfigError(
                f"{path}:{number}",
                None,
                f"{len(header)} fields per row (data.delimiter={delimiter!r})",
                f"the row has {len(row)} fields",
            )
    return path, {name: [row[i] for row in rows[1:]] for i, name in enumerate(header)}


def check_header(header: list[str], path: Path) -> None:
    """Column names must be distinct: columns are looked up by name, so a second `a` would silently replace
    the first (as a feature, the label or the text). Names are compared without surrounding spaces, since
    `a, a` is as ambiguous to the reader as `a,a`."""
    first: dict[str, int] = {}
    for number, name in enumerate(header, start=1):
        seen = first.setdefault(name.strip(), number)
        if seen != number:
            shown = repr(name) if name == header[seen - 1] else f"{header[seen - 1]!r} and {name!r}"
            raise ConfigError(
                f"{path}:1",
                None,
                "a header row of distinct column names (rename one of them)",
                f"column {shown} appears twice in the header (columns {seen} and {number})",
            )


def column(columns: dict[str, list[str]], name: str, key: str, path: Path) -> list[str]:
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
    labels, outputs = read_labels(
        values, f"{path} ({', '.join(names)} column{'s' * (len(names) > 1)})", cfg, None, tuple(names)
    )
    return labels, outputs, hold_out(labels, cfg, seed)


@DATA.register("csv", schema=CsvDataConfig)
def build_csv(cfg, seed: int) -> Source:
    """Numeric feature columns standardised with the training rows' mean and standard deviation."""
    path, columns = read_table(cfg.path, cfg.delimiter)
    labels, names, held = split_rows(cfg, path, columns, seed)
    train_idx, val_idx, test_idx = held.train, held.validation, held.test
    features = list(cfg.features) if cfg.features is not None else [c for c in columns if c not in label_columns(cfg)]
    if not features:
        raise ConfigError("data.features", features, "at least one feature column", f"{path} has no other column")
    raw = np.stack([numbers(column(columns, name, "data.features", path), name, path) for name in features], axis=1)
    return feature_source(
        raw[train_idx],
        labels[train_idx],
        raw[val_idx],
        labels[val_idx],
        names,
        test=(raw[test_idx], labels[test_idx]) if len(test_idx) else None,
        what=f"the {len(features)} raw feature columns {features}",
    )


def numbers(values: list[str], name: str, path: Path, accepted: str | None = None) -> np.ndarray:
    """A feature column as float64; a cell that is not a finite number is named by its line (`accepted`: what to
    say instead of training's advice, e.g. for tfhydra-predict's inputs)."""
    result = np.empty(len(values), dtype=np.float64)
    for row, value in enumerate(values):
        try:
            result[row] = float(value)
        except ValueError:
            result[row] = np.nan
        if not np.isfinite(result[row]):
            raise ConfigError(
                f"{path}:{row + 2}",
                None,
                accepted
                or f"a finite number in every row of column {name} (or leave the column out with data.features)",
                f"column {name} holds {value!r}",
            )
    return result


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
