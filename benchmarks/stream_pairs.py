"""Streaming against a hand-written tf.data script, alternated pairs in one invocation.

    python benchmarks/stream_pairs.py [--examples 40000] [--factors 1,8] [--pairs 5]

Writes sharded TFRecords of raw 32x32x3 uint8 images (8 training shards and a validation shard of an eighth;
`data_scale.write_shards`) at each factor times `--examples`, into a temporary directory (removed at the end), and
alternates (A then B, then B then A):
  A  the script a user writes once data outgrow memory: every shard interleaved, a parallel parse, shuffle 10,000,
     batch 128, prefetch; the seed MLP, one epoch, Keras' defaults (steps_per_execution 1), no cache; a callback
     reads its training phase (from the epoch's start to its validation);
  B  `python train.py model=mlp data=tfrecord data.encoding=raw data.raw_shape=[32,32,3] trainer.epochs=1
     data.test_fraction=0 data.batch_size=128 export.formats=[]` (tfhydra's defaults otherwise), its training
     phase from metrics.json (`train_seconds_per_epoch`).
It prints, per factor, the medians over the pairs of B/A: training-phase examples/s (goal >= 1.0), whole-process
wall and time to the first step, with each pair's ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HAND_WRITTEN = r"""
import glob, json, os, sys, time
started = time.time()
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
folder = sys.argv[1]
features = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}
def parse(record):
    example = tf.io.parse_single_example(record, features)
    image = tf.reshape(tf.io.decode_raw(example["image"], tf.uint8), (32, 32, 3))
    return tf.cast(image, tf.float32) / 255.0, example["label"]
def pipeline(pattern, training):
    files = sorted(glob.glob(pattern))
    ds = tf.data.Dataset.from_tensor_slices(files).interleave(
        tf.data.TFRecordDataset, cycle_length=len(files), num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.shuffle(10000) if training else ds
    return ds.batch(128).prefetch(tf.data.AUTOTUNE)
inputs = tf.keras.Input((32, 32, 3))
x = tf.keras.layers.Flatten()(inputs)
x = tf.keras.layers.Dropout(0.5)(tf.keras.layers.Dense(64, activation="relu")(x))
x = tf.keras.layers.Dense(32, activation="relu")(x)
model = tf.keras.Model(inputs, tf.keras.layers.Dense(10, activation="softmax")(x))
model.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
times = {}
class Phase(tf.keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None): times["begin"] = time.time()
    def on_train_batch_end(self, batch, logs=None): times.setdefault("first", time.time())
    def on_test_begin(self, logs=None): times.setdefault("end", time.time())
train, val = pipeline(os.path.join(folder, "train-*"), True), pipeline(os.path.join(folder, "val-*"), False)
model.fit(train, validation_data=val, epochs=1, verbose=0, callbacks=[Phase()])
print(json.dumps({"train_phase_s": times["end"] - times["begin"], "first_step_s": times["first"] - started}))
"""


def hand_written(folder: Path, script: Path) -> tuple[float, float, float]:
    """(whole-process seconds, training-phase seconds, seconds to the first step) of A."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True, check=True)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return time.perf_counter() - started, figures["train_phase_s"], figures["first_step_s"]


def tfhydra(folder: Path, run_dir: Path) -> tuple[float, float, float]:
    """(whole-process seconds, training-phase seconds, seconds to the first step) of B."""
    command = [
        sys.executable,
        "train.py",
        "model=mlp",
        "data=tfrecord",
        f"data.train={folder}/train-*.tfrecord",
        f"data.validation={folder}/val-*.tfrecord",
        "data.encoding=raw",
        "data.raw_shape=[32,32,3]",
        "trainer.epochs=1",
        "data.test_fraction=0",
        "data.batch_size=128",
        "export.formats=[]",
        f"hydra.run.dir={run_dir}",
    ]
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, capture_output=True, check=True)
    wall = time.perf_counter() - started
    record = json.loads((run_dir / "metrics.json").read_text())
    return wall, record["train_seconds_per_epoch"][0], record["time_to_first_step_seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=40000, help="training records at factor 1")
    parser.add_argument("--factors", default="1,8")
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from data_scale import write_shards

    with tempfile.TemporaryDirectory(prefix="stream-pairs-") as temp:
        base = Path(temp)
        script = base / "hand_written.py"
        script.write_text(HAND_WRITTEN)
        for factor in (int(f) for f in args.factors.split(",")):
            folder = base / f"x{factor}"
            write_shards(folder, args.examples * factor)
            ratios: dict[str, list[float]] = {"examples/s": [], "wall": [], "first step": []}
            for pair in range(args.pairs):
                run_dir = base / f"run{factor}_{pair}"
                if pair % 2 == 0:
                    a, b = hand_written(folder, script), tfhydra(folder, run_dir)
                else:
                    b, a = tfhydra(folder, run_dir), hand_written(folder, script)
                ratios["examples/s"].append(a[1] / b[1])  # the same examples: the inverse ratio of the times
                ratios["wall"].append(b[0] / a[0])
                ratios["first step"].append(b[2] / a[2])
            cells = "; ".join(
                f"{name} B/A {statistics.median(values):.3f} ({' '.join(f'{v:.3f}' for v in values)})"
                for name, values in ratios.items()
            )
            print(f"{args.examples * factor} records: {cells}", flush=True)


if __name__ == "__main__":
    main()
