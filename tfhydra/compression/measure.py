"""Figures read from a model's weights, for metrics.json's `compression` section.

Only weights of rank >= 2 count: convolution, dense, embedding and recurrent kernels, which
are what pruning and clustering act on. Biases, normalisation parameters and quantization
ranges are never pruned or clustered, and would dilute the figures.
"""

from __future__ import annotations

import numpy as np

from tfhydra.platform.keras_lib import keras


def kernels(model: keras.Model) -> dict[str, np.ndarray]:
    """Rank >= 2 weights as `<layer>/<weight>` (`conv2d/kernel`); a QuantizeWrapper's kernel is its inner layer's."""
    found = {}
    for layer in flat_layers(model):
        name = getattr(layer, "layer", layer).name
        for weight in layer.weights:
            if len(weight.shape) >= 2:
                found[f"{name}/{weight.name.split('/')[-1].split(':')[0]}"] = weight.numpy()
    return found


def flat_layers(model: keras.Model):
    for layer in model.layers:
        if isinstance(layer, keras.Model):  # a model inside the model (keras.applications backbones)
            yield from flat_layers(layer)
        else:
            yield layer


def sparsity(model: keras.Model) -> dict:
    weights = kernels(model)
    zeros = {name: int(np.count_nonzero(w == 0)) for name, w in weights.items()}
    total = sum(w.size for w in weights.values())
    return {
        "overall": sum(zeros.values()) / total if total else 0.0,
        "layers": {name: zeros[name] / w.size for name, w in weights.items()},
    }


def distinct_values(model: keras.Model) -> dict[str, int]:
    return {name: int(np.unique(w).size) for name, w in kernels(model).items()}
