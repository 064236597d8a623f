"""`task=multilabel`: k sigmoid outputs on multi-hot labels (several labels per example), binary crossentropy,
AUC averaged over the labels, macro F1 and binary accuracy at `task.threshold`. Labels: (n, k) rows of 0/1 (an npz
`y`, or k CSV columns in `data.label`); the labels' names are `data.class_names`, else the CSV columns, else
"0".."k-1". The splits are seeded shuffles (no strata: label combinations are too many to stratify by)."""

from __future__ import annotations

import logging

import numpy as np

from tfhydra.config.contracts import MULTI_HOT, DataSpec, Head, LabelSample
from tfhydra.task.base import TASKS, Task, as_numbers, found_kind, parse_options, shortest
from tfhydra.task.ranking import roc_auc
from tfhydra.task.schemas import MultilabelTaskConfig

log = logging.getLogger("tfhydra")
TAKES = "multi-hot rows of 0/1, one column per label; task=classification or task=binary take one label per example"


class Multilabel(Task):
    name = "multilabel"
    label_kind = MULTI_HOT
    per_label_metrics = ("auc", "f1")
    headline = ("f1", "auc")  # macro F1 at task.threshold, then AUC averaged over the labels
    undefined: tuple[str, ...] = ()  # labels the training split shows one way only (in every example, or none)

    def read_labels(
        self, values, where: str, cfg_data, names=None, columns=(), classes=None
    ) -> tuple[np.ndarray, tuple[str, ...]]:
        values = np.asarray(values)
        numbers = as_numbers(values)
        if numbers is None or numbers.ndim != 2 or numbers.shape[1] < 2 or not np.all((numbers == 0) | (numbers == 1)):
            raise self.refused(where, found_kind(values), TAKES)
        fixed = names or cfg_data.get("class_names") or columns
        names = tuple(str(n) for n in fixed) if fixed else tuple(str(i) for i in range(numbers.shape[1]))
        if len(names) != numbers.shape[1]:
            raise self.refused(where, f"{numbers.shape[1]} labels per row but {len(names)} names (data.class_names)")
        return numbers.astype(np.float32), names

    def check_sample(self, sample: LabelSample, cfg_data) -> None:
        """The pre-flight's question (no TensorFlow): rows of 0/1, one column per label, in any rows."""
        self.read_labels(sample.values, sample.where, cfg_data, columns=sample.columns)

    def head(self, spec: DataSpec, train_labels: np.ndarray | None) -> Head:
        """Warns of a label the training split never shows, or always shows: the model cannot learn when it is
        there, and the AUC of a split without both values leaves it out (tfhydra/task/metrics.py)."""
        if train_labels is not None and len(train_labels):
            rows = np.asarray(train_labels).reshape(len(train_labels), -1)
            names = spec.class_names
            self.undefined = tuple(str(names[i]) for i in range(rows.shape[1]) if np.all(rows[:, i] == rows[0, i]))
            if self.undefined:
                log.warning(
                    "task=multilabel: label(s) %s %s in every training example or in none: the model cannot learn "
                    "when they apply, and an AUC averages only the labels its split shows both ways",
                    ", ".join(self.undefined[:5]) + (", ..." if len(self.undefined) > 5 else ""),
                    "are" if len(self.undefined) > 1 else "is",
                )
        return Head(spec.num_classes, "sigmoid", "probabilities", pictures="none", signature="probabilities")

    def record(self) -> dict:
        """The base record, with `undefined_in_training` when the training split shows a label one way only."""
        return {**super().record(), **({"undefined_in_training": list(self.undefined)} if self.undefined else {})}

    def per_label(self, labels: np.ndarray, outputs: np.ndarray, names: tuple[str, ...]) -> dict | None:
        """Each label's ROC AUC (exact, from ranks: tfhydra/task/ranking.py; null when the split holds only one
        value of the label) and F1 at `task.threshold` (a probability at or over it predicts the label; 0 when the
        label is neither present nor predicted, as scikit-learn's default and Keras' F1Score give it)."""
        labels = np.asarray(labels).reshape(len(labels), -1) == 1
        outputs = np.asarray(outputs, dtype=np.float64).reshape(len(labels), -1)
        return {
            name: {"auc": roc_auc(labels[:, i], outputs[:, i]), "f1": f1(labels[:, i], outputs[:, i] >= self.threshold)}
            for i, name in enumerate(names)
        }

    def prediction_header(self, names: tuple[str, ...], top_k: int) -> list[str]:
        return ["labels", *(f"probability_{n}" for n in names)]

    def prediction_rows(self, outputs: np.ndarray, names: tuple[str, ...], top_k: int) -> list[tuple[list, dict]]:
        """The labels at or over `task.threshold` (joined by `;` in CSV) and every label's probability."""
        rows = []
        for row in outputs:
            over = [n for n, p in zip(names, row, strict=True) if p >= self.threshold]
            probabilities = {n: float(shortest(p)) for n, p in zip(names, row, strict=True)}
            rows.append(
                ([";".join(over), *(shortest(p) for p in row)], {"labels": over, "probabilities": probabilities})
            )
        return rows


def f1(present: np.ndarray, predicted: np.ndarray) -> float:
    """2TP / (2TP + FP + FN); 0 when the label is neither present nor predicted."""
    true_positives = int(np.sum(present & predicted))
    wrong = int(np.sum(present != predicted))
    return 2 * true_positives / (2 * true_positives + wrong) if true_positives or wrong else 0.0


@TASKS.register("multilabel", schema=MultilabelTaskConfig)
def build_multilabel(node) -> Multilabel:
    return Multilabel(**parse_options(node))
