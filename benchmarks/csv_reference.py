"""A hand-written tf.data CSV pipeline doing the work of `python train.py data=csv model=mlp` (benchmarks/csv_stream.py
runs both): the rows split 60/20/20 (by row number here, stratified there), the features standardised with the
training rows' mean and variance (a Keras `Normalization` adapted on a pass over them), training streamed from the
file by `tf.data.experimental.CsvDataset` (shuffle 2048, batch, standardise, prefetch), the same MLP (64, 32,
dropout 0.5), optimizer and steps_per_execution, validation every epoch. Nothing is cached in memory.

    python benchmarks/csv_reference.py CSV ROWS FEATURES OUT.json [--batch-size 256] [--epochs 1]

CSV: a header row, ROWS rows of FEATURES float columns then an integer label column. OUT.json: examples/s
(training examples over the epochs' training seconds, the first epoch left out when there are more) and the first
step's time.
"""

from __future__ import annotations

import argparse
import json
import time

import tensorflow as tf
import tf_keras as keras


def rows(path: str, total: int, features: int, part: str) -> tf.data.Dataset:
    """(features, label) of the rows of `part`: validation row % 5 == 0, test == 1, training the rest."""
    table = tf.data.experimental.CsvDataset(path, [tf.float32] * features + [tf.int64], header=True)
    starts = (2, 3, 4) if part == "train" else (0,)

    def kept(i, row):
        return i % 5 >= 2 if part == "train" else i % 5 == 0

    def pair(i, row):
        return tf.stack(row[:-1]), row[-1]

    count = sum(len(range(start, total, 5)) for start in starts)
    selected = table.enumerate().filter(kept).map(pair, num_parallel_calls=tf.data.AUTOTUNE)
    return selected.apply(tf.data.experimental.assert_cardinality(count))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("csv")
    parser.add_argument("rows", type=int)
    parser.add_argument("features", type=int)
    parser.add_argument("out")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--classes", type=int, default=10)
    args = parser.parse_args()
    normalize = keras.layers.Normalization()
    normalize.adapt(rows(args.csv, args.rows, args.features, "train").map(lambda x, y: x).batch(4096))
    train = rows(args.csv, args.rows, args.features, "train").shuffle(2048).batch(args.batch_size)
    validation = rows(args.csv, args.rows, args.features, "validation").batch(args.batch_size)
    train, validation = (
        d.map(lambda x, y: (normalize(x), y), num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
        for d in (train, validation)
    )
    inputs = keras.Input((args.features,))
    x = keras.layers.Dropout(0.5)(keras.layers.Dense(64, activation="relu")(inputs))
    x = keras.layers.Dense(32, activation="relu")(x)
    model = keras.Model(inputs, keras.layers.Dense(args.classes, activation="softmax")(x))
    model.compile("adam", "sparse_categorical_crossentropy", ["accuracy"], steps_per_execution=16)
    times = Times()
    model.fit(train, validation_data=validation, epochs=args.epochs, verbose=0, callbacks=[times])
    timed = times.seconds[1:] or times.seconds
    examples = sum(len(range(start, args.rows, 5)) for start in (2, 3, 4))  # the training rows
    with open(args.out, "w") as out:
        json.dump({"first_step_unix_time": times.first, "examples_per_second": examples * len(timed) / sum(timed)}, out)


class Times(keras.callbacks.Callback):
    """Each epoch's training seconds (to the start of its validation) and the first step's time."""

    first = None

    def __init__(self) -> None:
        super().__init__()
        self.seconds: list[float] = []

    def on_epoch_begin(self, epoch, logs=None):
        self.begin = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.first = self.first or time.time()

    def on_test_begin(self, logs=None):
        self.seconds.append(time.perf_counter() - self.begin)


if __name__ == "__main__":
    main()
