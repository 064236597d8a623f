"""How a source's labels are read, split and subset: the data room's side of the contract with the run's task
(tfhydra/config/contracts.py `LabelReader`).

The task (tfhydra/task/) decides what a label is (a class index, 0/1, a multi-hot row, numbers); the data room
reads columns and arrays and hands them to the task's reader, set for the duration of one source's build by
`reading_labels` (a context variable, so no source builder, and no user `_target_` source, takes a new argument).
Without a task (tfhydra.data.pipeline.build_datasets called alone) the labels are class indices, as always. No
TensorFlow.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar

import numpy as np

from tfhydra.config.contracts import BINARY, CLASSES, MULTI_HOT, NUMBERS, DataSpec, Head, LabelReader

__all__ = [
    "BINARY",
    "CLASSES",
    "MULTI_HOT",
    "NUMBERS",
    "ClassLabels",
    "LabelReader",
    "label_reader",
    "reading_labels",
    "strata",
]


class ClassLabels:
    """Today's labels: one class index per example (tfhydra/data/source.py `class_labels`), stratified splits."""

    label_kind = CLASSES

    def read_labels(self, values, where, cfg_data, names, columns, classes) -> tuple[np.ndarray, tuple[str, ...]]:
        if names is not None:
            return classes(values, where, names)
        return classes(values, where, cfg_data.get("class_names"), cfg_data.get("num_classes"))

    def strata(self, labels: np.ndarray) -> np.ndarray | None:
        return labels

    def head(self, spec: DataSpec, train_labels: np.ndarray | None) -> Head | None:
        return None  # DataSpec's default: a softmax over its classes


class Reading:
    """One source's build under a reader: `asked` turns true when the source read its labels through it, so a
    source that reads class indices only (the Keras datasets, tfds: not yet
    per task) is refused under a task that needs other labels, in one line, not a shape error inside Keras."""

    def __init__(self, reader: LabelReader | None):
        self.reader, self.asked = reader, False


_READING: ContextVar[Reading | None] = ContextVar("tfhydra_label_reading", default=None)


@contextlib.contextmanager
def reading_labels(reader: LabelReader | None):
    """Sources built inside this block read their labels with `reader` (None: class indices)."""
    reading = Reading(reader)
    token = _READING.set(reading)
    try:
        yield reading
    finally:
        _READING.reset(token)


def label_reader(asking: bool = False) -> LabelReader:
    """The reader of the source being built; outside `reading_labels` (or with None), class indices. `asking`: the
    source reads its labels with it (tfhydra/data/source.py `read_labels`)."""
    reading = _READING.get()
    if reading is not None and asking:
        reading.asked = True
    return reading.reader if reading is not None and reading.reader is not None else ClassLabels()


def strata(labels: np.ndarray) -> np.ndarray | None:
    return label_reader().strata(np.asarray(labels))
