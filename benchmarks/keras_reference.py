"""Reference A: the seed article's hand-written tf_keras script, for benchmarks/framework_tax.py.

A plain Sequential CNN, `compile(optimizer=Adam, loss=sparse_categorical_crossentropy,
metrics=[accuracy])`, a tf.data pipeline with cache/shuffle/batch/prefetch and
`model.fit` — no tfhydra. It prepares the same data as tfhydra's `digits` and
`synthetic` sources (same resize, split and seed) so the two are compared on equal
terms, and prints one JSON line with the figures the benchmark compares.

`--equal-work RUN_DIR` adds what `python train.py` does by default besides training
(TensorBoard with graph and histograms every epoch, the best epoch's weights by the
task's monitor, a SavedModel of them, a JSON record; on an npz, the test split measured once
on the best weights and a SavedModel that also takes the stored uint8 images), so
`framework_tax.py --startup` can compare whole-process times of equal work: without it the
script only trains. On an npz both sides validate on 20 % of x_train held out and test on
x_test, as tfhydra's npz source does (docs/performance.md, "Two references reconciled").

`--task regression|multilabel --data npz --path FILE` is the hand-written version of
`python train.py task=... model=mlp data=npz` for `benchmarks/task_tax.py`: float features
and targets (or multi-hot labels) read from the arrays x_/y_ train, val and test, the seed
MLP with the task's head, loss, metrics and monitor written out by hand (TASKS), and with
`--equal-work` the test split measured once on the restored best weights, as tfhydra does.
"""

import os

# Run as a script: tf_keras. Imported for its helpers: the importer's Keras (benchmarks/keras3_reference.py chose
# Keras 3 before importing this), else tf_keras.
if __name__ == "__main__":
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

if os.environ["TF_USE_LEGACY_KERAS"] == "1":
    import tf_keras as keras
else:
    import keras

# What `conf/task/<name>.yaml` gives tfhydra, written as a Keras user would: the head's activation, the loss, the
# metrics (the same classes, names and thresholds) and the monitor that picks the best epoch.
TASKS = {
    "classification": ("softmax", "sparse_categorical_crossentropy", lambda: ["accuracy"], "val_accuracy", "max"),
    "regression": (
        "linear",
        "mse",
        lambda: [
            keras.metrics.RootMeanSquaredError(name="rmse"),
            keras.metrics.MeanAbsoluteError(name="mae"),
            keras.metrics.R2Score(name="r2"),
        ],
        "val_loss",
        "min",
    ),
    "multilabel": (
        "sigmoid",
        "binary_crossentropy",
        lambda: [
            keras.metrics.AUC(multi_label=True, name="auc"),
            keras.metrics.F1Score(average="macro", threshold=0.5, name="f1"),
            keras.metrics.BinaryAccuracy(threshold=0.5, name="binary_accuracy"),
        ],
        "val_auc",
        "max",
    ),
}


def load_task_arrays(path):
    """The three splits of a task benchmark's npz, the features standardised with the training split's mean and
    deviation as tfhydra's npz source does with a table (tfhydra/data/features.py); nothing to hold out."""
    arrays = np.load(path)
    train = arrays["x_train"].astype(np.float64)
    mean, std = train.mean(axis=0), train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    return [
        (((arrays[f"x_{split}"] - mean) / std).astype(np.float32), arrays[f"y_{split}"].astype(np.float32))
        for split in ("train", "val", "test")
    ]


def build_mlp(input_shape, outputs: int, activation: str, units: list[int], dropout: float):
    """tfhydra's `model=mlp` (Flatten, Dense per entry with Dropout after all but the last) with a task's head:
    Dense(outputs) and a float32 activation."""
    inputs = keras.Input(input_shape)
    x = keras.layers.Flatten()(inputs)
    for i, width in enumerate(units):
        x = keras.layers.Dense(width, activation="relu")(x)
        if i < len(units) - 1 and dropout > 0:
            x = keras.layers.Dropout(dropout)(x)
    x = keras.layers.Dense(outputs)(x)
    return keras.Model(inputs, keras.layers.Activation(activation, dtype="float32")(x))


def build_cnn():
    """The seed article's CNN, of the classification benchmarks."""
    return keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(64, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )


NPZ_TEST: dict = {}  # the npz's test split and its stored image shape, kept by `load` for --equal-work


