"""`task=classification` (the default): one class per example, a softmax head, sparse crossentropy; the
behaviour of tfhydra before tasks, bit for bit. A numeric target or multi-hot rows are refused in one line that
names the task that takes them."""

from __future__ import annotations

import numpy as np

from tfhydra.config.contracts import CLASSES, DataSpec, Head, LabelSample
from tfhydra.task.base import MANY_VALUES, TASKS, Task, as_numbers, found_kind, parse_options, shortest
from tfhydra.task.schemas import ClassificationTaskConfig


class Classification(Task):
    name = "classification"
    label_kind = CLASSES
    headline = ("accuracy",)

    def read_labels(
        self, values, where: str, cfg_data, names=None, columns=(), classes=None
    ) -> tuple[np.ndarray, tuple[str, ...]]:
        values = np.asarray(values)
        if len(columns) > 1:
            raise self.refused(
                where,
                f"{len(columns)} label columns",
                "one label column; task=multilabel or task=regression take several",
            )
        self.check_classes(values, where, cfg_data)
        if names is not None:  # a shipped split, read with the training split's classes
            return classes(values, where, names)
        return classes(values, where, cfg_data.get("class_names"), cfg_data.get("num_classes"))

    def check_sample(self, sample: LabelSample, cfg_data) -> None:
        """The pre-flight's question (no TensorFlow): one label column, of classes (`check_classes`)."""
        if len(sample.columns) > 1:
            raise self.refused(
                sample.where,
                f"{len(sample.columns)} label columns",
                "one label column; task=multilabel or task=regression take several",
            )
        self.check_classes(sample.values, sample.where, cfg_data, sample.train_rows, sample.whole)

    def check_classes(
        self, values: np.ndarray, where: str, cfg_data, train_rows: int | None = None, whole: bool = True
    ) -> None:
        """Labels that are not classes: non-integer numbers, or integers with many distinct values of which some are
        seen once (a numeric target: task=regression), and multi-hot rows (task=multilabel). `train_rows` (the
        pre-flight's sample, tfhydra/data/label_sample.py): how many of these rows the training split would hold;
        more distinct integers than half of them are a numeric target too (most classes would have one training
        example or none). `whole` False: `values` are a file's first rows, in which a value seen once proves
        nothing of the file."""
        numbers = as_numbers(values)
        if numbers is None:
            return
        found = found_kind(values)
        if numbers.ndim == 2 and numbers.shape[1] > 1:
            if "multi-hot" in found:
                raise self.refused(where, found, "one class per example; use task=multilabel for multi-hot rows")
            if "one-hot" not in found:
                raise self.refused(where, found, "one class per example; use task=regression for several targets")
            return
        flat = numbers.reshape(-1)
        if not np.all(np.mod(flat, 1) == 0):
            raise self.refused(
                where, found, "integer class indices or class names; use task=regression for a numeric target"
            )
        _, counts = np.unique(flat, return_counts=True)
        fixed = cfg_data.get("class_names") or cfg_data.get("num_classes")
        if not fixed and train_rows is not None and len(counts) > train_rows / 2:
            raise self.refused(
                where,
                f"{found}{'' if whole else ' (the first rows of the file)'}: more distinct values than half the "
                f"{train_rows} training rows they give",
                "classes with two training examples or more each; use task=regression for a numeric target",
            )
        if not fixed and whole and len(counts) > MANY_VALUES and counts.min() < 2:
            raise self.refused(
                where, found, "classes, each seen at least twice; use task=regression for a numeric target"
            )

    def strata(self, labels: np.ndarray) -> np.ndarray | None:
        return labels

    def head(self, spec: DataSpec, train_labels: np.ndarray | None) -> Head:
        return Head(spec.num_classes, "softmax", "probabilities")

    def record(self) -> dict:
        return {"name": self.name, "headline": list(self.headline)}

    def prediction_header(self, names: tuple[str, ...], top_k: int) -> list[str]:
        ranks = [[f"class_{i}", f"probability_{i}"] for i in range(1, top_k + 1)]
        return [c for pair in ranks for c in pair]

    def prediction_rows(self, outputs: np.ndarray, names: tuple[str, ...], top_k: int) -> list[tuple[list, dict]]:
        """The k most probable classes per row, most probable first; of equal ones the lower class id first, as
        argmax (and so evaluate's accuracy) takes it."""
        ids = outputs.argmax(-1)[:, None] if top_k == 1 else np.argsort(-outputs, axis=-1, kind="stable")[:, :top_k]
        values = np.take_along_axis(outputs, ids, axis=-1)
        rows = []
        for row_ids, row_values in zip(ids, values, strict=True):
            classes = [names[int(i)] for i in row_ids]
            cells = [x for c, p in zip(classes, row_values, strict=True) for x in (c, shortest(p))]
            rows.append((cells, {"classes": classes, "probabilities": [float(shortest(p)) for p in row_values]}))
        return rows

    def predicted_classes(self, outputs: np.ndarray) -> np.ndarray | None:
        return outputs.argmax(-1)


@TASKS.register("classification", schema=ClassificationTaskConfig)
def build_classification(node) -> Classification:
    return Classification(**parse_options(node))
