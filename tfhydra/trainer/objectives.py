"""Loss and metrics from `trainer.loss` / `trainer.metrics`: Keras names, or nodes with `_target_`;
`trainer.label_smoothing` for the two crossentropy names."""

from __future__ import annotations

import tensorflow as tf
from omegaconf import DictConfig

from tfhydra.config.errors import ConfigError
from tfhydra.config.registry import instantiate_target
from tfhydra.platform.keras_lib import keras
from tfhydra.trainer.mixed_targets import target_metrics, twin_loss


class SparseCrossentropyWithSmoothing(keras.losses.Loss):
    """Crossentropy of integer labels against smoothed one-hot targets: tf_keras' sparse crossentropy has no
    `label_smoothing`, and one-hot labels would change every data source and the serving signature."""

    def __init__(self, label_smoothing: float, name: str = "sparse_categorical_crossentropy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.label_smoothing = float(label_smoothing)

    def call(self, y_true, y_pred):
        y_pred = tf.cast(y_pred, tf.float32)
        labels = tf.cast(tf.reshape(y_true, tf.shape(y_pred)[:-1]), tf.int32)
        targets = tf.one_hot(labels, tf.shape(y_pred)[-1], dtype=tf.float32)
        return keras.losses.categorical_crossentropy(targets, y_pred, label_smoothing=self.label_smoothing)

    def get_config(self) -> dict:
        return {**super().get_config(), "label_smoothing": self.label_smoothing}


def build_loss(node, label_smoothing: float = 0.0, mixed_targets: bool = False):
    """`mixed_targets`: training targets are mixed one-hot rows (data.augment's mixup/cutmix): the loss's
    categorical twin, which validation's class indices still fit (tfhydra/trainer/mixed_targets.py)."""
    if mixed_targets:
        return twin_loss(node, label_smoothing)
    if isinstance(node, DictConfig):
        return instantiate_target(node, "trainer.loss")
    try:
        loss = keras.losses.get(node)
    except (ValueError, TypeError):
        raise ConfigError(
            "trainer.loss",
            node,
            "a Keras loss name such as sparse_categorical_crossentropy, or a node with _target_",
            "unknown loss",
        ) from None
    if not label_smoothing:
        return loss
    if node == "sparse_categorical_crossentropy":
        return SparseCrossentropyWithSmoothing(label_smoothing)
    return keras.losses.CategoricalCrossentropy(label_smoothing=label_smoothing)  # checks.py: SMOOTHABLE_LOSSES


def build_metrics(nodes, mixed_targets: bool = False) -> list:
    if mixed_targets:
        return target_metrics(nodes)
    metrics = []
    for i, node in enumerate(nodes):
        if isinstance(node, DictConfig):
            metrics.append(instantiate_target(node, f"trainer.metrics[{i}]"))
            continue
        try:
            keras.metrics.get(node)
        except (ValueError, TypeError):
            raise ConfigError(
                f"trainer.metrics[{i}]",
                node,
                "a Keras metric name such as accuracy, or a node with _target_",
                "unknown metric",
            ) from None
        metrics.append(node)  # by name, so Keras picks the variant matching the loss (e.g. sparse accuracy)
    return metrics
