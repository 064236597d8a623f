"""Histograms for TensorBoard, the same ones `tf.summary.histogram` writes, at a fraction of the cost.

TensorBoard's own bucketing (`tensorboard.plugins.histogram.summary_v2._buckets`) one-hot encodes every value
into its 30 buckets in float64 and sums them: for the seed CNN's 1.2M-weight dense kernel that is a 290 MB
temporary and 65 ms, eagerly, per weight and per epoch, which made weight histograms every epoch cost more than
a tenth of a short epoch. `buckets` counts with `tf.math.bincount` instead (3.7 ms for the same kernel, compiled)
and returns the identical `[k, 3]` tensor of (left edge, right edge, count), edge cases included: no values,
or one distinct value. `TensorBoard` is Keras' callback with its weight histograms written by one compiled call
per epoch for all weights, under the same tags (`<weight>/histogram`); docs/performance.md has the figures.

Divergence beats logging (docs/reliability.md): a histogram counts the finite values only, so the epoch a run
blows up in (NaN or infinite weights or gradients) is written, not an error that would end the run `failed`
instead of `diverged` (TensorBoard's own bucketing writes meaningless edges for such a tensor; ours leaves the
non-finite values out, and a tensor with none finite is written as an empty one). The compiled writer is bound
to the summary writer it was traced with: a second `fit` on the same callback (trainer.recovery trains again)
gets a new one.
"""

from __future__ import annotations

import tensorflow as tf
from tensorboard.plugins.histogram import metadata as histogram_metadata

from tfhydra.platform.keras_lib import keras, variable_tag

BUCKETS = 30  # TensorBoard's default bucket count


def buckets(data, bucket_count: int = BUCKETS) -> tf.Tensor:
    """`summary_v2._buckets(data, bucket_count)` value for value, counted with bincount (no one-hot matrix), of
    the finite values of `data` (NaN and infinities are left out: a diverged model's weights).

    Without `tf.cond`: TensorBoard's three cases (no values; one distinct value, all counted in the last bucket
    with every edge at it; a spread) are chosen by `tf.where` on what is computed for all three, which cuts the
    `HistogramWriter`'s one trace by about 30% of its CPU (0.77 -> 0.54 s for a 3-layer MLP), a fixed cost of
    every run with histograms (docs/performance.md, "Tasks")."""
    data = tf.cast(tf.reshape(data, [-1]), tf.float64)
    data = tf.boolean_mask(data, tf.math.is_finite(data))
    size = tf.size(data)
    low, high = tf.reduce_min(data), tf.reduce_max(data)  # +inf and -inf when there are no values
    spread = high - low > 0  # false for one distinct value, and for none
    width = tf.where(spread, (high - low) / tf.cast(bucket_count, tf.float64), tf.constant(1.0, tf.float64))
    index = tf.minimum(tf.cast(tf.floor((data - low) / width), tf.int32), bucket_count - 1)
    index = tf.where(spread, index, bucket_count - 1)
    counts = tf.cast(
        tf.math.bincount(index, minlength=bucket_count, maxlength=bucket_count, dtype=tf.int64), tf.float64
    )
    edges = tf.concat([tf.linspace(low, high, bucket_count + 1)[:-1], [high]], 0)  # one value: all of them at it
    edges = tf.where(size > 0, edges, tf.zeros_like(edges))
    return tf.stack([edges[:-1], edges[1:], counts], axis=1)


def write_histogram(tag: str, data, step) -> None:
    """What `tf.summary.histogram(tag, data, step)` writes (tensor and plugin metadata), through `buckets`."""
    tf.summary.write(
        tag,
        buckets(tf.stop_gradient(data)),
        step=step,
        metadata=histogram_metadata.create_summary_metadata(display_name=None, description=None),
    )


class HistogramWriter:
    """The histograms of a fixed list of (tag, variable) at a step, through `writer`, by one compiled function
    traced once for every weight (a string tag, any shape, float64 as `buckets` counts): the trace holds `writer`'s
    resource, so it serves that writer only.

    One trace for all the weights, not one function writing them all: that function's trace grew with the model
    (about 80 ms a weight, 0.7-1.1 s of CPU for the seed CNN's 8 weights, so 20 epochs of histograms cost 1.2 s of
    CPU, where this costs 0.45 s: 0.2 s to trace, then a call per weight, about 1.5 ms; docs/performance.md)."""

    SIGNATURE = (tf.TensorSpec([], tf.string), tf.TensorSpec(None, tf.float64), tf.TensorSpec([], tf.int64))

    def __init__(self, tagged: list[tuple[str, tf.Variable]], writer) -> None:
        self.tagged, self.writer = tagged, writer
        self._write = tf.function(write_histogram, autograph=False, input_signature=self.SIGNATURE)

    def __call__(self, step: int) -> None:
        with self.writer.as_default(), tf.summary.record_if(True):
            step = tf.constant(step, tf.int64)
            for tag, variable in self.tagged:
                self._write(tag, tf.cast(variable, tf.float64), step)  # exact: every weight dtype fits in float64


class TensorBoard(keras.callbacks.TensorBoard):
    """Keras' TensorBoard callback whose weight histograms are written by one compiled `HistogramWriter`."""

    _histograms: HistogramWriter | None = None

    def _log_weights(self, epoch):
        if self.write_images:  # weights as images too: Keras' own (eager) path
            return super()._log_weights(epoch)
        writer = self._train_writer  # Keras makes a new one for each fit (its writers are closed at the end)
        if self._histograms is None or self._histograms.writer is not writer:
            self._histograms = HistogramWriter(
                [
                    (f"{variable_tag(weight)}/histogram", weight)
                    for layer in self.model.layers
                    for weight in layer.weights
                ],
                writer,
            )
        self._histograms(epoch)
        self._train_writer.flush()
