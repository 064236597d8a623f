"""`build_model`: the registered builder of `model.name` (or the user's `_target_`), checked to return a
tf_keras model. Importing this module imports every builder, which registers itself in `MODELS`."""

from __future__ import annotations

import tf_keras as keras
from omegaconf import OmegaConf

from tfhydra.config.contracts import DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.model import applications, resnet, seed, sequence  # noqa: F401  (the builders register themselves)
from tfhydra.model.base import MODELS
from tfhydra.model.freeze import KEY as FREEZE

__all__ = ["MODELS", "build_model"]


def build_model(cfg_model, spec: DataSpec) -> keras.Model:
    """The model of `model.name` (or the user's `_target_`, which is not handed `model.freeze`: the run applies
    that after building, tfhydra/model/freeze.py)."""
    node = OmegaConf.masked_copy(cfg_model, [k for k in cfg_model if k != FREEZE]) if FREEZE in cfg_model else cfg_model
    model = MODELS.build(node, spec=spec)
    if not isinstance(model, keras.Model):
        raise ConfigError(
            "model",
            cfg_model.get("_target_", cfg_model.get("name")),
            "a builder returning a tf_keras.Model",
            f"the builder returned {type(model).__name__}",
        )
    return model
