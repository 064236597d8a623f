"""A user's own code, referenced from configs by `_target_` (tests put this folder on sys.path)."""

import time
from pathlib import Path

import tf_keras as keras


def build_tiny_model(spec, units: int = 8):
    """A user model builder: gets its YAML keys as keyword arguments plus the data spec."""
    inputs = keras.Input(spec.input_shape)
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(units, activation="relu")(x)
    outputs = keras.layers.Dense(spec.num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs, name=f"tiny{units}")


def build_headed_model(spec, units: int = 16):
    """The own-model builder docs/models.md and the README show: any body, ended by the task's head, so the same
    builder trains every task (classes, 0/1, multi-hot rows, numbers; standardised or not)."""
    from tfhydra.model.head import task_head

    inputs = keras.Input(spec.input_shape)
    x = keras.layers.Dense(units, activation="relu")(keras.layers.Flatten()(inputs))
    for layer in task_head(spec):
        x = layer(x)
    return keras.Model(inputs, x, name="headed")


def build_linear_model(spec, units: int = 16):
    """A user's regression model ending in a Dense of its own (no task_head): under `task.standardize=true` tfhydra
    appends the targets' scaling to it."""
    inputs = keras.Input(spec.input_shape)
    x = keras.layers.Dense(units, activation="relu")(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(spec.outputs)(x), name="linear")


def not_a_model(spec):
    return "not a model"


class SmoothedCrossEntropy(keras.losses.Loss):
    """A user loss with an argument, to show `trainer.loss._target_`."""

    def __init__(self, smoothing: float = 0.1, name: str = "smoothed_ce"):
        super().__init__(name=name)
        self.smoothing = smoothing

    def call(self, y_true, y_pred):
        import tensorflow as tf

        classes = tf.shape(y_pred)[-1]
        one_hot = tf.one_hot(tf.cast(tf.reshape(y_true, [-1]), tf.int32), classes)
        return keras.losses.categorical_crossentropy(one_hot, y_pred, label_smoothing=self.smoothing)


class EpochCounter(keras.callbacks.Callback):
    """A user callback with an argument: writes the epochs it saw to `path`."""

    def __init__(self, path: str):
        super().__init__()
        self.path, self.seen = path, []

    def on_epoch_end(self, epoch, logs=None):
        self.seen.append(epoch)

    def on_train_end(self, logs=None):
        with open(self.path, "w") as f:
            f.write(",".join(map(str, self.seen)))


class SparseFocalLoss(keras.losses.Loss):
    """A user's focal loss (Lin et al. 2017) on integer labels: cross-entropy scaled by (1 - p_true) ** gamma,
    so well-classified examples count less. gamma=0 is plain sparse categorical cross-entropy."""

    def __init__(self, gamma: float = 2.0, name: str = "focal"):
        super().__init__(name=name)
        self.gamma = gamma

    def call(self, y_true, y_pred):
        import tensorflow as tf

        labels = tf.cast(tf.reshape(y_true, [-1]), tf.int32)
        p_true = tf.clip_by_value(tf.gather(y_pred, labels, axis=-1, batch_dims=1), 1e-7, 1.0)
        return -tf.pow(1.0 - p_true, self.gamma) * tf.math.log(p_true)

    def get_config(self):
        return {**super().get_config(), "gamma": self.gamma}


