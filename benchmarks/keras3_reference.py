"""Reference A of benchmarks/keras3_tax.py: `python train.py keras=3` (the seed CNN on the digits) written by hand.

What a Keras 3 user writes from the keras.io guides, `import keras` on the TensorFlow backend, no tfhydra: the
1,797 digits from scikit-learn split as tfhydra's `data=digits` splits them (test 20%, then validation 20% of all,
stratified, `random_state` 0, examples kept in their original order: 1077 / 360 / 360), scaled to [0, 1] and
resized to 28x28 in a tf.data map, cached, shuffled (seed 42), batched by 32; the seed CNN; Adam 1e-3; `fit` with
TensorBoard (graph, histograms every epoch) and the best epoch's weights by val_accuracy; then those weights
restored, a SavedModel exported (`model.export`), the test split measured once, a JSON record. It prints one JSON
line with the figures the benchmark compares, as benchmarks/keras_reference.py (whose timer and equal-work helpers it
borrows, under Keras 3) does for tf_keras.

    python benchmarks/keras3_reference.py --equal-work RUN_DIR [--epochs 20]
"""

import os

os.environ["TF_USE_LEGACY_KERAS"] = "0"  # Keras 3, whatever the shell says: this is the Keras 3 script
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras_reference import Timer, best_epoch, equal_work_callbacks, finish_equal_work  # noqa: E402

SPLIT_SEED = 0  # tfhydra's data.split_seed: the hold-outs do not move with the training seed


def digits_splits(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(x, y) of train, validation and test: pixel counts 0-16 scaled to [0, 1], a channel axis added."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x, y = (digits.images / 16.0).astype(np.float32)[..., np.newaxis], digits.target
    rest, test = train_test_split(np.arange(len(y)), test_size=0.2, random_state=seed, stratify=y)
    train, val = train_test_split(rest, test_size=0.25, random_state=seed, stratify=y[rest])
    return [(x[np.sort(split)], y[np.sort(split)]) for split in (train, val, test)]


def pipelines(batch_size: int, seed: int) -> tuple[tf.data.Dataset, tf.data.Dataset, tf.data.Dataset, int]:
    """(train, validation, test, training examples): 28x28 images, as the seed CNN was written for."""

    def resize(image, label):
        return tf.image.resize(image, (28, 28)), label

    splits = digits_splits(SPLIT_SEED)
    train, val, test = (
        tf.data.Dataset.from_tensor_slices(split).map(resize, num_parallel_calls=tf.data.AUTOTUNE).cache()
        for split in splits
    )
    train = train.shuffle(2048, seed=seed).batch(batch_size).prefetch(tf.data.AUTOTUNE)
    val, test = (split.batch(batch_size).prefetch(tf.data.AUTOTUNE) for split in (val, test))
    return train, val, test, len(splits[0][1])


def build_cnn() -> keras.Model:
    """The seed CNN, as conf/model/cnn.yaml describes it (its softmax in float32, as tfhydra's head has it)."""
    return keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Conv2D(64, 3, activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10),
            keras.layers.Activation("softmax", dtype="float32"),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--equal-work",
        type=Path,
        required=True,
        metavar="RUN_DIR",
        help="TensorBoard logs, the best checkpoint, the SavedModel and metrics.json (always: tfhydra does all that)",
    )
    parser.add_argument("--epochs", type=int, default=20, help="tfhydra's default trainer.epochs")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    keras.utils.set_random_seed(args.seed)
    train, val, test, examples = pipelines(args.batch_size, args.seed)
    model = build_cnn()
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    timer = Timer()
    callbacks = [timer, *equal_work_callbacks(args.equal_work, "val_accuracy", "max")]
    history = model.fit(train, validation_data=val, epochs=args.epochs, verbose=0, callbacks=callbacks)
    test_figures = finish_equal_work(model, history, args.equal_work, "val_accuracy", "max", test)
    timed = timer.seconds[1:] or timer.seconds  # the first epoch (tracing) left out, as tfhydra's record does
    figures = {
        "examples_per_second": examples * len(timed) / sum(timed),
        "best": best_epoch(history, "val_accuracy", "max")[1],
        "test": test_figures,
        "first_step_unix_time": timer.first_step,
    }
    print(json.dumps(figures, default=float))


if __name__ == "__main__":
    main()
