"""tfhydra's histograms (tfhydra/trainer/histograms.py) are TensorBoard's, value for value, written faster.

The bucketing is compared with TensorBoard's own `_buckets` on generated tensors (Hypothesis: any shape,
floats of any spread, integers, a single distinct value, no values); the callback's event files are compared
with those Keras' own TensorBoard callback writes for the same weights: the same tags, steps and tensors.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from conftest import HYPOTHESIS_SEED, counts_cases
from hypothesis import given, seed, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.histogram import summary_v2

from tfhydra.trainer.histograms import TensorBoard, buckets

CASES = int(os.environ.get("TFHYDRA_PROPERTY_CASES", "300")) // 3

FLOATS = hnp.arrays(
    np.float32,
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=40),
    elements=st.floats(-1e6, 1e6, width=32),
)
CONSTANT = st.builds(lambda value, n: np.full([n], value, np.float32), st.floats(-10, 10, width=32), st.integers(1, 50))
INTEGERS = hnp.arrays(np.int64, hnp.array_shapes(max_dims=2, max_side=30), elements=st.integers(-5, 5))


@counts_cases()
@seed(HYPOTHESIS_SEED)
@settings(max_examples=CASES, deadline=None, database=None)
@given(data=st.one_of(FLOATS, CONSTANT, INTEGERS), count=st.sampled_from([1, 2, 7, 30]))
def test_buckets_equal_tensorboards_own(data, count):
    expected = summary_v2._buckets(tf.constant(data), tf.constant(count)).numpy()
    np.testing.assert_array_equal(buckets(tf.constant(data), count).numpy(), expected)


def histogram_events(log_dir) -> dict:
    """{tag: [(step, tensor)]} of every histogram summary under `log_dir`."""
    accumulator = EventAccumulator(str(log_dir), size_guidance={"tensors": 0})
    accumulator.Reload()
    return {
        tag: [(event.step, tf.make_ndarray(event.tensor_proto)) for event in accumulator.Tensors(tag)]
        for tag in accumulator.Tags()["tensors"]
        if tag.endswith("/histogram")
    }


def test_the_callback_writes_what_keras_writes(tmp_path):
    keras.utils.set_random_seed(0)
    # Named layers: Keras numbers unnamed ones by how many came before in the process (dense_7 in a full run).
    model = keras.Sequential(
        [
            keras.Input((6, 6, 1)),
            keras.layers.Conv2D(3, 3, activation="relu", name="conv"),
            keras.layers.BatchNormalization(name="norm"),
            keras.layers.Flatten(),
            keras.layers.Dense(4, name="dense"),
        ]
    )
    model.compile("adam", "mse")
    x, y = np.random.default_rng(0).normal(size=(16, 6, 6, 1)), np.ones((16, 4))
    callbacks = {
        "ours": TensorBoard(log_dir=str(tmp_path / "ours"), histogram_freq=1, write_graph=False),
        "keras": keras.callbacks.TensorBoard(log_dir=str(tmp_path / "keras"), histogram_freq=1, write_graph=False),
    }
    for callback in callbacks.values():
        callback.set_model(model)
    for epoch in range(2):  # both write the same weights at each epoch; a training step in between
        for callback in callbacks.values():
            callback.on_epoch_end(epoch, {"loss": 1.0})
        model.train_on_batch(x, y)
    for callback in callbacks.values():
        callback.on_train_end()
    ours, theirs = (histogram_events(tmp_path / name / "train") for name in ("ours", "keras"))
    assert sorted(ours) == sorted(theirs) and len(ours) == 8, sorted(ours)  # conv, dense: 2 each; BN: 4
    for tag, events in theirs.items():
        assert [step for step, _ in ours[tag]] == [step for step, _ in events] == [0, 1]
        for (_, mine), (_, keras_own) in zip(ours[tag], events, strict=True):
            np.testing.assert_array_equal(mine, keras_own)
    kernel = ours["dense/kernel_0/histogram"]
    assert not np.array_equal(kernel[0][1], kernel[1][1])  # the step between them changed the weights
    # one trace for all 8 weights of 4 shapes, and both epochs: its cost does not grow with the model
    assert callbacks["ours"]._histograms._write.experimental_get_tracing_count() == 1


def test_an_empty_or_constant_weight_is_written_as_tensorboard_would(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        for data in (np.zeros([0], np.float32), np.full([5], 2.5, np.float32)):
            got, want = buckets(tf.constant(data)).numpy(), summary_v2._buckets(tf.constant(data)).numpy()
            np.testing.assert_array_equal(got, want)
            assert got.shape == (30, 3)
    assert buckets(tf.constant(np.full([5], 2.5, np.float32))).numpy()[-1, 2] == pytest.approx(5)
