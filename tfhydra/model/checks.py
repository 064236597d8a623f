"""What the run plan checks in the model options: the ranges and choices of their keys. No TensorFlow.

Whether the data suit a model is known only once the data are built (tfhydra/model/base.py's `require_*`)."""
from __future__ import annotations

from tfhydra.config.schema import Rule, choice, integer, is_int, is_weights, list_of, number, optional

# tf_keras.applications' architectures (`model=keras_app model.arch=...`), checked before TensorFlow is
# imported; tests/runner/test_plan_group_checks.py holds the list to the installed tf_keras.
KERAS_APPLICATIONS = (
    "ConvNeXtBase", "ConvNeXtLarge", "ConvNeXtSmall", "ConvNeXtTiny", "ConvNeXtXLarge", "DenseNet121", "DenseNet169",
    "DenseNet201", "EfficientNetB0", "EfficientNetB1", "EfficientNetB2", "EfficientNetB3", "EfficientNetB4",
    "EfficientNetB5", "EfficientNetB6", "EfficientNetB7", "EfficientNetV2B0", "EfficientNetV2B1", "EfficientNetV2B2",
    "EfficientNetV2B3", "EfficientNetV2L", "EfficientNetV2M", "EfficientNetV2S", "InceptionResNetV2", "InceptionV3",
    "MobileNet", "MobileNetV2", "MobileNetV3Large", "MobileNetV3Small", "NASNetLarge", "NASNetMobile", "RegNetX002",
    "RegNetX004", "RegNetX006", "RegNetX008", "RegNetX016", "RegNetX032", "RegNetX040", "RegNetX064", "RegNetX080",
    "RegNetX120", "RegNetX160", "RegNetX320", "RegNetY002", "RegNetY004", "RegNetY006", "RegNetY008", "RegNetY016",
    "RegNetY032", "RegNetY040", "RegNetY064", "RegNetY080", "RegNetY120", "RegNetY160", "RegNetY320", "ResNet101",
    "ResNet101V2", "ResNet152", "ResNet152V2", "ResNet50", "ResNet50V2", "ResNetRS101", "ResNetRS152", "ResNetRS200",
    "ResNetRS270", "ResNetRS350", "ResNetRS420", "ResNetRS50", "VGG16", "VGG19", "Xception")

# tf_keras' activation functions by name (tests/runner/test_plan_group_checks.py holds it to the installed tf_keras).
KERAS_ACTIVATIONS = ("elu", "exponential", "gelu", "hard_sigmoid", "linear", "mish", "relu", "selu", "sigmoid",
                     "softmax", "softplus", "softsign", "swish", "tanh")

# Keys whose valid range is narrower than their type. Keep one line per key.
# The model options' ranges and choices (a rule applies to every option with that key), read by the schema's checks.
RULES: dict[str, Rule] = {
    "model.filters": list_of(integer(1)),
    "model.units": list_of(integer(1)),
    "model.kernel_size": integer(1),
    "model.pool_size": integer(1),
    "model.dense_units": integer(1),
    "model.dropout": number(0, 1, low_open=False),
    "model.activation": choice(*KERAS_ACTIVATIONS),
    "model.arch": choice(*KERAS_APPLICATIONS),
    "model.depth": optional(Rule("6n+2 with n >= 1 (8, 14, 20, 32, 44, 56, 110, ...)",
                                 lambda v: is_int(v) and v >= 8 and (v - 2) % 6 == 0, numeric=True)),
    "model.blocks_per_stage": optional(list_of(integer(1))),
    "model.width": integer(1),
    "model.weights": Rule("null (random initialisation), imagenet (downloads; needs network) or the path of an "
                          "existing weights file", is_weights, refusal="no such file"),
    "model.pooling": choice("avg", "max"),
    "model.cell": choice("lstm", "gru"),
    "model.bidirectional": choice(True, False),
    "model.embedding_dim": integer(1),
    "model.mask_zero": choice(True, False),
    "model.heads": integer(1),
    "model.blocks": integer(1),
    "model.mlp_dim": integer(1),
    "model.positions": choice("sinusoidal", "learned"),
}
