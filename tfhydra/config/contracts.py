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
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module must not import TensorFlow
    import tf_keras as keras


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

    def as_dict(self) -> dict:
        return {
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
