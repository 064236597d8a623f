"""Before/after figures of every compression scheme for one model, read from each run's metrics.json.

    python benchmarks/compression.py [--epochs 10] [overrides ...]     (e.g. model=mlp)

Each row is one in-process run with `export.formats=[tflite,onnx]`; the figures are the ones the run
measured on its written artefacts (docs/compression.md: the `compression` section), TFLite files by
LiteRT and the ONNX file by onnxruntime (the runtimes are printed above the table).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from hydra import compose, initialize_config_dir

import tfhydra

CONFIG_DIR = Path(__file__).resolve().parents[1] / "conf"
ROWS = {  # row label: overrides
    "float32 (compression=none)": ["compression=none"],
    "dynamic-range int8 weights": ["compression=none", "export.tflite.quantization=dynamic"],
    "float16 weights": ["compression=none", "export.tflite.quantization=float16"],
    "post-training int8": ["compression=none", "export.tflite.quantization=int8"],
    "prune 0.8": ["compression=prune", "compression.target_sparsity=0.8"],
    "quantize (QAT int8)": ["compression=quantize"],
    "cluster 16": ["compression=cluster", "compression.number_of_clusters=16"],
    "prune_quantize 0.8": ["compression=prune_quantize", "compression.target_sparsity=0.8"],
    "cluster_quantize 16": ["compression=cluster_quantize", "compression.number_of_clusters=16"],
}


def measure(overrides: list[str]) -> dict:
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["logging.histogram_freq=0", "export.formats=[tflite,onnx]", *overrides])
    with tempfile.TemporaryDirectory() as run_dir:
        tfhydra.run(cfg, run_dir=run_dir)
        return json.loads((Path(run_dir) / "metrics.json").read_text())["compression"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("overrides", nargs="*", help="extra overrides for every row, e.g. model=mlp")
    args = parser.parse_args()
    print(f"\n{args.epochs} epochs, {' '.join(args.overrides) or 'defaults'}")
    print(
        "| run | Keras val acc | TFLite val acc | TFLite bytes | gzipped | float32 / gzipped | sparsity "
        "| max distinct | ONNX val acc | ONNX bytes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    runtimes = set()
    for label, overrides in ROWS.items():
        figures = measure([f"trainer.epochs={args.epochs}", *overrides, *args.overrides])
        artefacts = figures["artefacts"]
        tflite, onnx = artefacts["export/tflite/model.tflite"], artefacts["export/onnx/model.onnx"]
        runtimes |= {tflite["runtime"], onnx["runtime"]}
        distinct = max(figures["distinct_values"].values()) if "distinct_values" in figures else "-"
        print(
            f"| {label} | {figures['keras_val_accuracy']:.3f} | {tflite['val_accuracy']:.3f} | {tflite['bytes']:,} "
            f"| {tflite['gzip_bytes']:,} | {tflite['gzip_ratio']:.1f}x | {figures['sparsity']['overall']:.2f} "
            f"| {distinct} | {onnx['val_accuracy']:.3f} | {onnx['bytes']:,} |",
            flush=True,
        )
    print(f"runtimes: {', '.join(sorted(runtimes))}")


if __name__ == "__main__":
    main()
