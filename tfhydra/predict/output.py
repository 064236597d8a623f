"""Batches through the served model, and the predictions written as CSV or JSON Lines.

The examples are batched and prefetched by tf.data, so the next batch is decoded while the model runs this one.
A file output is written beside its target and renamed into place at the end: a file that exists is complete,
and a failure halfway leaves none. Standard output gets each batch's rows as they come.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import tensorflow as tf

from tfhydra.config.errors import ConfigError, first_line, write_failure


@dataclass
class Counted:
    examples: int = 0
    predicted_images: set = field(default_factory=set)  # the image files that were predicted (to name the others)
    labelled: int = 0  # rows whose label column names one of the run's classes
    correct: int = 0


def run_batches(layout, found, batch_size: int, writer) -> Counted:
    """Every example of `found` through the run's model (`serving_default`, or its TFLite file), `batch_size` at a
    time; the rows go to `writer`."""
    counted = Counted()
    label = found.extra_columns.index(found.label_column) if found.label_column else None
    classes = {name: i for i, name in enumerate(writer.class_names)}
    dataset = found.dataset
    batches = iter(dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)) if dataset is not None else iter(())
    while (batch := next_batch(batches, found, layout)) is not None:
        names = [n.decode() for n in batch["name"].numpy()]
        if found.image_files:
            counted.predicted_images.update(names)
        outputs = layout.probabilities(batch["inputs"])  # the served model's float32 outputs, as the task reads them
        extra = (
            [[c.decode() for c in row] for row in batch["extra"].numpy()] if found.extra_columns else [[]] * len(names)
        )
        writer.write(names, extra, writer.task.prediction_rows(outputs, writer.class_names, writer.top_k))
        counted.examples += len(names)
        predicted = writer.task.predicted_classes(outputs)  # None: a task without classes (regression)
        if label is not None and predicted is not None:
            truth = [class_index(row[label], classes) for row in extra]
            counted.labelled += sum(t is not None for t in truth)
            counted.correct += sum(t == int(i) for t, i in zip(truth, predicted, strict=True) if t is not None)
    return counted


def next_batch(batches, found, layout):
    """The next batch; an image file the model cannot take is named (`bad_images`: a second pass, made only then,
    so nothing is spent on checks while every file is fine)."""
    try:
        return next(batches)
    except StopIteration:
        return None
    except tf.errors.OpError as error:
        from tfhydra.predict.inputs import bad_images

        named = bad_images(found.image_files, layout) if found.image_files else None
        if named is not None:
            raise named from None
        raise ConfigError("INPUT", None, found.accepted, f"TensorFlow cannot read it ({first_line(error)})") from None


def class_index(label: str, classes: dict[str, int]) -> int | None:
    """A label cell as a class index: a class name, or an integer index (integer-labelled runs name classes 0..n-1)."""
    label = label.strip()
    if label in classes:
        return classes[label]
    if label.lstrip("-").isdigit() and 0 <= int(label) < len(classes):
        return int(label)
    return None


class PredictionWriter:
    """Rows `input, <carried columns>, <the task's columns>` (CSV) or objects `{"input", "columns", <the task's
    fields>}` (JSON Lines), to `output` or stdout. The task (tfhydra/task/) says what its outputs are: for a
    classification `class_1, probability_1, ..., class_k, probability_k`; docs/tasks.md lists the others."""

    def __init__(self, output: str | None, fmt: str, extra_columns: list[str], top_k: int, class_names=(), task=None):
        from tfhydra.task.build import task_of_record

        self.output, self.format, self.extra_columns, self.top_k = output, fmt, list(extra_columns), top_k
        self.class_names = tuple(class_names)
        self.task = task if task is not None else task_of_record(None)
        self.partial = None if output is None else Path(output).expanduser().with_name(f".{Path(output).name}.partial")
        self.file: TextIO | None = None  # stdout, or the partial file until the last row is written
        self.table: Any = None  # a csv.writer on the file, for format=csv

    def __enter__(self) -> PredictionWriter:
        try:
            self.file = sys.stdout if self.partial is None else open(self.partial, "w", newline="", encoding="utf-8")
        except OSError as error:
            raise self._failure(error) from None
        if self.format == "csv":
            self.table = csv.writer(self.file)
            header = self.task.prediction_header(self.class_names, self.top_k)
            self.table.writerow(["input", *self.extra_columns, *header])
        return self

    def write(self, names: list[str], extra: list[list[str]], rows: list[tuple[list, dict]]) -> None:
        """`rows`: (CSV cells, JSON fields) of each example, from the task's `prediction_rows`."""
        assert self.file is not None, "a PredictionWriter writes inside its `with` block"
        try:
            for name, cells, (task_cells, fields) in zip(names, extra, rows, strict=True):
                if self.table is not None:
                    self.table.writerow([name, *cells, *task_cells])
                else:
                    line = {
                        "input": name,
                        **({"columns": dict(zip(self.extra_columns, cells, strict=True))} if cells else {}),
                        **fields,
                    }
                    self.file.write(json.dumps(line) + "\n")
            self.file.flush()
        except OSError as error:
            raise self._failure(error) from None

    def __exit__(self, kind, error, trace) -> None:
        if self.partial is None:
            return
        assert self.file is not None and self.output is not None  # a partial file: __enter__ opened it for `output`
        self.file.close()
        if kind is None:
            os.replace(self.partial, Path(self.output).expanduser())
        else:
            self.partial.unlink(missing_ok=True)

    def _failure(self, error: OSError) -> ConfigError:
        path, reason = write_failure(error, self.partial or "stdout") or (str(self.output), str(error))
        return ConfigError(
            "--output", self.output, "a file in a directory you can write to", f"cannot write {path} ({reason})"
        )
