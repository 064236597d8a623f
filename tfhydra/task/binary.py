"""`task=binary`: one sigmoid output, the probability of the positive class (the second of two), binary
crossentropy, accuracy at `task.threshold` and AUC. Labels: 0/1 (integers, or floats that are 0 or 1), two class
names (sorted, or in `data.class_names` order: the second is positive), or one-hot rows of two."""

from __future__ import annotations

import numpy as np

from tfhydra.config.contracts import BINARY, DataSpec, Head, LabelSample
from tfhydra.task.base import TASKS, Task, as_numbers, found_kind, parse_options, shortest
from tfhydra.task.ranking import roc_auc
from tfhydra.task.schemas import BinaryTaskConfig

TAKES = "0/1 labels or two class names; task=classification takes more classes"


class Binary(Task):
    name = "binary"
    label_kind = BINARY
    headline = ("auc", "accuracy")
    exact_metrics = ("auc",)  # the test AUC from ranks, as scikit-learn's (Keras': 200 thresholds; docs/design.md)

    def read_labels(
        self, values, where: str, cfg_data, names=None, columns=(), classes=None
    ) -> tuple[np.ndarray, tuple[str, ...]]:
        values = np.asarray(values)
        numbers = as_numbers(values)
        if numbers is not None and numbers.ndim == 2 and numbers.shape[1] == 2 and np.all(numbers.sum(1) == 1):
            numbers = numbers.argmax(1).astype(np.float64)  # one-hot rows of two
        if numbers is not None and numbers.size == len(numbers) and np.all((numbers == 0) | (numbers == 1)):
            fixed = names or cfg_data.get("class_names")
            names = tuple(str(n) for n in fixed) if fixed else ("0", "1")
            if len(names) != 2:
                raise self.refused(where, f"data.class_names names {len(names)} classes", TAKES)
            return numbers.reshape(-1, 1).astype(np.float32), names
        if numbers is None and values.ndim == 1:
            texts = [str(v).strip() for v in values]
            fixed = names or cfg_data.get("class_names")
            names = tuple(str(n) for n in fixed) if fixed else tuple(sorted(set(texts)))
            if len(names) == 2 and set(texts) <= set(names):
                return np.array([[names.index(t)] for t in texts], dtype=np.float32), names
        raise self.refused(where, found_kind(values), TAKES)

    def check_sample(self, sample: LabelSample, cfg_data) -> None:
        """The pre-flight's question (no TensorFlow): numbers must be 0/1 (or one-hot rows of two); class names are
        left to the job (the first rows may hold one of the two)."""
        numbers = as_numbers(np.asarray(sample.values))
        if numbers is None:
            return
        pairs = numbers.ndim == 2 and numbers.shape[1] == 2 and bool(np.all(numbers.sum(1) == 1))
        if not (pairs or numbers.size == len(numbers)) or not np.all((numbers == 0) | (numbers == 1)):
            raise self.refused(sample.where, found_kind(np.asarray(sample.values)), TAKES)

    def strata(self, labels: np.ndarray) -> np.ndarray | None:
        return np.asarray(labels).reshape(-1).astype(np.int64)

    def head(self, spec: DataSpec, train_labels: np.ndarray | None) -> Head:
        return Head(1, "sigmoid", "probabilities", pictures="none", signature="probabilities")

    def exact_figures(self, labels: np.ndarray, outputs: np.ndarray) -> dict[str, float | None]:
        return {"auc": roc_auc(np.asarray(labels).reshape(-1) == 1, np.asarray(outputs, np.float64).reshape(-1))}

    def prediction_header(self, names: tuple[str, ...], top_k: int) -> list[str]:
        return ["class", f"probability_{names[1]}"]

    def prediction_rows(self, outputs: np.ndarray, names: tuple[str, ...], top_k: int) -> list[tuple[list, dict]]:
        """The class over or under `task.threshold`, and the positive class's probability."""
        rows = []
        for p in outputs.reshape(-1):
            chosen = names[int(p >= self.threshold)]
            rows.append(([chosen, shortest(p)], {"class": chosen, "probability": float(shortest(p))}))
        return rows

    def predicted_classes(self, outputs: np.ndarray) -> np.ndarray | None:
        return (outputs.reshape(-1) >= self.threshold).astype(np.int64)


@TASKS.register("binary", schema=BinaryTaskConfig)
def build_binary(node) -> Binary:
    return Binary(**parse_options(node))
