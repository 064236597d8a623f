"""`task=multilabel`: k sigmoid outputs on multi-hot labels (several labels per example), binary crossentropy,
AUC averaged over the labels, macro F1 and binary accuracy at `task.threshold`. Labels: (n, k) rows of 0/1 (an npz
`y`, or k CSV columns in `data.label`); the labels' names are `data.class_names`, else the CSV columns, else
"0".."k-1". The splits are seeded shuffles (no strata: label combinations are too many to stratify by)."""

from __future__ import annotations

import numpy as np

from tfhydra.config.contracts import MULTI_HOT, DataSpec, Head
from tfhydra.task.base import TASKS, Task, as_numbers, found_kind, parse_options, shortest

TAKES = "multi-hot rows of 0/1, one column per label; task=classification or task=binary take one label per example"


class Multilabel(Task):
    name = "multilabel"
    label_kind = MULTI_HOT

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

    def head(self, spec: DataSpec, train_labels: np.ndarray | None) -> Head:
        return Head(spec.num_classes, "sigmoid", "probabilities", confusion=False, signature="probabilities")

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


@TASKS.register("multilabel")
def build_multilabel(node) -> Multilabel:
    return Multilabel(**parse_options(node))
