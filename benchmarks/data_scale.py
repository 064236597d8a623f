"""How tfhydra's cost grows with the data (issue 26): peak RSS, time to first step and examples/s.

Writes sharded TFRecords of 32x32x3 uint8 images (raw bytes; 8 training shards + 1 validation shard of an
eighth of the training size) at sizes `--factors` times `--examples` (default 1, 4 and 16 times), into a
temporary directory under /tmp (removed at the end), and runs, alternately, tfhydra with its defaults
    python train.py model=mlp data=tfrecord data.encoding=raw trainer.epochs=N data.batch_size=128
and a hand-written streaming tf.data script (interleave, parallel map, shuffle, batch, prefetch; the same
MLP, optimizer and steps_per_execution; it streams every epoch, it caches nothing). The label index is
built before the timed runs (the goal is "time to first step with the index already built"). Then one
tfhydra run on the largest size under a memory limit below the stored size (a cgroup v1/v2 made for it;
needs root) must complete, unless `--no-capped`.

    python benchmarks/data_scale.py [--examples 40000] [--factors 1,4,16] [--epochs 1] [--repeats 1]
                                    [--cap-mb 1500] [--no-capped]

`--epochs 1` measures a single pass (`data.cache=auto` streams it: docs/data.md); `--epochs 5` a run whose
later epochs read the memory cache when the split fits the budget.

Peak RSS: the child's ru_maxrss (os.wait4). First step: the record's first_step_unix_time (the script's own)
less the moment the process was started. examples/s: training examples over the epochs' training seconds,
the first epoch left out when there are more (it pays for tracing and, with a cache, for filling it), as the
record's examples_per_second does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPE = (32, 32, 3)

HAND_WRITTEN = r"""
import json, sys, time
import tensorflow as tf
import tf_keras as keras
train, val, n_train, n_val, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
epochs = int(sys.argv[6])
features = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}
def parse(record):
    example = tf.io.parse_single_example(record, features)
    image = tf.reshape(tf.io.decode_raw(example["image"], tf.uint8), (32, 32, 3))
    return tf.cast(image, tf.float32) / 255.0, example["label"]
def pipeline(pattern, n, training):
    files = tf.data.Dataset.list_files(pattern, shuffle=training)
    ds = files.interleave(tf.data.TFRecordDataset, cycle_length=8, num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=False).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.apply(tf.data.experimental.assert_cardinality(n))
    ds = ds.shuffle(2048) if training else ds
    return ds.batch(128).prefetch(tf.data.AUTOTUNE)
inputs = keras.Input((32, 32, 3))
x = keras.layers.Flatten()(inputs)
x = keras.layers.Dropout(0.5)(keras.layers.Dense(64, activation="relu")(x))
x = keras.layers.Dense(32, activation="relu")(x)
model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(x))
model.compile("adam", "sparse_categorical_crossentropy", ["accuracy"], steps_per_execution=16)
class Times(keras.callbacks.Callback):
    first = None
    seconds = []
    def on_epoch_begin(self, epoch, logs=None): self.begin = time.perf_counter()
    def on_train_batch_end(self, batch, logs=None):
        if self.first is None: self.first = time.time()
    def on_test_begin(self, logs=None): self.seconds.append(time.perf_counter() - self.begin)
times = Times()
model.fit(pipeline(train, n_train, True), validation_data=pipeline(val, n_val, False), epochs=epochs, verbose=0,
          callbacks=[times])
timed = times.seconds[1:] or times.seconds
json.dump({"first_step_unix_time": times.first, "examples_per_second": n_train * len(timed) / sum(timed)},
          open(out, "w"))
