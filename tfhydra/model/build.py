"""`build_model`: the registered builder of `model.name` (or the user's `_target_`), checked to return a
tf_keras model. Importing this module imports every builder, which registers itself in `MODELS`."""

from __future__ import annotations

import tf_keras as keras

from tfhydra.config.contracts import DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.model import applications, resnet, seed, sequence  # noqa: F401  (the builders register themselves)
from tfhydra.model.base import MODELS

__all__ = ["MODELS", "build_model"]


def build_model(cfg_model, spec: DataSpec) -> keras.Model:
    model = MODELS.build(cfg_model, spec=spec)
    if not isinstance(model, keras.Model):
        raise ConfigError(
            "model",
            cfg_model.get("_target_", cfg_model.get("name")),
            "a builder returning a tf_keras.Model",
            f"the builder returned {type(model).__name__}",
        )
    return model
