"""The model's fixed output layers, which a scheme leaves as they are.

A head may end in a layer that holds no weights and that the Model Optimization Toolkit has no rule for: the fixed
`outputs * std + mean` (a `Rescaling`) of a regression with `task.standardize` (tfhydra/model/base.py). There is
nothing in it to prune, cluster or quantize, and it is the last float32 step into the target's units, so the
schemes wrap every other layer and keep it, rather than refusing the whole model. An output layer the toolkit does
support (the float32 softmax, sigmoid or linear `Activation` of the other heads) is wrapped as before, so those
models are compressed exactly as they were. Any other layer the toolkit does not support is still refused
(schemes.py `toolkit_errors`).
"""

from __future__ import annotations

from collections.abc import Callable

from tfhydra.compression.toolkit import quantization_api, sparsity_api
from tfhydra.platform.keras_lib import keras


def fixed_outputs(model: keras.Model, supported: Callable[[keras.layers.Layer], bool]) -> set[str]:
    """The names of `model`'s output layers without weights that `supported` (the scheme's rule) refuses."""
    outputs = set(model.output_names)
    fixed = (layer for layer in model.layers if layer.name in outputs and not layer.weights)
    return {layer.name for layer in fixed if not supported(layer)}


def prunable(layer: keras.layers.Layer) -> bool:
    """Whether tfmot's pruning wraps `layer` (its wrapper refuses a layer it has no rule for), tried on a copy."""
    try:
        sparsity_api.prune_low_magnitude(type(layer).from_config(layer.get_config()))
    except ValueError:
        return False
    return True


def keeping_policy(fixed: set[str]):
    """tfmot's `PruningPolicy` that prunes every layer but the `fixed` outputs (None when there are none: tfmot's
    own whole-model pruning, as before)."""
    if not fixed:
        return None

    class KeepFixedOutputs(sparsity_api.PruningPolicy):  # type: ignore[name-defined]
        def allow_pruning(self, layer) -> bool:
            return layer.name not in fixed

        def ensure_model_supports_pruning(self, model) -> None:
            """Every model tfmot itself takes; the layers it does not are refused when wrapped."""

    return KeepFixedOutputs()


def annotated(model: keras.Model, scheme) -> keras.Model:
    """`model` annotated for quantization-aware training under `scheme`: every layer (tfmot's
    `quantize_annotate_model`), or, when the model ends in fixed outputs the scheme has no rule for, every layer
    but those (they stay float32 after the quantized network)."""
    fixed = fixed_outputs(model, scheme.get_quantize_registry().supports)
    if not fixed:
        return quantization_api.quantize_annotate_model(model)

    def annotate(layer):
        return layer if layer.name in fixed else quantization_api.quantize_annotate_layer(layer)

    return keras.models.clone_model(model, clone_function=annotate)
