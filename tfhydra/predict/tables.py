"""CSV and text INPUTs: a CSV of the run's feature columns (csv runs) or of texts (text_csv runs), a text file.

A CSV is read with the reader training used (tfhydra/data/tables.py `read_table`: a header row, the run's
`data.delimiter`, distinct column names, every row complete), whole and checked before the model runs, so a bad
cell is named by `file:line` before any prediction is written. Columns other than the model's are carried
through to the output; the run's label column among them is also scored (docs/deploy.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf

from tfhydra.config.errors import ConfigError
from tfhydra.data.tables import read_table
from tfhydra.predict.layout import Layout
from tfhydra.predict.stream import Inputs, no_extra


def read_table_input(path: Path, layout: Layout) -> Inputs:
    path, columns = read_table(str(path), layout.delimiter)
    wanted = layout.features if layout.kind == "features" else [layout.text_column]
    for name in wanted:
        if name not in columns:
            what = (
                f"the run's feature columns {wanted}"
                if layout.kind == "features"
                else f"a {name!r} column of texts (the run's data.text)"
            )
            raise ConfigError(
                str(path),
                None,
                f"a CSV with {what}; other columns are carried through to the output",
                f"it has no column {name!r} (its columns: {', '.join(columns)})",
            )
    rows = len(next(iter(columns.values())))
    if layout.kind == "features":
        inputs = np.stack([numbers(columns[name], name, path) for name in wanted], axis=1).astype(np.float32)
    else:
        inputs = np.array(columns[layout.text_column], dtype=object).astype(str)
    extra = [name for name in columns if name not in wanted]
    cells = np.array([columns[name] for name in extra], dtype=str).T.reshape(rows, len(extra))
    names = np.array([f"{path}:{line}" for line in range(2, rows + 2)])
    dataset = tf.data.Dataset.from_tensor_slices({"name": names, "inputs": inputs, "extra": cells})
    return Inputs(dataset, extra, layout.label_column if layout.label_column in extra else None)


def numbers(values: list[str], name: str, path: Path) -> np.ndarray:
    """A feature column as float64 (then float32, as training took it), read as training reads it."""
    from tfhydra.data.csv_lines import numbers as table_numbers

    return table_numbers(values, name, path, f"a finite number in every row of the feature column {name}")


def read_text_lines(path: Path, layout: Layout) -> Inputs:
    """One text per line (UTF-8); blank lines are skipped, and each text is named by its line number."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(
            str(path), None, "a UTF-8 text file, one text per line", f"cannot read it ({error})"
        ) from None
    kept = [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]
    if not kept:
        raise ConfigError(str(path), None, "a UTF-8 text file, one text per line", "it holds no text")
    names = np.array([f"{path}:{number}" for number, _ in kept])
    texts = np.array([line for _, line in kept])
    dataset = tf.data.Dataset.from_tensor_slices((names, texts)).map(
        lambda name, text: {"name": name, "inputs": text, "extra": no_extra()}
    )
    return Inputs(dataset)
