"""The model room's base: its registry and the checks that the data suits a builder. Builders (seed.py, resnet.py,
sequence.py, applications.py, hub.py) import this module, and head.py for the task's head they end with;
`MODELS` names their modules and imports them on its first lookup, so registration runs one way."""

from __future__ import annotations

from tfhydra.config.contracts import DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.config.registry import Registry

MODELS = Registry(  # the builders, each in its module, imported on the first lookup
    "model",
    locations=[
        "tfhydra.model.seed",
        "tfhydra.model.resnet",
        "tfhydra.model.sequence",
        "tfhydra.model.applications",
        "tfhydra.model.hub",
        "tfhydra.model.auto",
    ],
)

# The kinds of data model=auto tells apart (auto.py); a builder declares the kind it is auto's pick for with
# `default_for=` at registration, so auto names no builder.
IMAGE_KIND, FEATURE_KIND, TOKEN_KIND = "images", "features", "tokens"

IMAGES = "image data: float examples of shape (height, width, channels)"
TOKENS = "token data: int ids of shape (sequence_length,) with a known vocab_size (e.g. data=text_csv)"


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
    height, width, channels = spec.input_shape
    return height, width, channels


def require_features(spec: DataSpec, model: str) -> None:
    """Float examples of any shape (images or feature vectors); token ids are not numbers to a Dense layer."""
    if is_token_data(spec):
        raise ConfigError(
            "model",
            model,
            "float features or images",
            f"needs float inputs; {describe_data(spec)} (token models: lstm, transformer)",
        )


def require_tokens(spec: DataSpec, model: str) -> int:
    """The sequence length of token data, or a ConfigError naming the model."""
    if len(spec.input_shape) != 1 or not spec.dtype.startswith("int") or not spec.vocab_size:
        raise ConfigError("model", model, TOKENS, f"needs token ids; {describe_data(spec)}")
    return spec.input_shape[0]