def load(name, seed, train_size, val_size, path=None):
    if name == "npz":  # the Keras mnist.npz layout, scaled to [0, 1] with a channel axis, as tfhydra's npz source:
        # validation is 20 % of x_train held out (data.val_fraction), x_test the test split measured once
        arrays = np.load(path)
        x_train, x_test = ((arrays[k].astype(np.float32) / 255.0)[..., np.newaxis] for k in ("x_train", "x_test"))
        order = np.random.default_rng(seed).permutation(len(x_train))
        held, kept = order[: len(order) // 5], order[len(order) // 5 :]
        y_train = arrays["y_train"]
        NPZ_TEST.update(x=x_test, y=arrays["y_test"], raw_shape=arrays["x_train"].shape[1:])
        return (x_train[kept], y_train[kept]), (x_train[held], y_train[held]), None
    if name == "digits":
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        digits = load_digits()
        x = (digits.images / 16.0).astype(np.float32)[..., np.newaxis]
        y = digits.target
        train, val = train_test_split(np.arange(len(y)), test_size=0.2, random_state=seed, stratify=y)
        return (x[train], y[train]), (x[val], y[val]), lambda image, label: (tf.image.resize(image, (28, 28)), label)
    rng = np.random.default_rng(seed)
    patterns = rng.uniform(0.0, 1.0, size=(10, 28, 28, 1)).astype(np.float32)

    def sample(n):
        labels = rng.integers(0, 10, size=n)
        return (0.5 * rng.uniform(0.0, 1.0, size=(n, 28, 28, 1)).astype(np.float32) + 0.5 * patterns[labels], labels)

    return sample(train_size), sample(val_size), None


class Timer(keras.callbacks.Callback):
    """Training-phase seconds per epoch (validation excluded) and the first step's wall-clock time.

    `_supports_tf_logs` keeps Keras from copying the logs to numpy after every batch, which
    would make the script wait for each step: the timer must not slow what it times.
    """

    _supports_tf_logs = True

    def on_train_begin(self, logs=None):
        self.seconds, self.first_step = [], None

    def on_epoch_begin(self, epoch, logs=None):
        self.start, self.end = time.perf_counter(), None

    def on_train_batch_end(self, batch, logs=None):
        self.first_step = self.first_step or time.time()

    def on_test_begin(self, logs=None):
        self.end = self.end or time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append((self.end or time.perf_counter()) - self.start)


def equal_work_callbacks(run_dir: Path, monitor: str, mode: str) -> list:
    """tfhydra's default logging and best checkpoint, as a hand-written script would add them."""
    return [
        keras.callbacks.TensorBoard(log_dir=str(run_dir / "tensorboard"), histogram_freq=1, write_graph=True),
        keras.callbacks.ModelCheckpoint(
            str(run_dir / "checkpoints" / "best.weights.h5"),
            monitor=monitor,
            mode=mode,
            save_best_only=True,
            save_weights_only=True,
        ),
    ]


def best_epoch(history, monitor: str, mode: str) -> tuple[int, dict]:
    """(0-based index, logs) of the epoch the checkpoint kept: the first best, as ModelCheckpoint keeps it."""
    epochs = [{k: float(v[i]) for k, v in history.history.items()} for i in range(len(history.epoch))]
    pick = min if mode == "min" else max
    best = pick(range(len(epochs)), key=lambda i: epochs[i][monitor])
    return best, epochs[best]


def finish_equal_work(model, history, run_dir: Path, monitor: str, mode: str, test=None) -> dict | None:
    """Export the best epoch, not the last one, as tfhydra does, measure the test split once on it (when there is
    one) and keep the run's record beside it. Returns the test figures."""
    model.load_weights(str(run_dir / "checkpoints" / "best.weights.h5"))
    if NPZ_TEST:  # tfhydra's export takes the stored uint8 images too: one SavedModel with both signatures
        raw = tf.function(
            lambda x: model(tf.cast(x, tf.float32)[..., None] / 255.0),
            input_signature=[tf.TensorSpec([None, *NPZ_TEST["raw_shape"]], tf.uint8)],
        )
        serve = tf.function(lambda x: model(x), input_signature=[tf.TensorSpec([None, *model.input_shape[1:]])])
        signatures = {"serving_default": serve, "serve_raw": raw}
        tf.saved_model.save(model, str(run_dir / "export" / "saved_model"), signatures=signatures)
    else:
        model.export(str(run_dir / "export" / "saved_model"))
    figures = model.evaluate(test, verbose=0, return_dict=True) if test is not None else None
    index, logs = best_epoch(history, monitor, mode)
    epochs = [{k: float(v[i]) for k, v in history.history.items()} for i in range(len(history.epoch))]
    record = {"epochs": epochs, "best": {"epoch": index + 1, **logs}, "test": figures}
    (run_dir / "metrics.json").write_text(json.dumps(record, indent=2, default=float))
    return figures


def pipelines(args):
    """(train, validation, test or None, training examples, model) for --task and --data."""
    if args.task != "classification":
        (x_train, y_train), (x_val, y_val), (x_test, y_test) = load_task_arrays(args.path)
        model = build_mlp(x_train.shape[1:], y_train.shape[1], TASKS[args.task][0], args.units, args.dropout)
        splits = [tf.data.Dataset.from_tensor_slices(s) for s in ((x_train, y_train), (x_val, y_val), (x_test, y_test))]
        train, val, test = splits
        train = train.shuffle(2048, seed=args.seed).batch(args.batch_size).prefetch(tf.data.AUTOTUNE)
        val, test = (split.batch(args.batch_size).prefetch(tf.data.AUTOTUNE) for split in (val, test))
        return train, val, test, len(x_train), model
    (x_train, y_train), (x_val, y_val), resize = load(args.data, args.seed, args.train_size, args.val_size, args.path)
    train = tf.data.Dataset.from_tensor_slices((x_train, y_train))
    val = tf.data.Dataset.from_tensor_slices((x_val, y_val))
    if resize:
        train = train.map(resize, num_parallel_calls=tf.data.AUTOTUNE)
        val = val.map(resize, num_parallel_calls=tf.data.AUTOTUNE)
    train = train.cache().shuffle(2048, seed=args.seed).batch(args.batch_size).prefetch(tf.data.AUTOTUNE)
    val = val.cache().batch(args.batch_size).prefetch(tf.data.AUTOTUNE)
    test = None
    if NPZ_TEST and args.equal_work:  # measured once on the best weights, as tfhydra does
        test = tf.data.Dataset.from_tensor_slices((NPZ_TEST["x"], NPZ_TEST["y"])).batch(args.batch_size)
    return train, val, test, len(x_train), build_cnn()


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="classification", choices=sorted(TASKS))
    parser.add_argument("--data", default="digits", help="digits, synthetic, or npz (with --path)")
    parser.add_argument(
        "--path", help="--data npz: a file in the Keras mnist.npz layout; with --task: x_/y_ train, val, test"
    )
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--train-size", type=int, default=2048)
    parser.add_argument("--val-size", type=int, default=512)
    parser.add_argument("--units", type=int, nargs="+", default=[64, 32], help="--task: the MLP's hidden layers")
    parser.add_argument("--dropout", type=float, default=0.5, help="--task: after each hidden layer but the last")
    parser.add_argument(
        "--equal-work",
        type=Path,
        metavar="RUN_DIR",
        help="also write TensorBoard logs, the best checkpoint, a SavedModel and metrics.json here",
    )
    return parser.parse_args()


def main():
    args = parse_args()
    keras.utils.set_random_seed(args.seed)
    train, val, test, examples, model = pipelines(args)
    _, loss, metrics, monitor, mode = TASKS[args.task]
    model.compile(optimizer=keras.optimizers.Adam(args.lr), loss=loss, metrics=metrics())
    timer = Timer()
    extra = equal_work_callbacks(args.equal_work, monitor, mode) if args.equal_work else []
    history = model.fit(train, validation_data=val, epochs=args.epochs, verbose=0, callbacks=[timer, *extra])
    test_figures = finish_equal_work(model, history, args.equal_work, monitor, mode, test) if args.equal_work else None
    timed = timer.seconds[1:] or timer.seconds
    _, best = best_epoch(history, monitor, mode)
    figures = {
        "examples_per_second": examples * len(timed) / sum(timed),
        "best": best,
        "test": test_figures,
        "first_step_unix_time": timer.first_step,
    }
    if args.task == "classification":
        figures["best_val_accuracy"] = max(history.history["val_accuracy"])
        figures["final_val_accuracy"] = history.history["val_accuracy"][-1]
    print(json.dumps(figures, default=float))


if __name__ == "__main__":
    main()
