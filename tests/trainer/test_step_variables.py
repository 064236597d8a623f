"""trainer/loops.make_step_variables: the variables of the first training step made before `fit`, so Keras traces
its train function once instead of twice, with the same numbers (docs/performance.md)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tfhydra.trainer.loops import make_step_variables


def trained(make_first: bool, labels: str = "sparse") -> tuple[int, list[float]]:
    """(tracings of the train function, the epochs' losses) of a small CNN fitted for 2 epochs at 16 steps a call."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8, 8, 1))
    x = keras.layers.Flatten()(keras.layers.Conv2D(4, 3, activation="relu")(inputs))
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(x))
    loss = "sparse_categorical_crossentropy" if labels == "sparse" else "categorical_crossentropy"
    model.compile(keras.optimizers.Adam(1e-2), loss, ["accuracy"], steps_per_execution=16)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 96)
    y = y if labels == "sparse" else np.eye(3, dtype="float32")[y]
    data = tf.data.Dataset.from_tensor_slices((rng.random((96, 8, 8, 1), dtype="float32"), y)).batch(8)
    if make_first:
        make_step_variables(model, data)
    history = model.fit(data, epochs=2, verbose=0)
    return model.train_tf_function.experimental_get_tracing_count(), history.history["loss"]


def test_the_train_function_is_traced_once_with_the_same_losses():
    before, losses = trained(make_first=False)
    after, same_losses = trained(make_first=True)
    assert (before, after) == (2, 1)
    assert same_losses == losses  # bit for bit: the same initial values, the same steps


def test_one_hot_labels_get_the_same_metric_as_fit_would_choose():
    count, losses = trained(make_first=True, labels="one_hot")
    assert count == 1 and losses == trained(make_first=False, labels="one_hot")[1]


def test_a_dataset_without_labels_is_left_to_fit():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    make_step_variables(model, tf.data.Dataset.from_tensor_slices(np.zeros((4, 2), "float32")).batch(2))
    assert not model.compiled_metrics.built and not model.compiled_loss.built
    assert [v.name for v in model.optimizer.variables] == ["iteration:0"]  # no slots yet