def token_source(
    seed: int,
    vocab_size: int = 50,
    sequence_length: int = 16,
    num_classes: int = 2,
    train_size: int = 64,
    val_size: int = 32,
    **pipeline_options,
):
    """A user data source of token ids for sequence models (`data._target_`).

    Each class owns three keyword ids; an example is random filler ids with its class's
    keywords at random places, padded with 0 after a random length, so the label is
    learnable from the tokens. `pipeline_options` are the shared data keys (batch_size, ...).
    """
    import numpy as np

    from tfhydra.data.source import source_from_arrays

    rng = np.random.default_rng(seed)
    keywords = rng.permutation(np.arange(1, vocab_size))[: 3 * num_classes].reshape(num_classes, 3)

    def sample(n):
        y = rng.integers(0, num_classes, size=n)
        x = rng.integers(1, vocab_size, size=(n, sequence_length)).astype(np.int32)
        for row, label in zip(x, y, strict=True):
            length = rng.integers(sequence_length // 2, sequence_length + 1)
            row[rng.choice(length, size=3, replace=False)] = keywords[label]
            row[length:] = 0  # padding
        return x, y

    x_train, y_train = sample(train_size)
    x_val, y_val = sample(val_size)
    return source_from_arrays(
        x_train, y_train, x_val, y_val, [f"class{c}" for c in range(num_classes)], vocab_size=vocab_size
    )


class SubclassedNet(keras.Model):
    """A subclassed model (no graph of layers): the Model Optimization Toolkit cannot wrap it."""

    def __init__(self, num_classes: int):
        super().__init__(name="subclassed_net")
        self.flatten = keras.layers.Flatten()
        self.dense = keras.layers.Dense(16, activation="relu")
        self.classify = keras.layers.Dense(num_classes, activation="softmax")

    def call(self, inputs):
        return self.classify(self.dense(self.flatten(inputs)))


def build_subclassed_net(spec):
    model = SubclassedNet(spec.num_classes)
    model(keras.Input(spec.input_shape))  # built on a symbolic input, as a user would to see its summary
    return model


def build_normalised_mlp(spec):
    """A functional model with a LayerNormalization, which tfmot's 8-bit quantization scheme does not support."""
    inputs = keras.Input(spec.input_shape)
    x = keras.layers.Dense(16, activation="relu")(keras.layers.Flatten()(inputs))
    x = keras.layers.LayerNormalization(name="norm")(x)
    outputs = keras.layers.Dense(spec.num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="normalised_mlp")


class DiskFullAfterTraining(keras.callbacks.Callback):
    """While the file `marker` exists, training ends with the disk "full": the process may not write
    files larger than `limit_bytes` (RLIMIT_FSIZE; Python ignores SIGXFSZ, so writes fail with EFBIG)."""

    def __init__(self, marker: str, limit_bytes: int = 65536):
        super().__init__()
        self.marker, self.limit_bytes = marker, limit_bytes

    def on_train_end(self, logs=None):
        import os
        import resource

        if os.path.exists(self.marker):
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.limit_bytes, resource.RLIM_INFINITY))


def build_model_tflite_refuses(spec, units: int = 8):
    """A working Keras model whose Lambda uses `tf.math.lgamma`, an op TFLite's builtins do not have: the TFLite
    converter refuses it after training (the SELECT_TF_OPS tfhydra does not enable would take it)."""
    import tensorflow as tf

    inputs = keras.Input(spec.input_shape)
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Lambda(lambda t: tf.math.lgamma(1.0 + tf.abs(t)))(x)
    x = keras.layers.Dense(units, activation="relu")(x)
    outputs = keras.layers.Dense(spec.num_classes, activation="softmax", dtype="float32")(x)
    return keras.Model(inputs, outputs)


class PrintingCrossEntropy(keras.losses.Loss):
    """The article's debugging loss: prints the range of its inputs with plain Python `print(float(...))`, which
    shows numbers only when the loss runs eagerly (trainer.run_eagerly=true); traced in a tf.function, `float()`
    of a symbolic tensor fails."""

    def __init__(self, name: str = "printing_ce"):
        super().__init__(name=name)

    def call(self, y_true, y_pred):
        import tensorflow as tf

        print("PRED_RANGE", float(tf.reduce_min(y_pred)), float(tf.reduce_max(y_pred)), flush=True)
        return keras.losses.sparse_categorical_crossentropy(y_true, y_pred)


class NanAfter(keras.layers.Layer):
    """A layer that computes log(x - c): c = -1 (finite) for its first `after` calls in training, then c = 1e9,
    so the log of a negative number is NaN from call `after + 1` on (a known optimizer step)."""

    def __init__(self, after: int = 3, **kwargs):
        super().__init__(**kwargs)
        self.after = after

    def build(self, input_shape):
        self.calls = self.add_weight(name="calls", shape=(), initializer="zeros", trainable=False)

    def call(self, x, training=None):
        import tensorflow as tf

        if training:
            self.calls.assign_add(1.0)
        shift = tf.where(self.calls > self.after, 1e9, -1.0)
        return tf.math.log(tf.nn.relu(x) - shift)


def build_nan_model(spec, after: int = 3):
    """A small model whose layer `nan_layer` makes a NaN at training step `after + 1`."""
    inputs = keras.Input(spec.input_shape)
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(8)(x)
    x = NanAfter(after, name="nan_layer")(x)
    outputs = keras.layers.Dense(spec.num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="nan_model")


