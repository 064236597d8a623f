"""`keras_app`: any architecture of `tf_keras.applications`, by name, on the data's images.

The application is built without its ImageNet top, for the data's image size, and
nested as one layer between a preprocessing layer and our classifier head. Its
minimum image size is the library's own (32x32 for most, 71 for Xception, 75 for the
Inceptions): the library's refusal is turned into a ConfigError naming both sizes.
"""

from __future__ import annotations

import importlib
import inspect
import re

import tensorflow as tf

from tfhydra.config.contracts import DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.model.base import MODELS, require_images
from tfhydra.model.head import task_head
from tfhydra.model.schemas import KerasAppModelConfig
from tfhydra.platform.keras_lib import keras

# Arguments the builder sets itself; everything else in an application's signature may go in `arch_args`.
SET_BY_BUILDER = {
    "include_top",
    "weights",
    "input_tensor",
    "input_shape",
    "pooling",
    "classes",
    "classifier_activation",
}


def application_names() -> list[str]:
    return sorted(name for name in dir(keras.applications) if name[:1].isupper())


def application(arch: str):
    if arch not in application_names():
        raise ConfigError("model.arch", arch, application_names(), "not an architecture in tf_keras.applications")
    return getattr(keras.applications, arch)


def application_args(arch: str, builder, arch_args: dict) -> dict:
    """The user's extra keyword arguments, refused by name if the application has no such parameter."""
    params = inspect.signature(builder).parameters
    accepted = [
        name
        for name, p in params.items()
        if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and name not in SET_BY_BUILDER
    ]
    for name, value in arch_args.items():
        if name not in accepted:
            raise ConfigError(
                f"model.arch_args.{name}",
                value,
                accepted or f"no arguments: {arch} takes none beyond what keras_app sets",
                f"not a parameter of tf_keras.applications.{arch}",
            )
    return dict(arch_args)


@keras.saving.register_keras_serializable("tfhydra")
class ArchPreprocessing(keras.layers.Layer):
    """[0, 1] pixels -> what the architecture's ImageNet weights were trained on.

    Scales to 0-255 and applies the architecture's own `preprocess_input` (caffe, tf or
    torch normalisation; identity where the model normalises inside), so the same data
    works with `weights=null`, `imagenet` or a file. Gray images are repeated to RGB.
    Runs in float32 whatever the precision policy: the caffe mean subtraction needs it.
    """

    def __init__(self, arch: str, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.arch = arch
        self._preprocess = importlib.import_module(getattr(keras.applications, arch).__module__).preprocess_input

    def call(self, images):
        if images.shape[-1] == 1:
            images = tf.repeat(images, 3, axis=-1)
        return self._preprocess(images * 255.0)

    def get_config(self):
        config = super().get_config()
        config.pop("dtype", None)
        return {**config, "arch": self.arch}


@MODELS.register("keras_app", schema=KerasAppModelConfig)
def build_keras_app(cfg, spec: DataSpec) -> keras.Model:
    """tf_keras.applications.<arch> without its top, at the data's image size, under our classifier head."""
    height, width, channels = require_images(spec, "keras_app")
    if channels not in (1, 3):
        raise ConfigError(
            "model",
            "keras_app",
            "images with 3 (RGB) or 1 (gray, repeated to RGB) channels",
            f"ImageNet architectures take RGB; the data's images have {channels} channels",
        )
    builder = application(cfg.arch)
    extra = application_args(cfg.arch, builder, cfg.arch_args)
    weights = cfg.weights  # null or imagenet: a weights file is loaded by build_model once the model is built
    try:
        base = builder(include_top=False, weights=weights, input_shape=(height, width, 3), pooling=cfg.pooling, **extra)
    except ValueError as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        too_small = re.search(r"at least (\d+)x(\d+)", first_line)
        if too_small:
            size = f"{too_small[1]}x{too_small[2]}"
            raise ConfigError(
                "model.arch",
                cfg.arch,
                f"data with images of at least {size}, or a smaller-input model",
                f"{cfg.arch} needs images of at least {size}; the data's are {height}x{width}",
            ) from None
        raise ConfigError(
            "model.arch_args",
            dict(extra),
            f"arguments tf_keras.applications.{cfg.arch} accepts",
            f"{cfg.arch} refused them ({first_line})",
        ) from None
    except Exception as error:  # Keras' get_file raises a bare Exception when the download fails
        if weights != "imagenet" or "URL fetch failure" not in str(error):
            raise
        raise ConfigError(
            "model.weights",
            weights,
            "network access, or the path of the downloaded no-top .h5 file",
            f"downloading the ImageNet weights failed ({str(error).splitlines()[0]})",
        ) from None

    inputs = keras.Input(spec.input_shape)
    x = base(ArchPreprocessing(cfg.arch, name="preprocess")(inputs))
    if cfg.dropout > 0:
        x = keras.layers.Dropout(cfg.dropout, name="head_dropout")(x)
    for layer in task_head(spec):
        x = layer(x)
    return keras.Model(inputs, x, name=cfg.arch)
