"""Reference A: the seed article's hand-written tf_keras script, for benchmarks/framework_tax.py.

A plain Sequential CNN, `compile(optimizer=Adam, loss=sparse_categorical_crossentropy,
metrics=[accuracy])`, a tf.data pipeline with cache/shuffle/batch/prefetch and
`model.fit` — no tfhydra. It prepares the same data as tfhydra's `digits` and
`synthetic` sources (same resize, split and seed) so the two are compared on equal
terms, and prints one JSON line with the figures the benchmark compares.

`--equal-work RUN_DIR` adds what `python train.py` does by default besides training
(TensorBoard with graph and histograms every epoch, the best epoch's weights by
val_accuracy, a SavedModel of them, a JSON record), so `framework_tax.py --startup` can
compare whole-process times of equal work: without it the script only trains.
"""

import os

os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402


def load(name, seed, train_size, val_size, path=None):
    if name == "npz":  # the Keras mnist.npz layout, scaled to [0, 1] with a channel axis, as tfhydra's npz source
        arrays = np.load(path)
        x_train, x_val = ((arrays[k].astype(np.float32) / 255.0)[..., np.newaxis] for k in ("x_train", "x_test"))
        return (x_train, arrays["y_train"]), (x_val, arrays["y_test"]), None
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


def equal_work_callbacks(run_dir: Path) -> list:
    """tfhydra's default logging and best checkpoint, as a hand-written script would add them."""
    return [
        keras.callbacks.TensorBoard(log_dir=str(run_dir / "tensorboard"), histogram_freq=1, write_graph=True),
        keras.callbacks.ModelCheckpoint(
            str(run_dir / "checkpoints" / "best.weights.h5"),
            monitor="val_accuracy",
            mode="max",
            save_best_only=True,
            save_weights_only=True,
        ),
    ]


def finish_equal_work(model, history, run_dir: Path) -> None:
    """Export the best epoch, not the last one, as tfhydra does, and keep the run's record beside it."""
    model.load_weights(str(run_dir / "checkpoints" / "best.weights.h5"))
    model.export(str(run_dir / "export" / "saved_model"))
    epochs = [{k: float(v[i]) for k, v in history.history.items()} for i in range(len(history.epoch))]
    best = max(range(len(epochs)), key=lambda i: epochs[i]["val_accuracy"])
    (run_dir / "metrics.json").write_text(
        json.dumps(
            {"epochs": epochs, "best": {"epoch": best + 1, "val_accuracy": epochs[best]["val_accuracy"]}}, indent=2
        )
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="digits", help="digits, synthetic, or npz (with --path)")
    parser.add_argument("--path", help="--data npz: a file in the Keras mnist.npz layout")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--train-size", type=int, default=2048)
    parser.add_argument("--val-size", type=int, default=512)
    parser.add_argument(
        "--equal-work",
        type=Path,
        metavar="RUN_DIR",
        help="also write TensorBoard logs, the best checkpoint, a SavedModel and metrics.json here",
    )
    args = parser.parse_args()

    keras.utils.set_random_seed(args.seed)
    (x_train, y_train), (x_val, y_val), resize = load(args.data, args.seed, args.train_size, args.val_size, args.path)
    train = tf.data.Dataset.from_tensor_slices((x_train, y_train))
    val = tf.data.Dataset.from_tensor_slices((x_val, y_val))
    if resize:
        train = train.map(resize, num_parallel_calls=tf.data.AUTOTUNE)
        val = val.map(resize, num_parallel_calls=tf.data.AUTOTUNE)
    train = train.cache().shuffle(2048, seed=args.seed).batch(args.batch_size).prefetch(tf.data.AUTOTUNE)
    val = val.cache().batch(args.batch_size).prefetch(tf.data.AUTOTUNE)

    model = keras.Sequential(
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
    model.compile(
        optimizer=keras.optimizers.Adam(args.lr), loss="sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    timer = Timer()
    extra = equal_work_callbacks(args.equal_work) if args.equal_work else []
    history = model.fit(train, validation_data=val, epochs=args.epochs, verbose=0, callbacks=[timer, *extra])
    if args.equal_work:
        finish_equal_work(model, history, args.equal_work)
    timed = timer.seconds[1:] or timer.seconds
    print(
        json.dumps(
            {
                "examples_per_second": len(x_train) * len(timed) / sum(timed),
                "best_val_accuracy": max(history.history["val_accuracy"]),
                "final_val_accuracy": history.history["val_accuracy"][-1],
                "first_step_unix_time": timer.first_step,
            }
        )
    )


if __name__ == "__main__":
    main()