class NanOnce(keras.layers.Layer):
    """Adds log(-1) = NaN to its input at the `at`-th training call of the model's life in this process, and only
    then: the call counter is kept out of the layer's weights (in a plain namespace Keras does not track), so a
    restored state (trainer.recovery) does not bring the NaN back. A real blow-up: NaN loss, gradients, weights
    and, with EMA, averages; made by a Log op (check_numerics names it)."""

    def __init__(self, at: int, counter, **kwargs):
        super().__init__(**kwargs)
        self.at, self.counter = at, counter

    def call(self, x, training=None):
        import tensorflow as tf

        if not training:
            return x
        self.counter.calls.assign_add(1)
        return x + tf.math.log(tf.where(tf.equal(self.counter.calls, self.at), -1.0, 1.0))


def build_nan_once_model(spec, at: int = 85):
    """A small model whose layer `nan_once` makes a NaN at training step `at` (1-based, counted over this model's
    training calls in this process), once."""
    import types

    import tensorflow as tf

    counter = types.SimpleNamespace(calls=tf.Variable(0, dtype=tf.int64, trainable=False, name="nan_once_calls"))
    inputs = keras.Input(spec.input_shape)
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(16, activation="relu")(x)
    x = NanOnce(at, counter, name="nan_once")(x)
    outputs = keras.layers.Dense(spec.num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="nan_once_model")


class SignalOnce(keras.callbacks.Callback):
    """Sends this process SIGTERM at the end of epoch `epoch` (0-based) the first time only (`marker` says it was
    sent): the run saves its state and stops as interrupted, and the same config then resumes it."""

    def __init__(self, marker: str, epoch: int = 0):
        super().__init__()
        self.marker, self.epoch = marker, epoch

    def on_epoch_end(self, epoch, logs=None):
        import os
        import signal
        from pathlib import Path

        if epoch == self.epoch and not Path(self.marker).exists():
            Path(self.marker).touch()
            os.kill(os.getpid(), signal.SIGTERM)


class WeightsSeen(keras.callbacks.Callback):
    """Keeps the model's raw weights and the optimizer's moving averages after the last training batch, in `path`
    (an .npz: raw_<i>, ema_<i> per trainable variable)."""

    def __init__(self, path: str):
        super().__init__()
        self.path, self.raw, self.ema = path, [], []

    def on_train_batch_end(self, batch, logs=None):
        optimizer = getattr(self.model.optimizer, "inner_optimizer", self.model.optimizer)
        variables = self.model.trainable_variables
        self.raw = [v.numpy() for v in variables]
        self.ema = [
            optimizer._model_variables_moving_average[optimizer._index_dict[optimizer._var_key(v)]].numpy()
            for v in variables
        ]

    def on_train_end(self, logs=None):
        import numpy as np

        np.savez(
            self.path,
            **{f"raw_{i}": w for i, w in enumerate(self.raw)},
            **{f"ema_{i}": w for i, w in enumerate(self.ema)},
        )


class WeightsAtStart(keras.callbacks.Callback):
    """Saves every weight of the model (trainable or not: BatchNorm's moving statistics too), by name, in `path`
    (an .npz) before the first training batch, to compare with the weights a run keeps."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def on_train_begin(self, logs=None):
        import numpy as np

        np.savez(self.path, **{w.name: w.numpy() for w in self.model.weights})


OWN_STEP_EXTRA_LOSS = 10.0  # what OwnStepModel's steps add to the loss they report


class OwnStepModel(keras.Model):
    """Keras' "customizing what happens in fit" pattern: a functional model whose class brings its own `train_step`
    and `test_step`. Each reports `own_loss`, the compiled loss plus OWN_STEP_EXTRA_LOSS, and counts the steps it
    ran (`own_steps`, a metric, so reset each epoch and before each validation): a test sees which step ran.
    (`own_loss` is a key of its own: a returned dict whose keys are exactly the model's metrics is replaced by
    their results, in model.fit as in tfhydra's custom loop.)"""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps_seen = keras.metrics.Sum(name="own_steps")

    def _report(self):
        logs = {m.name: m.result() for m in self.metrics}
        logs["own_loss"] = logs["loss"] + OWN_STEP_EXTRA_LOSS
        return logs

    def train_step(self, data):
        import tensorflow as tf

        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)
        self.optimizer.minimize(loss, self.trainable_variables, tape=tape)
        self.compiled_metrics.update_state(y, y_pred)
        self.steps_seen.update_state(1.0)
        return self._report()

    def test_step(self, data):
        x, y = data
        y_pred = self(x, training=False)
        self.compiled_loss(y, y_pred, regularization_losses=self.losses)
        self.compiled_metrics.update_state(y, y_pred)
        self.steps_seen.update_state(1.0)
        return self._report()


