"""Model builders: `build_x(cfg_model, spec) -> tf_keras.Model`, one registry for the group.

Input shape, dtype and class count always come from the data's `DataSpec`; no builder
hard-codes them. Every builder ends with `classifier_head`, whose explicit float32
softmax keeps the output float32 under mixed-precision policies. A builder checks that
the data suits it (images or token ids, large enough) before it builds anything, so a
mismatch is one ConfigError line, not a shape error deep inside Keras.
"""
from __future__ import annotations

import tf_keras as keras

from tfhydra.contracts import DataSpec
from tfhydra.errors import ConfigError
from tfhydra.registry import Registry

MODELS = Registry("model")

IMAGES = "image data: float examples of shape (height, width, channels)"
TOKENS = "token data: int ids of shape (sequence_length,) with a known vocab_size (e.g. data=text_csv)"


def build_model(cfg_model, spec: DataSpec) -> keras.Model:
    model = MODELS.build(cfg_model, spec=spec)
    if not isinstance(model, keras.Model):
        raise ConfigError("model", cfg_model.get("_target_", cfg_model.get("name")), "a builder returning a tf_keras.Model",
                          f"the builder returned {type(model).__name__}")
    return model


def classifier_head(num_classes: int) -> list[keras.layers.Layer]:
    return [keras.layers.Dense(num_classes, name="logits"),
            keras.layers.Activation("softmax", dtype="float32", name="probabilities")]


def is_token_data(spec: DataSpec) -> bool:
    return spec.vocab_size is not None or not spec.dtype.startswith("float")


def describe_data(spec: DataSpec) -> str:
    shape = tuple(spec.input_shape)
    if spec.vocab_size is not None:
        return f"the data are {spec.dtype} token ids of shape {shape} (vocab_size {spec.vocab_size})"
    return f"the data's examples are {spec.dtype} of shape {shape}"


def require_images(spec: DataSpec, model: str) -> tuple[int, int, int]:
    """(height, width, channels) of the data, or a ConfigError naming the model."""
    if len(spec.input_shape) != 3 or is_token_data(spec):
        raise ConfigError("model", model, IMAGES, f"needs images; {describe_data(spec)}")
    return tuple(spec.input_shape)


def require_features(spec: DataSpec, model: str) -> None:
    """Float examples of any shape (images or feature vectors); token ids are not numbers to a Dense layer."""
    if is_token_data(spec):
        raise ConfigError("model", model, "float features or images",
                          f"needs float inputs; {describe_data(spec)} (token models: lstm, transformer)")


def require_tokens(spec: DataSpec, model: str) -> int:
    """The sequence length of token data, or a ConfigError naming the model."""
    if len(spec.input_shape) != 1 or not spec.dtype.startswith("int") or not spec.vocab_size:
        raise ConfigError("model", model, TOKENS, f"needs token ids; {describe_data(spec)}")
    return spec.input_shape[0]


# The builders register themselves on import.
from tfhydra.model import applications, resnet, seed, sequence  # noqa: E402,F401
