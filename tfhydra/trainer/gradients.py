"""Gradients in TensorBoard (`logging.gradients`, every `logging.histogram_freq` epochs), in both loops: the
global norm (`gradient_norm/global`), each variable's norm (`gradient_norm/<variable>`) and histogram
(`gradients/<variable>`), written to the run's `tensorboard/train/` beside Keras' own scalars, at the epoch's
step (0-based, as Keras' `epoch_*` scalars).

They are measured on one training batch, taken once and kept, so epochs compare on the same examples: an extra
forward and backward pass, in inference mode (no dropout), outside the compiled step, so the step's speed is
untouched. Its cost on the default run is in docs/performance.md.
"""

from __future__ import annotations

import tensorflow as tf

from tfhydra.platform.keras_lib import keras, variable_tag
from tfhydra.trainer.histograms import write_histogram


def write_gradient_summaries(model: keras.Model, batch, writer, epoch: int) -> None:
    """Norms and histograms of the loss's gradients on `batch` (x, y), through `writer` at step `epoch`."""
    x, y = batch
    strategy = model.distribute_strategy or tf.distribute.get_strategy()

    def gradients(x, y):  # in a replica: a strategy's variables are read there (each replica sees the whole batch)
        with tf.GradientTape() as tape:
            loss = _loss(model, x, y)
        return tape.gradient(loss, model.trainable_variables)

    found = strategy.run(gradients, args=(x, y))
    pairs = [
        (v, strategy.experimental_local_results(g)[0])
        for v, g in zip(model.trainable_variables, found, strict=True)
        if g is not None
    ]
    with writer.as_default(step=epoch):
        tf.summary.scalar("gradient_norm/global", tf.linalg.global_norm([g for _, g in pairs]))
        for variable, gradient in pairs:
            name = variable_tag(variable)
            tf.summary.scalar(f"gradient_norm/{name}", tf.norm(gradient))
            write_histogram(f"gradients/{name}", gradient, epoch)
    writer.flush()


def _loss(model: keras.Model, x, y):
    """The compiled loss (plus the model's regularization losses) without `compute_loss`, which also updates the
    loss tracker: a SyncOnRead variable that a distribution strategy refuses to update outside a replica
    (`logging.gradients` under `strategy=mirrored` failed the run at the first epoch's end)."""
    loss_fn = model.loss if callable(model.loss) else keras.losses.get(model.loss)
    value = tf.reduce_mean(loss_fn(y, model(x, training=False)))
    return value + tf.add_n(model.losses) if model.losses else value


class GradientSummaries(keras.callbacks.Callback):
    """`write_gradient_summaries` at the end of every `freq`-th epoch, on the first batch of `train`."""

    def __init__(self, train: tf.data.Dataset, log_dir, freq: int) -> None:
        super().__init__()
        self.train, self.log_dir, self.freq = train, str(log_dir), freq
        self.batch, self.writer = None, None

    def on_epoch_end(self, epoch, logs=None):
        if (epoch + 1) % self.freq:
            return
        if self.batch is None:
            self.batch = next(iter(self.train))
        if self.writer is None:  # closed at each training call's end; trainer.recovery calls the loop again
            self.writer = tf.summary.create_file_writer(self.log_dir)
        write_gradient_summaries(self.model, self.batch, self.writer, epoch)

    def on_train_end(self, logs=None):
        if self.writer is not None:
            self.writer.close()
            self.writer = None