def build_own_step_model(spec, units: int = 8):
    inputs = keras.Input(spec.input_shape)
    x = keras.layers.Dense(units, activation="relu")(keras.layers.Flatten()(inputs))
    outputs = keras.layers.Dense(spec.num_classes, activation="softmax")(x)
    return OwnStepModel(inputs, outputs, name="own_step")


class WaitForFile(keras.callbacks.Callback):
    """At the start of training, writes the file `started` and waits until the file `go` exists (at most an hour):
    a test does something while this run is certainly training, then lets it finish."""

    def __init__(self, started: str, go: str):
        super().__init__()
        self.started, self.go = started, go

    def on_train_begin(self, logs=None):
        import os
        import time

        with open(self.started, "w") as file:
            file.write(str(os.getpid()))
        deadline = time.monotonic() + 3600
        while not os.path.exists(self.go) and time.monotonic() < deadline:
            time.sleep(0.05)


class PauseWhileMarker(keras.callbacks.Callback):
    """Holds training at its first batches while `marker` exists (at most 120 s): a run alive in its first pass."""

    def __init__(self, marker: str):
        super().__init__()
        self.marker = Path(marker)

    def on_train_batch_end(self, batch, logs=None):
        deadline = time.monotonic() + 120
        while self.marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)


def build_count_task(**keys):
    """A user's own task (`task._target_`): non-negative counts through an exponential head, a Poisson
    regression; it takes the task node's keys (loss, metrics, monitor, monitor_mode) as the built-in tasks do."""
    from tfhydra.config.contracts import Head
    from tfhydra.task.base import Task

    class CountTask(Task):
        name = "counts"
        label_kind = "numbers"  # tfhydra/config/contracts.py: a synthetic source generates numbers for it

        def head(self, spec, train_labels):
            return Head(spec.num_classes, "exponential", "rates", pictures="none")

    return CountTask(**keys)


def declared_source(seed: int, label_kind: str = "multi_hot", declare=None, rows: int = 240, **pipeline_options):
    """A user data source that declares its labels' kind (`Source.label_kind`) instead of reading them through the
    task: 6 features; multi_hot: 3 labels, each the sign of one feature; numbers: one target, 2a - b. `declare`:
    the kind declared (default `label_kind`), so a test can declare the wrong one."""
    import numpy as np

    from tfhydra.data.source import source_from_arrays

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 6)).astype(np.float32)
    y = (x[:, :3] > 0).astype(np.int64) if label_kind == "multi_hot" else (2 * x[:, :1] - x[:, 1:2])
    names = ["a", "b", "c"] if label_kind == "multi_hot" else ["target"]
    cut = rows * 3 // 4
    return source_from_arrays(x[:cut], y[:cut], x[cut:], y[cut:], names, label_kind=declare or label_kind)


def build_keras3_model(spec, units: int = 8):
    """A keras.io-style builder (`import keras`): a Keras 3 model, which only a keras=3 run takes."""
    import keras

    return keras.Sequential([keras.Input(spec.input_shape), keras.layers.Flatten(), keras.layers.Dense(units)])


def build_keras3_nan_once_model(spec, at: int = 85):
    """build_nan_once_model's Keras 3 twin (`import keras`, keras=3 runs): a NaN at training step `at`, once."""
    import types

    import keras
    import tensorflow as tf

    counter = types.SimpleNamespace(calls=tf.Variable(0, dtype=tf.int64, trainable=False, name="nan_once_calls"))

    class NanOnce3(keras.layers.Layer):
        def call(self, x, training=None):
            if not training:
                return x
            counter.calls.assign_add(1)
            return x + tf.math.log(tf.where(tf.equal(counter.calls, at), -1.0, 1.0))

    inputs = keras.Input(spec.input_shape)
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(16, activation="relu")(x)
    x = NanOnce3(name="nan_once")(x)
    outputs = keras.layers.Dense(spec.num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="nan_once_model")


def scaled_feature_source(seed: int, rows: int = 120, **pipeline_options):
    """A user data source of feature vectors far from unit scale (columns of mean 1000, 0 and -5, deviations 300,
    0.01 and 2) and class labels: tfhydra standardises them on the training split (tfhydra/data/features.py)."""
    import numpy as np

    from tfhydra.data.source import source_from_arrays

    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(rows, 3)) * [300.0, 0.01, 2.0] + [1000.0, 0.0, -5.0]).astype(np.float32)
    y = (x[:, 0] > 1000.0).astype(np.int64)
    cut = rows * 3 // 4
    return source_from_arrays(x[:cut], y[:cut], x[cut:], y[cut:], ["low", "high"])
