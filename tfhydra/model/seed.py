"""The seed's two models, unchanged: a Sequential CNN and a functional-API MLP."""

from __future__ import annotations

from tfhydra.config.contracts import DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.model.base import FEATURE_KIND, IMAGE_KIND, MODELS, require_features, require_images
from tfhydra.model.head import task_head
from tfhydra.model.linear_start import loss_units, starts_linear
from tfhydra.model.schemas import CnnModelConfig, MlpModelConfig
from tfhydra.platform.keras_lib import keras


@MODELS.register("cnn", schema=CnnModelConfig, default_for=IMAGE_KIND)  # model=auto's pick for images (auto.py)
def build_cnn(cfg: CnnModelConfig, spec: DataSpec) -> keras.Model:
    """The seed Sequential CNN."""
    height, width, _ = require_images(spec, "cnn")
    for depth in range(1, len(cfg.filters) + 1):
        height, width = (height - cfg.kernel_size + 1) // cfg.pool_size, (width - cfg.kernel_size + 1) // cfg.pool_size
        if min(height, width) < 1:
            raise ConfigError(
                "model.filters",
                list(cfg.filters),
                f"at most {depth - 1} conv blocks for {spec.input_shape[0]}x{spec.input_shape[1]} images",
                "the images are too small for this many conv blocks",
            )
    layers = [keras.Input(spec.input_shape)]
    for filters in cfg.filters:
        layers += [
            keras.layers.Conv2D(filters, cfg.kernel_size, activation=cfg.activation),
            keras.layers.MaxPooling2D(cfg.pool_size),
        ]
    layers += [keras.layers.Flatten(), keras.layers.Dense(cfg.dense_units, activation=cfg.activation)]
    return keras.Sequential(layers + task_head(spec), name="cnn")


@MODELS.register("mlp", schema=MlpModelConfig, default_for=FEATURE_KIND)  # auto's pick for tables
def build_mlp(cfg: MlpModelConfig, spec: DataSpec) -> keras.Model:
    """The seed functional-API MLP; flattens any float example (images or feature vectors). `wide`: the flattened
    inputs also reach the head's logits through one Dense layer of their own (Cheng et al.'s wide & deep), so the
    model holds the linear model as a special case and the hidden layers add what is not linear. With
    `linear_start` under a regression the deep kernels carry `deep_l2`, weighed against the loss on standardised
    targets (the runner then starts the model at the linear fit: linear_start.py)."""
    require_features(spec, "mlp")
    penalty = None
    if starts_linear(cfg, spec) and cfg.deep_l2 > 0:  # linear_start and deep_l2 came together
        penalty = keras.regularizers.L2(float(cfg.deep_l2) * loss_units(spec))
    inputs = keras.Input(spec.input_shape)
    flat = x = keras.layers.Flatten()(inputs)
    for i, units in enumerate(cfg.units):
        x = keras.layers.Dense(units, activation=cfg.activation, kernel_regularizer=penalty)(x)
        if i < len(cfg.units) - 1 and cfg.dropout > 0:
            x = keras.layers.Dropout(cfg.dropout)(x)
    logits, output = task_head(spec)
    logits.kernel_regularizer = penalty  # the deep output (built at its call below)
    x = logits(x)
    if getattr(cfg, "wide", None):  # a node composed before the key existed has none
        x = keras.layers.Add(name="wide_and_deep")([x, keras.layers.Dense(logits.units, name="wide")(flat)])
    return keras.Model(inputs, output(x), name="mlp")
