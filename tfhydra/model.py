"""Model builders: `build_x(cfg_model, spec) -> tf_keras.Model`.

Input shape and class count always come from the data's `DataSpec`. The last layer is
an explicit float32 softmax so the output stays float32 under mixed-precision policies.
"""
from __future__ import annotations

import tf_keras as keras

from tfhydra.data import DataSpec
from tfhydra.errors import ConfigError
from tfhydra.registry import Registry

MODELS = Registry("model")


def build_model(cfg_model, spec: DataSpec) -> keras.Model:
    model = MODELS.build(cfg_model, spec=spec)
    if not isinstance(model, keras.Model):
        raise ConfigError("model", cfg_model.get("_target_", cfg_model.get("name")), "a builder returning a tf_keras.Model",
                          f"the builder returned {type(model).__name__}")
    return model


def classifier_head(num_classes: int) -> list[keras.layers.Layer]:
    return [keras.layers.Dense(num_classes, name="logits"),
            keras.layers.Activation("softmax", dtype="float32", name="probabilities")]


@MODELS.register("cnn")
def build_cnn(cfg, spec: DataSpec) -> keras.Model:
    """The seed Sequential CNN."""
    if len(spec.input_shape) != 3:
        raise ConfigError("model", "cnn", "image data of shape (height, width, channels)",
                          f"the data's examples have shape {tuple(spec.input_shape)}")
    height, width = spec.input_shape[:2]
    for depth in range(1, len(cfg.filters) + 1):
        height, width = (height - cfg.kernel_size + 1) // cfg.pool_size, (width - cfg.kernel_size + 1) // cfg.pool_size
        if min(height, width) < 1:
            raise ConfigError("model.filters", list(cfg.filters), f"at most {depth - 1} conv blocks for "
                              f"{spec.input_shape[0]}x{spec.input_shape[1]} images",
                              "the images are too small for this many conv blocks")
    layers = [keras.Input(spec.input_shape)]
    for filters in cfg.filters:
        layers += [keras.layers.Conv2D(filters, cfg.kernel_size, activation=cfg.activation),
                   keras.layers.MaxPooling2D(cfg.pool_size)]
    layers += [keras.layers.Flatten(), keras.layers.Dense(cfg.dense_units, activation=cfg.activation)]
    return keras.Sequential(layers + classifier_head(spec.num_classes), name="cnn")


@MODELS.register("mlp")
def build_mlp(cfg, spec: DataSpec) -> keras.Model:
    """The seed functional-API MLP."""
    inputs = keras.Input(spec.input_shape)
    x = keras.layers.Flatten()(inputs)
    for i, units in enumerate(cfg.units):
        x = keras.layers.Dense(units, activation=cfg.activation)(x)
        if i < len(cfg.units) - 1 and cfg.dropout > 0:
            x = keras.layers.Dropout(cfg.dropout)(x)
    for layer in classifier_head(spec.num_classes):
        x = layer(x)
    return keras.Model(inputs, x, name="mlp")
