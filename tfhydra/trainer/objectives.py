"""Loss and metrics from `trainer.loss` / `trainer.metrics`: Keras names, or nodes with `_target_`."""
from __future__ import annotations

import tf_keras as keras
from omegaconf import DictConfig

from tfhydra.errors import ConfigError
from tfhydra.registry import instantiate_target


def build_loss(node):
    if isinstance(node, DictConfig):
        return instantiate_target(node, "trainer.loss")
    try:
        return keras.losses.get(node)
    except (ValueError, TypeError):
        raise ConfigError("trainer.loss", node, "a Keras loss name such as sparse_categorical_crossentropy, "
                          "or a node with _target_", "unknown loss") from None


def build_metrics(nodes) -> list:
    metrics = []
    for i, node in enumerate(nodes):
        if isinstance(node, DictConfig):
            metrics.append(instantiate_target(node, f"trainer.metrics[{i}]"))
            continue
        try:
            keras.metrics.get(node)
        except (ValueError, TypeError):
            raise ConfigError(f"trainer.metrics[{i}]", node, "a Keras metric name such as accuracy, "
                              "or a node with _target_", "unknown metric") from None
        metrics.append(node)  # by name, so Keras picks the variant matching the loss (e.g. sparse accuracy)
    return metrics
