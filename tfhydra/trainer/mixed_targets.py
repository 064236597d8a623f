"""The loss and accuracy of a run whose training targets are mixed one-hot rows (`data.augment`'s mixup and
cutmix, tfhydra/data/batch_mixing.py) while validation and test keep class indices.

One compiled model meets both kinds of label (Keras picks a string metric's variant once, from the first batch it
sees, and the custom loop builds its accumulators on a validation batch), so each object here takes either: a
label tensor as wide as the predictions is a row of class weights, anything else class indices. Which one is
known from the static shapes, so each traced step holds one branch. On class indices both give what the sparse
loss and accuracy give: validation figures are unchanged.
"""

from __future__ import annotations

import tensorflow as tf

from tfhydra.platform.keras_lib import keras


def is_target_rows(y_true, y_pred) -> bool:
    """Rows of class weights (the predictions' width, more than one class), not class indices."""
    return (
        y_true.shape.rank == y_pred.shape.rank
        and y_pred.shape[-1] not in (None, 1)
        and y_true.shape[-1] == y_pred.shape[-1]
    )


@keras.saving.register_keras_serializable(package="tfhydra")
class MixedTargetCrossentropy(keras.losses.Loss):
    """Categorical crossentropy against mixed one-hot rows (the twin of the sparse one), sparse crossentropy against
    class indices; `from_logits` and `label_smoothing` as the loss it stands for had them."""

    def __init__(
        self, from_logits: bool = False, label_smoothing: float = 0.0, name: str = "mixed_target_crossentropy", **kwargs
    ):
        super().__init__(name=name, **kwargs)
        self.from_logits, self.label_smoothing = bool(from_logits), float(label_smoothing)

    def call(self, y_true, y_pred):
        y_pred = tf.cast(y_pred, tf.float32)
        y_true = tf.convert_to_tensor(y_true)
        if is_target_rows(y_true, y_pred):
            targets = tf.cast(y_true, tf.float32)
        else:
            labels = tf.cast(tf.reshape(y_true, tf.shape(y_pred)[:-1]), tf.int32)
            if not self.label_smoothing:
                return keras.losses.sparse_categorical_crossentropy(labels, y_pred, from_logits=self.from_logits)
            targets = tf.one_hot(labels, tf.shape(y_pred)[-1], dtype=tf.float32)
        return keras.losses.categorical_crossentropy(
            targets, y_pred, from_logits=self.from_logits, label_smoothing=self.label_smoothing
        )

    def get_config(self) -> dict:
        return {**super().get_config(), "from_logits": self.from_logits, "label_smoothing": self.label_smoothing}


@keras.saving.register_keras_serializable(package="tfhydra")
class MixedTargetAccuracy(keras.metrics.SparseCategoricalAccuracy):
    """Accuracy against class indices, and against a mixed row's largest class (the example that dominates it)."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred = tf.convert_to_tensor(y_true), tf.convert_to_tensor(y_pred)
        if is_target_rows(y_true, y_pred):
            y_true = tf.argmax(y_true, axis=-1)[..., None]
        return super().update_state(y_true, y_pred, sample_weight)


def twin_loss(node, label_smoothing: float = 0.0) -> MixedTargetCrossentropy:
    """`trainer.loss` (a crossentropy name or Keras node, as data/augment_checks.py `check_mixed_targets` let
    through) as its twin: the node's own `from_logits` and `label_smoothing` kept, else `trainer.label_smoothing`."""
    options = (
        {} if isinstance(node, str) else {k: v for k, v in node.items() if k in ("from_logits", "label_smoothing")}
    )
    return MixedTargetCrossentropy(options.get("from_logits", False), options.get("label_smoothing", label_smoothing))


def target_metrics(nodes) -> list:
    """Each accuracy name (the only metrics check_mixed_targets lets through) as an accuracy of that name, so the
    logs keep `accuracy` and `val_accuracy`."""
    return [MixedTargetAccuracy(name=str(node)) for node in nodes]
