"""`task=regression`: linear outputs, one per target (one CSV column or several in `data.label`, an npz `y` of
shape (n,) or (n, k)), loss mse (or mae, huber), RMSE, MAE and R² metrics, the best epoch by val_loss (min).

`task.standardize: true` fits each target's mean and standard deviation on the TRAINING split only and puts
them in the model's last layer (`outputs * std + mean`, fixed): the network learns unit-scale values, and every
figure, the record and every export are in the target's units. Splits are seeded shuffles, or with
`task.strata_bins: N` stratified by N quantile bins of the first target (each split then spans the target's range
in proportion: a small validation split does not miss the tail)."""

from __future__ import annotations

import numpy as np

from tfhydra.config.contracts import NUMBERS, DataSpec, Head, LabelSample
from tfhydra.config.errors import ConfigError
from tfhydra.task.base import TASKS, Task, as_numbers, found_kind, parse_options, shortest
from tfhydra.task.schemas import RegressionTaskConfig

TAKES = "numbers; task=classification or task=binary take class names"


class Regression(Task):
    name = "regression"
    label_kind = NUMBERS
    headline = ("rmse", "r2")  # in the target's units, and against predicting the mean (the loss is the MSE)

    def __init__(self, standardize: bool = False, strata_bins: int | None = None, **options):
        super().__init__(**options)
        self.standardize = bool(standardize)
        self.strata_bins = strata_bins

    def read_labels(
        self, values, where: str, cfg_data, names=None, columns=(), classes=None
    ) -> tuple[np.ndarray, tuple[str, ...]]:
        values = np.asarray(values)
        numbers = as_numbers(values)
        if numbers is None or numbers.ndim > 2 or not np.all(np.isfinite(numbers)):
            found = found_kind(values) if numbers is None else "the targets hold NaN, infinite or nested values"
            raise self.refused(where, found, TAKES)
        numbers = numbers.reshape(len(numbers), -1).astype(np.float32)
        fixed = names or cfg_data.get("class_names") or columns
        if fixed:
            names = tuple(str(n) for n in fixed)
        else:
            names = ("target",) if numbers.shape[1] == 1 else tuple(f"target_{i}" for i in range(numbers.shape[1]))
        if len(names) != numbers.shape[1]:
            raise self.refused(where, f"{numbers.shape[1]} targets per row but {len(names)} names (data.class_names)")
        return numbers, names

    def check_sample(self, sample: LabelSample, cfg_data) -> None:
        """The pre-flight's question (no TensorFlow): a value that is not a finite number is no target, in any rows."""
        self.read_labels(sample.values, sample.where, cfg_data, columns=sample.columns)

    def strata(self, labels: np.ndarray) -> np.ndarray | None:
        """The quantile bin (0..N-1) of each example's first target, N = `task.strata_bins`; None: shuffles.
        Bins of tied values merge (as pandas' `qcut(duplicates="drop")`): a bin edge is a value, not a rank."""
        if self.strata_bins is None:
            return None
        if self.strata_bins > len(labels):  # before the bin edges are made: 10^8 bins took 8.5 GB and 31 s
            raise ConfigError(
                "task.strata_bins",
                self.strata_bins,
                f"null or an integer in [2, {len(labels)}] (at most one bin per example to split)",
                f"more bins than the {len(labels)} examples to split",
            )
        first = np.asarray(labels, dtype=np.float64).reshape(len(labels), -1)[:, 0]
        edges = np.unique(np.quantile(first, np.linspace(0, 1, self.strata_bins + 1)[1:-1]))
        bins = np.searchsorted(edges, first, side="right")
        return np.unique(bins, return_inverse=True)[1].reshape(-1).astype(np.int64)  # the bins present, from 0

    def head(self, spec: DataSpec, train_labels: np.ndarray | None) -> Head:
        if not self.standardize or train_labels is None:
            return Head(spec.num_classes, "linear", "predictions", pictures="scatter", signature="predictions")
        targets = np.asarray(train_labels, dtype=np.float64).reshape(len(train_labels), -1)
        mean, std = targets.mean(axis=0), targets.std(axis=0)
        std = np.where(std > 0, std, 1.0)  # a constant target: its mean, learnt as an offset
        return Head(
            spec.num_classes,
            "linear",
            "predictions",
            scale=tuple(float(s) for s in std),
            offset=tuple(float(m) for m in mean),
            pictures="scatter",
            signature="predictions",
        )

    def record(self) -> dict:
        return {"name": self.name, "standardize": self.standardize, "headline": list(self.headline)}

    def prediction_header(self, names: tuple[str, ...], top_k: int) -> list[str]:
        return [f"predicted_{name}" for name in names]  # apart from a carried column of the same name

    def prediction_rows(self, outputs: np.ndarray, names: tuple[str, ...], top_k: int) -> list[tuple[list, dict]]:
        """Each target's prediction, in its own units."""
        rows = []
        for row in outputs.reshape(len(outputs), -1):
            rows.append(
                (
                    [shortest(v) for v in row],
                    {"predictions": {n: float(shortest(v)) for n, v in zip(names, row, strict=True)}},
                )
            )
        return rows


@TASKS.register("regression", schema=RegressionTaskConfig)
def build_regression(node) -> Regression:
    return Regression(**parse_options(node))
