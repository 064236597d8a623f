"""Compression schemes: `build_x(cfg_compression, model, spec, phase) -> Compression`, one registry.

A scheme wraps the run's model with the TensorFlow Model Optimization Toolkit (tfmot) for
training, may need callbacks in both loops, and turns the trained model into the deployable
one (`strip`) before export. Rooms: schemes.py (the registered builders), phases.py (what
trains before the scheme: `compression.start_epoch`, the float phase of the collaborative
schemes, `compression.from_run`), measure.py (figures read from the stripped weights).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import tf_keras as keras
from omegaconf import DictConfig, OmegaConf

from tfhydra.registry import Registry

COMPRESSIONS = Registry("compression")
SHARED_KEYS = ("start_epoch", "from_run")  # conf/config.yaml's compression section: read by phases.py, not by schemes


def _unchanged(model: keras.Model) -> keras.Model:
    return model


@dataclass(frozen=True)
class Phase:
    """The training the scheme is applied to: pruning schedules given in epochs need its real steps."""
    steps_per_epoch: int
    epochs: int  # epochs of this phase (the run's, less compression.start_epoch and any earlier phase)
    log_dir: Path | None = None  # the run's TensorBoard directory; None when logging.tensorboard=false

    @property
    def steps(self) -> int:
        return self.steps_per_epoch * self.epochs


@dataclass
class Compression:
    model: keras.Model  # the model to compile and train
    callbacks: list[keras.callbacks.Callback] = field(default_factory=list)  # needed by both loops
    strip: Callable[[keras.Model], keras.Model] = _unchanged  # trained model -> deployable model (wrappers removed)
    # deployable model -> the same weights in float32 layers: the TFLite float32 reference of the size ratios
    float_twin: Callable[[keras.Model], keras.Model] = _unchanged
    # First epoch (0-based) that ends with the scheme in full effect (a pruning schedule at its target):
    # the best checkpoint, hence the export, is chosen from this epoch on.
    settled_epoch: int = 0
    quantization_aware: bool = False  # the deployable model holds int8 ranges learned in training
    clustered: bool = False  # report the distinct values per kernel
    scheme: str = "none"  # the compression option's name (set by build_scheme)

    def report(self, deployable: keras.Model) -> dict:
        """Figures for metrics.json's `compression` section, measured on the stripped weights."""
        from tfhydra.compression.measure import distinct_values, sparsity

        figures = {"sparsity": sparsity(deployable)}
        if self.clustered:
            figures["distinct_values"] = distinct_values(deployable)
        return figures


def compress_model(cfg_compression: DictConfig, model: keras.Model, spec, phase: Phase) -> Compression:
    """Start from `compression.from_run`'s trained model when given, then apply the scheme."""
    if cfg_compression.get("from_run"):
        from tfhydra.compression.phases import load_run_model

        model = load_run_model(Path(cfg_compression.from_run), model, spec, phase.steps_per_epoch)
    return build_scheme(cfg_compression, model, spec, phase)


def build_scheme(cfg_compression: DictConfig, model: keras.Model, spec, phase: Phase) -> Compression:
    if "_target_" in cfg_compression:  # a user's scheme gets its own keys only
        cfg_compression = OmegaConf.masked_copy(cfg_compression, [k for k in cfg_compression if k not in SHARED_KEYS])
    compression = COMPRESSIONS.build(cfg_compression, model=model, spec=spec, phase=phase)
    if not isinstance(compression, Compression):
        from tfhydra.errors import ConfigError

        raise ConfigError("compression._target_", cfg_compression.get("_target_"), "a callable returning a "
                          "tfhydra.compression.Compression", f"it returned {type(compression).__name__}")
    compression.scheme = cfg_compression.get("name") or cfg_compression.get("_target_")
    return compression


from tfhydra.compression import schemes  # noqa: E402,F401  (registers the builders)
from tfhydra.compression.phases import prepare_phases  # noqa: E402

__all__ = ["COMPRESSIONS", "Compression", "Phase", "compress_model", "prepare_phases"]
