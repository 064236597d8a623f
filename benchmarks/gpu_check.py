"""GPU check: ResNet-50 on synthetic 224x224 images, images/second for each precision x XLA.

    python benchmarks/gpu_check.py [--steps 60] [--batch 64]

Each setting is a separate `python train.py` process (a fresh TensorFlow per setting),
`model=keras_app model.arch=ResNet50 data=synthetic data.shape=[224,224,3]`, one epoch of
`--steps` steps after a warm-up epoch; images/second is tfhydra's own `examples_per_second`
(training phase, first epoch excluded). Sized to finish within 8 minutes on one modern GPU.
Prints a markdown table for docs/distribute.md. Refuses to run without a GPU.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import tfhydra, tensorflow as tf; "
            "gpus = tf.config.list_physical_devices('GPU'); "
            "print(tf.config.experimental.get_device_details(gpus[0]).get('device_name') if gpus else '')",
        ],
        capture_output=True,
        text=True,
    )
    gpu = probe.stdout.strip().splitlines()[-1] if probe.stdout.strip() else ""
    if not gpu:
        print("no GPU visible: this check needs one", file=sys.stderr)
        return 1
    rows = []
    for precision in ("fp32", "mixed", "bf16"):
        for jit in ("false", "true"):
            with tempfile.TemporaryDirectory() as run_dir:
                started = time.perf_counter()
                result = subprocess.run(
                    [
                        sys.executable,
                        str(ROOT / "train.py"),
                        "model=keras_app",
                        "model.arch=ResNet50",
                        "data=synthetic",
                        "data.shape=[224,224,3]",
                        "data.num_classes=1000",
                        f"data.train_size={args.steps * args.batch}",
                        f"data.val_size={args.batch}",
                        f"data.batch_size={args.batch}",
                        "data.shuffle_buffer=0",
                        "trainer.epochs=2",
                        f"precision={precision}",
                        f"trainer.jit_compile={jit}",
                        "logging.histogram_freq=0",
                        "logging.write_graph=false",
                        "export.formats=[]",
                        f"hydra.run.dir={run_dir}",
                    ],
                    capture_output=True,
                    text=True,
                )
                if result.returncode:
                    rows.append((precision, jit, "failed: " + result.stderr.strip().splitlines()[-1][:80], ""))
                    continue
                metrics = json.loads((Path(run_dir) / "metrics.json").read_text())
                rows.append(
                    (precision, jit, f"{metrics['examples_per_second']:,.0f}", f"{time.perf_counter() - started:.0f}")
                )
    print(f"\nGPU: {gpu}; ResNet-50, 224x224x3, batch {args.batch}, {args.steps} steps per epoch\n")
    print("| precision | jit_compile | images/s | process seconds |\n|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
