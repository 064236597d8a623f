"""The types that cross rooms: what the data room hands the model room, and what the compression room
hands the export room and the run.

They live here, in a module that imports no group room and no TensorFlow, so that a model builder
needs nothing from `tfhydra.data`, the export needs nothing from `tfhydra.compression`, and the
TensorFlow-free run plan can name them. Keras types appear only in annotations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: importing this module must not import TensorFlow
    import numpy as np
    import tf_keras as keras


# What a task's labels are, as a source that makes up its labels (data=synthetic) generates them: one kind each.
CLASSES, BINARY, MULTI_HOT, NUMBERS = "classes", "binary", "multi_hot", "numbers"

# What a model takes from the data (the model room declares it per builder, `MODELS.traits(name)["inputs"]`; the
# data room builds it, tfhydra/data/inputs.py): the source's prepared examples (token ids from its fitted vocabulary,
# standardised features, decoded images), or raw text, one string per example, for a model that tokenizes with its
# own preprocessor (model=keras_hub: the preset's tokenizer).
PREPARED, RAW_TEXT = "prepared", "raw_text"


class LabelReader(Protocol):
    """What the run's task (tfhydra/task/base.py `Task`) answers the data room (tfhydra/data/labels.py), which
    hands it the columns and arrays it reads and never asks which task it is."""

    label_kind: str  # CLASSES | BINARY | MULTI_HOT | NUMBERS

    def read_labels(
        self, values, where: str, cfg_data, names: tuple[str, ...] | None, columns: tuple[str, ...], classes: Callable
    ) -> tuple[np.ndarray, tuple[str, ...]]:
        """(labels as the model trains on them, the names of the outputs), or a one-line ConfigError naming `where`.
        `names`: the outputs the training labels fixed (a shipped validation or test split is read with them);
        `columns`: the CSV columns of a 2-D `values`; `classes(values, where, class_names, num_classes)`: the data
        room's reading of class indices or names (tfhydra/data/source.py `class_labels`)."""
        ...

    def strata(self, labels: np.ndarray) -> np.ndarray | None:
        """One stratum per example for the stratified hold-outs and data.fraction; None: seeded shuffles."""
        ...

    def head(self, spec: DataSpec, train_labels: np.ndarray | None) -> Head | None:
        """The output layer, from the spec and the training split's labels (statistics fitted on them only)."""
        ...


@dataclass(frozen=True)
class LabelSample:
    """Labels a source read without TensorFlow, for the run plan to ask the run's task whether they fit it before a
    run directory exists (tfhydra/data/label_sample.py reads them, tfhydra/task/checks.py asks): `values` as stored
    (a CSV's cells as strings, an npz array's values), `where` (the file and column or array, as the job's errors
    name it), `columns` (the CSV columns of a 2-D `values`), `whole` (every row: False when the read stopped at its
    cap, so only what a part of the rows proves may be refused) and `train_rows` (how many of the rows read the
    training split would hold)."""

    values: np.ndarray
    where: str
    columns: tuple[str, ...]
    whole: bool
    train_rows: int


# What TensorBoard pictures a head's outputs (tfhydra/trainer/pictures.py): `confusion`: the confusion matrix and
# the most confident mistakes (classes); `scatter`: predicted against true values (numbers); `none`.
PICTURES = ("confusion", "scatter", "none")


@dataclass(frozen=True)
class Head:
    """The model's output layer as the run's task decides it (tfhydra/task/): every model builder ends with it
    (tfhydra/model/head.py `task_head`), so no builder knows which task it trains for.

    `signature`: the key of the output in the SavedModel's signatures. `scale`/`offset` (regression with
    `task.standardize`): the outputs are `dense * scale + offset`, fixed
    statistics of the training split's targets, so the network learns unit-scale values and every figure and
    export is in the target's units. `pictures`: what `logging.images_freq` draws of the outputs (PICTURES).
    """

    units: int
    activation: str = "softmax"  # softmax | sigmoid | linear
    output: str = "probabilities"  # the name of the last (float32) layer
    scale: tuple[float, ...] | None = None
    offset: tuple[float, ...] | None = None
    pictures: str = "confusion"
    # The SavedModel signatures' output key: `output_0` for a classification (the key its clients call, as before
    # tasks), the output's name (`probabilities`, `predictions`) for the other tasks (docs/tasks.md)
    signature: str = "output_0"

    def __post_init__(self) -> None:
        if self.pictures not in PICTURES:  # a task's own Head (a programming error, not a user's)
            raise ValueError(f"Head.pictures={self.pictures!r}: one of {', '.join(PICTURES)}")

    def as_dict(self) -> dict:
        return {
            "units": self.units,
            "activation": self.activation,
            "output": self.output,
            "scale": list(self.scale) if self.scale is not None else None,
            "offset": list(self.offset) if self.offset is not None else None,
            "pictures": self.pictures,
        }