"""


def write_shards(folder: Path, examples: int) -> tuple[str, str, int]:
    """8 training shards of `examples` records and a validation shard of examples / 8; returns the patterns."""
    import numpy as np
    import tensorflow as tf

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    val = examples // 8

    def write(path: Path, count: int) -> None:
        with tf.io.TFRecordWriter(str(path)) as writer:
            for start in range(0, count, 4096):
                images = rng.integers(0, 256, size=(min(4096, count - start), *SHAPE), dtype=np.uint8)
                labels = rng.integers(0, 10, size=len(images))
                for image, label in zip(images, labels, strict=True):
                    feature = {
                        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.tobytes()])),
                        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
                    }
                    writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())

    for shard in range(8):
        write(folder / f"train-{shard:05d}-of-00008.tfrecord", examples // 8)
    write(folder / "val-00000-of-00001.tfrecord", val)
    return str(folder / "train-*.tfrecord"), str(folder / "val-*.tfrecord"), val


def measured(command: list[str], env: dict, wrapper: list[str] | None = None) -> tuple[int, float, int]:
    """(peak RSS in bytes, start time, exit status) of one child process."""
    started = time.time()
    process = subprocess.Popen(
        [*(wrapper or []), *command], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        print(process.stderr.read().decode()[-2000:], file=sys.stderr)
    return usage.ru_maxrss * 1024, started, process.returncode


def tfhydra_run(train: str, val: str, run_dir: Path, env: dict, epochs: int, wrapper=None) -> dict:
    command = [
        sys.executable,
        "train.py",
        "model=mlp",
        "data=tfrecord",
        f"data.train={train}",
        f"data.validation={val}",
        "data.encoding=raw",
        "data.raw_shape=[32,32,3]",
        f"trainer.epochs={epochs}",
        # equal work: the script trains on every training record; a test split held out of the training
        # shards (data.test_fraction) trains on 80 % of the records it reads and filters
        "data.test_fraction=0",
        "data.batch_size=128",
        "export.formats=[]",
        f"hydra.run.dir={run_dir}",
    ]
    rss, started, code = measured(command, env, wrapper)
    record = json.loads((run_dir / "metrics.json").read_text()) if (run_dir / "metrics.json").exists() else {}
    first = record.get("first_step_unix_time")
    return {
        "peak_rss_gb": rss / 1e9,
        "first_step_s": first - started if first else None,
        "examples_per_s": record.get("examples_per_second"),
        "status": record.get("status"),
        "exit": code,
        "cache": (record.get("data") or {}).get("pipeline", {}).get("train", {}).get("cache"),
        "cache_reason": (record.get("data") or {}).get("pipeline", {}).get("train", {}).get("reason"),
    }


def hand_written_run(train: str, val: str, n_train: int, n_val: int, folder: Path, env: dict, epochs: int) -> dict:
    script, out = folder / "hand_written.py", folder / "hand_written.json"
    script.write_text(HAND_WRITTEN)
    rss, started, code = measured(
        [sys.executable, str(script), train, val, str(n_train), str(n_val), str(out), str(epochs)], env
    )
    result = json.loads(out.read_text())
    return {
        "peak_rss_gb": rss / 1e9,
        "first_step_s": result["first_step_unix_time"] - started,
        "examples_per_s": result["examples_per_second"],
        "exit": code,
    }


def memory_cgroup(limit_bytes: int) -> tuple[list[str] | None, str]:
    """A command prefix that runs a process under a memory limit, and how: a cgroup (v2, else v1) we create."""
    name = f"tfhydra-bench-{os.getpid()}"
    for folder, limit_file in [
        (Path("/sys/fs/cgroup") / name, "memory.max"),
        (Path("/sys/fs/cgroup/memory") / name, "memory.limit_in_bytes"),
    ]:
        try:
            if not (
                folder.parent / ("cgroup.controllers" if limit_file == "memory.max" else "memory.limit_in_bytes")
            ).exists() or (
                limit_file == "memory.max" and "memory" not in (folder.parent / "cgroup.subtree_control").read_text()
            ):
                continue
            folder.mkdir(exist_ok=True)
            (folder / limit_file).write_text(str(limit_bytes))
            swap = folder / ("memory.swap.max" if limit_file == "memory.max" else "memory.memsw.limit_in_bytes")
            if swap.exists():
                swap.write_text("0" if limit_file == "memory.max" else str(limit_bytes))
        except OSError:
            continue
        return ["sh", "-c", f'echo $$ > {folder}/cgroup.procs && exec "$@"', "sh"], f"{folder} ({limit_file})"
    return None, "no writable cgroup (needs root); systemd-run --scope -p MemoryMax=... is the alternative"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=40000, help="training examples of the smallest size")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--cap-mb", type=int, default=1500, help="memory limit of the capped run (MB)")
    parser.add_argument("--only-largest", action="store_true", help="measure the largest size only (more pairs)")
    parser.add_argument("--factors", default="1,4,16", help="sizes, as multiples of --examples (comma-separated)")
    parser.add_argument("--epochs", type=int, default=1, help="trainer.epochs of both (1: a single pass)")
    parser.add_argument("--no-capped", action="store_true", help="skip the run under a memory limit")
    args = parser.parse_args()
    factors = [int(f) for f in args.factors.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="tfhydra-data-scale-", dir="/tmp"))
    env = {**os.environ, "TFHYDRA_CACHE_DIR": str(scratch / "cache"), "TF_CPP_MIN_LOG_LEVEL": "2"}
    os.environ["TFHYDRA_CACHE_DIR"] = env["TFHYDRA_CACHE_DIR"]
    rows = []
    try:
        for factor in factors[-1:] if args.only_largest else factors:
            n = args.examples * factor
            folder = scratch / f"data-{n}"
            train, val, n_val = write_shards(folder, n)
            stored = sum(p.stat().st_size for p in folder.iterdir())
            index_labels(train, val)
            for repeat in range(args.repeats):  # alternated: odd repeats run the script first (page cache, load)
                if repeat % 2:
                    hand = hand_written_run(train, val, n, n_val, scratch, env, args.epochs)
                ours = tfhydra_run(train, val, scratch / f"run-{n}-{repeat}", env, args.epochs)
                if not repeat % 2:
                    hand = hand_written_run(train, val, n, n_val, scratch, env, args.epochs)
                rows.append(
                    {
                        "examples": n,
                        "epochs": args.epochs,
                        "stored_gb": stored / 1e9,
                        "tfhydra": ours,
                        "hand_written": hand,
                        "load": os.getloadavg()[0],
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
            if factor != factors[-1]:
                shutil.rmtree(folder)
        wrapper, how = (None, "--no-capped") if args.no_capped else memory_cgroup(args.cap_mb * 10**6)
        capped = tfhydra_run(train, val, scratch / "run-capped", env, args.epochs, wrapper) if wrapper else None
        print(json.dumps({"capped": capped, "limit_mb": args.cap_mb, "how": how, "stored_gb": stored / 1e9}))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report(rows)


def index_labels(train: str, val: str) -> None:
    """Build the label index the timed runs read (the first run on a dataset builds it)."""
    sys.path.insert(0, str(ROOT))
    import tfhydra  # noqa: F401  (sets TF_USE_LEGACY_KERAS)
    from tfhydra.data.index import indexed_labels
    from tfhydra.data.tfrecord import matching_files, scan_file

    for pattern in (train, val):
        files = matching_files(pattern, "data.train")
        indexed_labels(files, "label", lambda f: scan_file(f, "label"))


def report(rows: list[dict]) -> None:
    print(
        "| stored | examples | epochs | tfhydra peak RSS | first step | examples/s | cache | script peak RSS "
        "| first step | examples/s | ratio ex/s | load |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for row in rows:
        ours, hand = row["tfhydra"], row["hand_written"]
        ratio = ours["examples_per_s"] / hand["examples_per_s"] if ours["examples_per_s"] else float("nan")
        print(
            f"| {row['stored_gb']:.2f} GB | {row['examples']} | {row['epochs']} | {ours['peak_rss_gb']:.2f} GB | "
            f"{ours['first_step_s']:.1f} s | {ours['examples_per_s']:,.0f} | {ours['cache']} | "
            f"{hand['peak_rss_gb']:.2f} GB | {hand['first_step_s']:.1f} s | {hand['examples_per_s']:,.0f} | "
            f"{ratio:.2f} | {row['load']:.2f} |"
        )
    smallest = None
    for examples in sorted({row["examples"] for row in rows}):
        rss = statistics.median(row["tfhydra"]["peak_rss_gb"] for row in rows if row["examples"] == examples)
        smallest = smallest or rss
        print(
            f"- {examples} examples: tfhydra's median peak RSS {rss:.2f} GB, {rss / smallest:.2f}x the smallest size's"
        )
        ratios = [
            row["tfhydra"]["examples_per_s"] / row["hand_written"]["examples_per_s"]
            for row in rows
            if row["examples"] == examples and row["tfhydra"]["examples_per_s"]
        ]
        print(
            f"- {examples} examples: median examples/s ratio {statistics.median(ratios):.2f} over {len(ratios)} "
            f"alternated pairs ({', '.join(f'{r:.2f}' for r in ratios)})"
        )


if __name__ == "__main__":
    main()
