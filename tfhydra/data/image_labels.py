"""The labels of `image_folder`'s images, read by the run's task: the class folders (one class per image), or
`data.labels_csv`, a CSV of `file,labels` rows (several labels per image: multi-hot rows for task=multilabel).

A labels CSV lists every image of the source: `file` is a path relative to `data.path` and inside it (an absolute
path, or one whose `..` leads out, is refused: the CSV names files, it does not reach them elsewhere), `labels` the
image's label names separated by spaces or `|` (an empty cell: none of them). The labels are the sorted names found,
or `data.class_names` in its order.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from tfhydra.config.errors import ConfigError
from tfhydra.data.source import read_labels
from tfhydra.data.tables import column, read_table

SEPARATORS = re.compile(r"[|\s]+")  # between the label names of one cell: spaces or |


def folder_labels(labels: np.ndarray, names: tuple[str, ...], folder: Path, cfg, fixed=None):
    """The class folders' indices as the task reads them: the folder names when none spells a number (so a task
    that takes no class names says "class names"), else the indices, with the classes fixed to the folders."""
    where = f"{folder} (class folders)"
    if any(re.fullmatch(r"\s*[-+]?\d+(\.\d*)?\s*", n) for n in names):
        return read_labels(labels, where, cfg, fixed or names)
    return read_labels(np.array(names)[labels] if len(labels) else np.array([], str), where, cfg, fixed or names)


def labels_table(cfg, root: Path) -> tuple[list[str], np.ndarray, tuple[str, ...]]:
    """(image paths, labels as the task reads them, output names) from `data.labels_csv`."""
    path, columns = read_table(str(Path(cfg.labels_csv).expanduser()), ",")
    files = column(columns, "file", "data.labels_csv", path)
    cells = [
        [n for n in SEPARATORS.split(cell.strip()) if n] for cell in column(columns, "labels", "data.labels_csv", path)
    ]
    paths = []
    inside = os.path.normpath(root)
    for row, name in enumerate(files, start=2):
        image = Path(os.path.normpath(root / name.strip()))  # `..` and an absolute path are read as written
        if os.path.commonpath([inside, image]) != inside:
            raise ConfigError(
                f"{path}:{row}",
                None,
                f"a path relative to data.path={root}, inside it",
                f"{name.strip()!r} leads out of it",
            )
        if not image.is_file():
            raise ConfigError(f"{path}:{row}", None, f"a file under data.path={root}", f"no such image {image}")
        paths.append(str(image))
    names = tuple(str(n) for n in cfg.get("class_names") or sorted({n for c in cells for n in c}))
    unknown = next(((row, n) for row, c in enumerate(cells, start=2) for n in c if n not in names), None)
    if unknown is not None:
        raise ConfigError(f"{path}:{unknown[0]}", None, f"the labels of data.class_names ({', '.join(names)})",
                          f"label {unknown[1]!r}")  # fmt: skip
    multi_hot = np.array([[int(n in c) for n in names] for c in cells], dtype=np.int64).reshape(len(cells), len(names))
    # the names found fix the outputs, as a shipped split's are (they are not CSV columns: one labels column)
    labels, outputs = read_labels(multi_hot, f"{path} (labels column)", cfg, names)
    return paths, labels, outputs
