"""`model.freeze`: which layers train. Fine-tuning a pretrained network first trains its head alone.

`none` trains every layer; `base` freezes every layer with weights but the last one (the classifier head every
builder ends with, and the output layer of a user's model: the one rule that holds for them all; a model whose one
weighted layer is itself a model, as model=keras_hub's classifier, by the same rule inside it); a list of
layer-name patterns (`fnmatch`, e.g. `[stem*, stage1_*]`) freezes the layers whose names match, at any depth of
nested models (keras_app's application is one layer of the model, its own layers inside it). A frozen layer's
weights are not trainable, so neither loop nor the optimizer touches them, and a frozen BatchNormalization
runs in inference mode (tf_keras does so for `trainable = False`): its moving statistics stay as loaded, as the
transfer-learning guide asks. Applied before `compile`, so the compiled model trains exactly what is left.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from tfhydra.config.errors import ConfigError
from tfhydra.platform.keras_lib import keras

KEY = "freeze"
ACCEPTED = "none, base (every layer with weights but the output layer) or a list of layer-name patterns"


def freeze_layers(model: keras.Model, setting) -> None:
    """Freeze what `setting` (model.freeze) names."""
    if setting in (None, "none"):
        frozen: list[keras.layers.Layer] = []
    elif setting == "base":
        frozen = base_layers(model, model.name)
    else:
        frozen = matching_layers(model, list(setting))
    for layer in frozen:
        layer.trainable = False
    if frozen and model.weights and not model.trainable_weights:  # the run would end `completed`, trained in nothing
        raise ConfigError(
            f"model.{KEY}",
            setting if isinstance(setting, str) else list(setting),
            f"{ACCEPTED}, leaving a layer with weights to train",
            "it freezes every weight of the model: nothing would train (0 trainable parameters)",
        )


def base_layers(model: keras.Model, name: str) -> list[keras.layers.Layer]:
    """Every layer with weights but the last. A model whose one weighted layer is a model of its own (keras-hub's
    classifier behind its preprocessor, tfhydra/model/hub.py) is looked into: its backbone freezes, its head trains."""
    weighted = [layer for layer in model.layers if layer.weights]
    if len(weighted) == 1 and isinstance(weighted[0], keras.Model):
        return base_layers(weighted[0], name)
    if len(weighted) < 2:
        raise ConfigError("model.freeze", "base", ACCEPTED, f"model {name} has no layer but its output")
    return weighted[:-1]


def trained_layers(model: keras.Model, setting) -> dict:
    """The record's `layers`: read from the model as compiled (compression's wrappers included), so it says what
    trained, not what was asked. `frozen`: the top-level layers with weights none of which train; `trained`: the
    top-level layers with a weight that trains (a partly frozen nested model is in it). `frozen_params` counts the
    weights frozen by `model.freeze` (or by the model's own builder), `statistics_params` the weights no optimizer
    trains in any layer (BatchNormalization's moving mean and variance): under `freeze: none` only those are
    non-trainable, and they are not frozen."""
    statistics = statistics_params(model)
    return {
        "freeze": setting if isinstance(setting, str) or setting is None else list(setting),
        "frozen": [layer.name for layer in model.layers if layer.weights and not layer.trainable_weights],
        "trained": [layer.name for layer in model.layers if layer.trainable_weights],
        "trainable_params": count(model.trainable_weights),
        "frozen_params": count(model.non_trainable_weights) - statistics,
        "statistics_params": statistics,
    }


def statistics_params(model: keras.Model) -> int:
    """The non-trainable weights of the layers that train (BatchNormalization's moving statistics): read from
    the innermost layers, since a nested model that trains may hold a frozen layer."""
    kept = {
        id(weight): weight
        for layer in all_layers(model)
        if layer.trainable and not isinstance(layer, keras.Model)
        for weight in layer.non_trainable_weights
    }
    return count(kept.values())


def matching_layers(model: keras.Model, patterns: list) -> list[keras.layers.Layer]:
    """The layers (any depth) whose names match one of `patterns`; a pattern that matches none is a mistake."""
    layers = list(all_layers(model))
    for pattern in patterns:
        if not isinstance(pattern, str) or not any(fnmatchcase(layer.name, pattern) for layer in layers):
            names = ", ".join(layer.name for layer in model.layers)
            raise ConfigError(
                "model.freeze", pattern, f"{ACCEPTED}; the model's layers: {names}", "matches no layer of the model"
            )
    return [layer for layer in layers if any(fnmatchcase(layer.name, p) for p in patterns)]


def all_layers(model: keras.Model):
    for layer in model.layers:
        yield layer
        if isinstance(layer, keras.Model):
            yield from all_layers(layer)


def count(weights) -> int:
    return int(sum(weight.shape.num_elements() or 0 for weight in weights))
