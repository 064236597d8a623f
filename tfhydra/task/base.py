"""The task room's base: the `Task` type every task (and a user's `_target_` task) is, its registry, and the kinds
of label found in a column or array, so that a label that does not fit the chosen task is one line naming what
was found and the tasks that take it. No TensorFlow: the run plan and the predict command read it cheaply.
"""

from __future__ import annotations

import json

import numpy as np

from tfhydra.config.contracts import CLASSES, DataSpec, Head, LabelSample
from tfhydra.config.errors import ConfigError
from tfhydra.config.registry import Registry

TASKS = Registry(  # the tasks, each in its module, imported on the first lookup
    "task",
    locations=[
        "tfhydra.task.classification",
        "tfhydra.task.binary",
        "tfhydra.task.multilabel",
        "tfhydra.task.regression",
    ],
)

# Integer labels with more distinct values than this, one of them seen only once, are a numeric target rather
# than classes (500 rows of 500 prices would be 500 classes no split can stratify): docs/tasks.md.
MANY_VALUES = 20


def shortest(value) -> str:
    """The shortest text that reads back as the same float32."""
    return np.format_float_positional(np.float32(value), unique=True, trim="-")


class Task:
    """What kind of problem a run trains. A subclass (or a user's class, built by `task._target_` with the task
    node's keys) overrides what differs; this base writes a model's raw outputs and splits without strata.

    The loss, metrics, monitor and its mode are the task node's keys (conf/task/<name>.yaml), which
    conf/tfhydra.yaml's `trainer` section interpolates, so `trainer.loss=...` still wins."""

    name = "task"
    label_kind = CLASSES  # what a synthetic source generates for it (tfhydra/data/labels.py)
    # the figures `per_label` gives each output (the record's `best.per_label` and `test.per_label`); empty: none,
    # and no extra pass over the splits after training
    per_label_metrics: tuple[str, ...] = ()
    # the metrics `exact_figures` measures exactly on the test split's outputs, in place of Keras' per-batch
    # approximation (binary's AUC); empty: none, and no extra pass over the test split
    exact_metrics: tuple[str, ...] = ()
    # The figures a person asks of this kind of problem first, as the task's metrics are named (conf/task/; the
    # validation figure is `val_<name>`): the end line, the record's summary, the sweep summary and the notebook's
    # Result lead with them (tfhydra/record/headline.py, through the record's `task.headline`). Empty: the
    # monitored metric alone, as for a user's own task that names none.
    headline: tuple[str, ...] = ()

    def __init__(self, name: str | None = None, threshold: float = 0.5, **options):
        self.name = name or self.name
        self.threshold = float(threshold)
        self.options = options  # loss, metrics, monitor, monitor_mode and the task's own keys

    # The data room's questions (tfhydra/data/labels.py LabelReader)
    def read_labels(
        self, values, where: str, cfg_data, names=None, columns=(), classes=None
    ) -> tuple[np.ndarray, tuple[str, ...]]:
        numbers = as_numbers(np.asarray(values))
        if numbers is None:
            raise self.refused(where, found_kind(np.asarray(values)))
        numbers = numbers.reshape(len(numbers), -1).astype(np.float32)
        return numbers, tuple(names or columns or (str(i) for i in range(numbers.shape[1])))

    def check_sample(self, sample: LabelSample, cfg_data) -> None:
        """Refuse, before TensorFlow, labels that cannot fit this task: `sample` holds the labels a source read
        without TensorFlow (tfhydra/data/label_sample.py), maybe only its first rows (`sample.whole` False), so
        only what those rows prove is refused (a row that is not a number proves a column is not a numeric
        target; a class missing from the rows read proves nothing). This base (a user's own task) refuses
        nothing: its `read_labels` answers in the job."""

    def strata(self, labels: np.ndarray) -> np.ndarray | None:
        return None

    def head(self, spec: DataSpec, train_labels: np.ndarray | None) -> Head:
        return Head(spec.num_classes, "linear", "predictions", pictures="none", signature="predictions")

    def refused(self, where: str, found: str, takes: str = "") -> ConfigError:
        """The one line of a label that does not fit this task: the key, what was found, the tasks that take it."""
        return ConfigError(where, None, f"task={self.name} takes {takes or 'other labels'}", found)

    # The record's, predict's and evaluate's questions
    def record(self) -> dict:
        """The record's `task` section: what the outputs mean, for predict and evaluate to read back, and the
        figures to show first."""
        return {"name": self.name, "threshold": self.threshold, "headline": list(self.headline)}

    def per_label(self, labels: np.ndarray, outputs: np.ndarray, names: tuple[str, ...]) -> dict | None:
        """{output name: {figure: value}} of the kept weights' `outputs` (float32, one row per example) against
        `labels`, for the figures Keras can only log averaged (a per-label metric is a vector, and the logs and
        trackers take scalars); None: the task has none (`per_label_metrics` empty)."""
        return None

    def exact_figures(self, labels: np.ndarray, outputs: np.ndarray) -> dict[str, float | None]:
        """{metric: its exact value} of the kept weights' test `outputs` against `labels`, for the `exact_metrics`
        whose Keras metric approximates (the record's `test` block takes them; None: undefined on this split)."""
        return {}

    def prediction_header(self, names: tuple[str, ...], top_k: int) -> list[str]:
        return list(names)

    def prediction_rows(self, outputs: np.ndarray, names: tuple[str, ...], top_k: int) -> list[tuple[list, dict]]:
        """(CSV cells, JSON fields) of each row of `outputs` (the served model's float32 outputs)."""
        return [
            ([shortest(v) for v in row], {"outputs": dict(zip(names, map(float, map(shortest, row)), strict=True))})
            for row in outputs
        ]

    def predicted_classes(self, outputs: np.ndarray) -> np.ndarray | None:
        """The class index each row predicts, for predict's accuracy over a label column; None: no classes."""
        return None


def as_numbers(values: np.ndarray) -> np.ndarray | None:
    """`values` as float64 when every one is a number (CSV cells are strings), else None (class names)."""
    if values.dtype.kind in "biuf":
        return values.astype(np.float64)
    if values.dtype.kind not in "US":
        return None
    try:
        return np.char.strip(values.astype(str)).astype(np.float64)
    except ValueError:
        return None


def found_kind(values: np.ndarray) -> str:
    """What a label column or array holds, in a few words (never the list of its values)."""
    numbers = as_numbers(values)
    if numbers is None:
        texts = sorted({str(v) for v in values.reshape(-1)})
        return f"the labels are class names ({len(texts)} distinct, e.g. {json.dumps(texts[0])})"
    if numbers.ndim == 2 and numbers.shape[1] > 1:
        binary = bool(np.all((numbers == 0) | (numbers == 1)))
        if binary and np.all(numbers.sum(1) == 1):
            return f"the labels are one-hot rows of {numbers.shape[1]} classes"
        if binary:
            return f"the labels are multi-hot rows of {numbers.shape[1]} labels (0/1, several per example)"
        return f"the labels are rows of {numbers.shape[1]} numbers"
    flat = numbers.reshape(-1)
    distinct = len(np.unique(flat))
    if np.all(np.mod(flat, 1) == 0):
        return f"the labels are integers with {distinct} distinct values in {len(flat)} examples"
    return f"the labels are numbers ({distinct} distinct non-integer values in {len(flat)} examples)"


def parse_options(node) -> dict:
    """A task node's keys as plain values (the registered builders take them as the `_target_` ones do)."""
    from omegaconf import OmegaConf

    return {str(k): v for k, v in (OmegaConf.to_container(node, resolve=True) or {}).items()}  # type: ignore[union-attr]