@dataclass(frozen=True)
class DataSpec:
    """What a data source says about its examples; model builders read shapes and classes from it only."""

    input_shape: tuple[int, ...]  # one example, without the batch axis
    num_classes: int
    class_names: tuple[str, ...]
    train_size: int
    val_size: int
    dtype: str = "float32"  # of one example: float32 images/features, int32/int64 token ids
    vocab_size: int | None = None  # token-id sources only: ids are in [0, vocab_size)
    test_size: int = 0  # the test split's examples (tfhydra/data/splits.py); 0: no test split
    # The output layer the run's task chose (tfhydra/task/); None: a softmax over `num_classes` (a source built
    # without a task, as tfhydra.data.pipeline.build_datasets alone). `class_names` name the outputs of every task: the
    # classes, the labels of a multi-label task, the targets of a regression.
    head: Head | None = None

    @property
    def outputs(self) -> int:
        """The model's output units: the head's, else one per class."""
        return self.head.units if self.head is not None else self.num_classes

    def as_dict(self) -> dict:
        return {
            **({"head": self.head.as_dict()} if self.head is not None else {}),
            "input_shape": list(self.input_shape),
            "num_classes": self.num_classes,
            "class_names": list(self.class_names),
            "train_size": self.train_size,
            "val_size": self.val_size,
            "test_size": self.test_size,
            "dtype": self.dtype,
            "vocab_size": self.vocab_size,
        }


@dataclass(frozen=True)
class Phase:
    """The training a compression scheme is applied to: pruning schedules given in epochs need its real steps."""

    steps_per_epoch: int
    epochs: int  # epochs of this phase (the run's, less compression.start_epoch and any earlier phase)
    log_dir: Path | None = (
        None  # where the scheme writes its TensorBoard summaries; None when logging.tensorboard=false
    )

    @property
    def steps(self) -> int:
        return self.steps_per_epoch * self.epochs


def _unchanged(model: keras.Model) -> keras.Model:
    return model


def _no_figures(model: keras.Model) -> dict:
    return {}


@dataclass
class Compression:
    """A compression scheme applied to the run's model: what trains, and how it becomes the deployable model."""

    model: keras.Model  # the model to compile and train
    callbacks: list = field(default_factory=list)  # keras callbacks needed by both loops
    strip: Callable[[keras.Model], keras.Model] = _unchanged  # trained model -> deployable model (wrappers removed)
    # deployable model -> the same weights in float32 layers: the TFLite float32 reference of the size ratios
    float_twin: Callable[[keras.Model], keras.Model] = _unchanged
    # First epoch (0-based) that ends with the scheme in full effect (a pruning schedule at its target):
    # the best checkpoint, hence the export, is chosen from this epoch on.
    settled_epoch: int = 0
    quantization_aware: bool = False  # the deployable model holds int8 ranges learned in training
    # deployable model -> figures for metrics.json's `compression` section (sparsity, distinct values...);
    # set by the compression room, so the export measures without importing it
    measure: Callable[[keras.Model], dict] = _no_figures
    scheme: str = "none"  # the compression option's name (set by the compression room)


@dataclass(frozen=True)
class PhasePlan:
    """One training phase of a run, decided from the config alone (tfhydra/compression/plan.py).

    A run trains one phase unless `trainer.finetune.head_epochs` (a head phase), `compression.start_epoch` or a
    collaborative scheme puts earlier ones before it; each earlier phase is a complete run of its own in
    `directory`.
    """

    index: int
    label: str  # head | pretrain | prune | cluster | finetune | the scheme's name
    epochs: int
    compression: dict  # the compression node this phase trains with (plain, resolved)
    directory: str | None  # relative to the run directory; None for the run's own, last phase
    # dotted config keys this phase sets (a head phase: model.freeze=base; the phases after it: optimizer.lr)
    overrides: dict = field(default_factory=dict)
