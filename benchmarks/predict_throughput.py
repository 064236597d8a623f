"""Predictions per second of tfhydra-predict on image files, next to the two ways one would do it by hand.

    python benchmarks/predict_throughput.py [--files 2000] [--batch-size 128] [--rounds 5] [--models digits,resnet]

Two runs are trained for one epoch just to have an export: the digits CNN (`model=cnn data=digits`, whose
`serving_default` takes scikit-learn's float32 8x8 images) and a ResNet-20 on 32x32x3 images (`model=resnet
data=synthetic data.shape=[32,32,3]`, whose `serving_default` takes the model's float32 inputs). Each gets a
folder of PNG files. Three ways to predict them, alternated in every round (medians are reported):
- predict: tfhydra-predict's own path (tfhydra/predict: inputs -> tf.data decode map, batch, prefetch ->
  `serving_default` -> CSV rows to a file), in this process, the run and the SavedModel already loaded;
- per file: a hand-written loop: read and decode each file with TensorFlow, call the SavedModel on it alone;
- stacked: the SavedModel called on the same examples decoded beforehand and stacked in one array, batch by
  batch (the model's cost alone: no reading, decoding or writing).
Goals (issue 29): predict >= 5x per file, and >= 0.8x stacked. Prints a Markdown table (docs/deploy.md).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import tfhydra  # noqa: E402  (TF_USE_LEGACY_KERAS before TensorFlow)

MODELS = {
    "digits": ("digits CNN (float32 8x8 in, 28x28 conv)", ["model=cnn", "data=digits"], (8, 8, 1)),
    "resnet": (
        "ResNet-20, 32x32x3",
        ["model=resnet", "data=synthetic", "data.shape=[32,32,3]", "data.train_size=256", "data.val_size=64"],
        (32, 32, 3),
    ),
}


def train(name: str, folder: Path) -> Path:
    run_dir = folder / f"run_{name}"
    cfg = tfhydra.compose(
        [*MODELS[name][1], "trainer.epochs=1", "logging.histogram_freq=0", "logging.tensorboard=false"]
    )
    tfhydra.run(cfg, run_dir=run_dir)
    return run_dir


def write_pngs(folder: Path, count: int, shape: tuple[int, int, int]) -> list[str]:
    import numpy as np
    import tensorflow as tf

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        path = folder / f"{i:05d}.png"
        path.write_bytes(tf.io.encode_png(rng.integers(0, 256, size=shape, dtype=np.uint8)).numpy())
        paths.append(str(path))
    return paths


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def ways(run_dir: Path, files: list[str], batch_size: int, out: Path) -> dict:
    """{way: a function predicting every file once}."""
    import numpy as np
    import tensorflow as tf

    from tfhydra.predict.inputs import read_inputs
    from tfhydra.predict.layout import read_run
    from tfhydra.predict.output import PredictionWriter, run_batches

    run = read_run(run_dir)
    layout = run.layout()
    signature, key = layout.signature, layout.input_key
    found = read_inputs([str(Path(files[0]).parent)], layout)

    def predict():
        with PredictionWriter(str(out), "csv", found.extra_columns, 1, run.class_names) as writer:
            run_batches(layout, found, batch_size, writer)

    def one(path):
        image = tf.image.convert_image_dtype(tf.io.decode_png(tf.io.read_file(path)), tf.float32)
        return image[..., 0] if len(layout.shape) == 2 else image

    def per_file():
        for path in files:
            signature(**{key: one(path)[tf.newaxis]})[layout.output_key].numpy().argmax()

    stacked_inputs = tf.constant(np.stack([one(path).numpy() for path in files]))

    def stacked():
        for start in range(0, len(files), batch_size):
            signature(**{key: stacked_inputs[start : start + batch_size]})[layout.output_key].numpy().argmax(-1)

    return {"predict": predict, "per file": per_file, "stacked": stacked}


def measure(name: str, folder: Path, count: int, batch_size: int, rounds: int) -> dict:
    run_dir = train(name, folder)
    files = write_pngs(folder / f"png_{name}", count, MODELS[name][2])
    functions = ways(run_dir, files, batch_size, folder / f"{name}.csv")
    for function in functions.values():
        function()  # warm-up: traces, thread pools, file cache
    seconds = {way: [] for way in functions}
    order = list(functions)
    for round_ in range(rounds):  # alternate, rotating which goes first
        for way in order[round_ % 3 :] + order[: round_ % 3]:
            seconds[way].append(timed(functions[way]))
    rate = {way: count / statistics.median(times) for way, times in seconds.items()}
    return {
        "model": MODELS[name][0],
        "files": count,
        **rate,
        "vs per file": rate["predict"] / rate["per file"],
        "vs stacked": rate["predict"] / rate["stacked"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models", default="digits,resnet")
    args = parser.parse_args()
    import tensorflow as tf

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            rows.append(measure(name, Path(tmp), args.files, args.batch_size, args.rounds))
    devices = ", ".join(d.device_type for d in tf.config.list_logical_devices()) or "CPU"
    print(
        f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, devices: {devices}, "
        f"TensorFlow {tf.__version__}; {args.files} PNG files, batch {args.batch_size}, median of {args.rounds} "
        "alternating rounds\n"
    )
    print(
        "| model | predict (files/s) | per-file loop (files/s) | stacked arrays (examples/s) | predict / per file "
        "(goal >= 5) | predict / stacked (goal >= 0.8) |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['model']} | {r['predict']:.0f} | {r['per file']:.0f} | {r['stacked']:.0f} | "
            f"{r['vs per file']:.1f}x | {r['vs stacked']:.2f}x |"
        )


if __name__ == "__main__":
    main()
