"""Is tfhydra slower than a hand-written Keras script? One invocation, side by side, as ratios.

    python benchmarks/framework_tax.py [--rounds 3] [--epochs 20] [--write docs/performance.md]

For each dataset (digits, synthetic 28x28) it alternates, round after round:
  A   benchmarks/keras_reference.py (the seed article's script, no tfhydra)
  B1  python train.py with trainer.steps_per_execution=1 (A's execution settings: the framework tax)
  B   python train.py with tfhydra's defaults (logging, checkpoints, export on; tuned defaults)
  B0  as B with logging.histogram_freq=0 (what histograms cost)
and reports medians: training throughput (examples/s inside fit, training phase, first epoch
excluded), whole-process wall time, time from process start to the first training step,
and best validation accuracy; B's training FLOP/s as a share of this machine's fp32 matmul
peak measured in the same invocation; and how long `--help` and a config error take.
Ratios are what to read: the machines are shared and noisy.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATASETS = {"digits": (["data=digits"], ["--data", "digits"]),
            "synthetic": (["data=synthetic", "data.shape=[28,28,1]", "data.train_size=2048", "data.val_size=512"],
                          ["--data", "synthetic", "--train-size", "2048", "--val-size", "512"])}


def timed(command: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    start = time.time()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return start, time.time() - start, result


def run_reference(data_args: list[str], epochs: int) -> dict:
    start, wall, result = timed([sys.executable, str(ROOT / "benchmarks" / "keras_reference.py"), *data_args,
                                 "--epochs", str(epochs)])
    if result.returncode:
        raise SystemExit(f"reference failed:\n{result.stderr[-2000:]}")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    return {"throughput": figures["examples_per_second"], "wall": wall,
            "first_step": figures["first_step_unix_time"] - start, "accuracy": figures["best_val_accuracy"]}


def run_tfhydra(overrides: list[str], epochs: int) -> dict:
    with tempfile.TemporaryDirectory() as run_dir:
        start, wall, result = timed([sys.executable, str(ROOT / "train.py"), *overrides, f"trainer.epochs={epochs}",
                                     f"hydra.run.dir={run_dir}"])
        if result.returncode:
            raise SystemExit(f"tfhydra failed:\n{result.stderr[-2000:]}")
        metrics = json.loads((Path(run_dir) / "metrics.json").read_text())
    return {"throughput": metrics["examples_per_second"], "wall": wall,
            "first_step": metrics["first_step_unix_time"] - start, "accuracy": metrics["best"]["val_accuracy"],
            "params": metrics["params"]}


def matmul_peak_flops() -> float:
    """Best of several 2048x2048 float32 matmuls, FLOP/s (2 n^3 per product), in a fresh process."""
    code = ("import os; os.environ['TF_CPP_MIN_LOG_LEVEL']='2'\n"
            "import time, tensorflow as tf\n"
            "n = 2048; a = tf.random.normal((n, n)); b = tf.random.normal((n, n)); (a @ b).numpy()\n"
            "best = float('inf')\n"
            "for _ in range(10):\n"
            "    t = time.perf_counter(); (a @ b).numpy(); best = min(best, time.perf_counter() - t)\n"
            "print(2 * n ** 3 / best)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return float(result.stdout.strip().splitlines()[-1])


def training_flops_per_example() -> float:
    """3x the forward FLOPs of the seed CNN at 28x28x1 (forward + two backward matmul-likes), by TF's profiler."""
    code = ("import os; os.environ['TF_USE_LEGACY_KERAS']='1'; os.environ['TF_CPP_MIN_LOG_LEVEL']='2'\n"
            "import tensorflow as tf, tf_keras as keras\n"
            "from tensorflow.python.profiler.model_analyzer import profile\n"
            "from tensorflow.python.profiler.option_builder import ProfileOptionBuilder\n"
            "m = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(32, 3, activation='relu'),"
            " keras.layers.MaxPooling2D(), keras.layers.Conv2D(64, 3, activation='relu'), keras.layers.MaxPooling2D(),"
            " keras.layers.Flatten(), keras.layers.Dense(64, activation='relu'), keras.layers.Dense(10, activation='softmax')])\n"
            "f = tf.function(lambda x: m(x)).get_concrete_function(tf.TensorSpec((1, 28, 28, 1)))\n"
            "opts = ProfileOptionBuilder(ProfileOptionBuilder.float_operation()).with_empty_output().build()\n"
            "print(profile(f.graph, options=opts).total_float_ops)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return 3.0 * float(result.stdout.strip().splitlines()[-1])


def quick_command_seconds(args: list[str], repeats: int = 3) -> float:
    return statistics.median(timed([sys.executable, str(ROOT / "train.py"), *args])[1] for _ in range(repeats))


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    import importlib.metadata as md
    return (f"{os.cpu_count()} CPU cores ({cpu}), Python {platform.python_version()}, "
            f"tensorflow {md.version('tensorflow')}, tf-keras {md.version('tf-keras')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    # tfhydra's default trainer.epochs: the run a user gets from `python train.py`. Fixed costs (Hydra,
    # TensorBoard writers, the export) weigh more on shorter runs: --epochs 5 shows them (docs/performance.md).
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--write", type=Path, help="write the report (markdown) to this file")
    args = parser.parse_args()

    started = time.time()
    lines = [f"Machine: {machine()}; load average at start {os.getloadavg()[0]:.2f}.",
             f"Command: `python benchmarks/framework_tax.py --rounds {args.rounds} --epochs {args.epochs}`; "
             f"{args.epochs} epochs per run, batch 32, Adam 1e-3, seed 42, runs alternated A, B1, B, B0.", ""]
    peak, flops = matmul_peak_flops(), training_flops_per_example()
    for name, (overrides, reference_args) in DATASETS.items():
        samples = {k: [] for k in ("A", "B1", "B", "B0")}
        for _ in range(args.rounds):
            samples["A"].append(run_reference(reference_args, args.epochs))
            samples["B1"].append(run_tfhydra([*overrides, "trainer.steps_per_execution=1"], args.epochs))
            samples["B"].append(run_tfhydra(overrides, args.epochs))
            samples["B0"].append(run_tfhydra([*overrides, "logging.histogram_freq=0"], args.epochs))
        median = {k: {f: statistics.median(s[f] for s in v) for f in ("throughput", "wall", "first_step", "accuracy")}
                  for k, v in samples.items()}
        a = median["A"]
        lines += [f"## {name}", "",
                  "| figure (median) | A: Keras script | B1: tfhydra, steps_per_execution=1 | B: tfhydra defaults | B1/A | B/A |",
                  "|---|---|---|---|---|---|"]
        for figure, unit in (("throughput", "examples/s"), ("wall", "s"), ("first_step", "s")):
            lines.append(f"| {figure} ({unit}) | {a[figure]:,.2f} | {median['B1'][figure]:,.2f} | "
                         f"{median['B'][figure]:,.2f} | {median['B1'][figure] / a[figure]:.2f}x | "
                         f"{median['B'][figure] / a[figure]:.2f}x |")
        lines.append(f"| best val accuracy | {a['accuracy']:.4f} | {median['B1']['accuracy']:.4f} | "
                     f"{median['B']['accuracy']:.4f} | {100 * (median['B1']['accuracy'] - a['accuracy']):+.2f} pts | "
                     f"{100 * (median['B']['accuracy'] - a['accuracy']):+.2f} pts |")
        per_epoch_cost = (median["B"]["wall"] - median["B0"]["wall"]) / args.epochs
        epoch_seconds = median["B0"]["wall"] / args.epochs
        lines += ["", f"- Training FLOP/s of B: {flops * median['B']['throughput'] / 1e9:.2f} GFLOP/s "
                      f"({flops / 1e6:.2f} MFLOP per example, 3x the profiled forward pass) = "
                      f"{100 * flops * median['B']['throughput'] / peak:.1f}% of the measured fp32 matmul peak "
                      f"({peak / 1e9:.1f} GFLOP/s).",
                  f"- Histograms every epoch (B vs B0, whole-process wall): {per_epoch_cost:+.3f} s per epoch "
                  f"= {100 * per_epoch_cost / epoch_seconds:+.1f}% of an average epoch's share of the run "
                  f"({epoch_seconds:.2f} s).",
                  "- Samples (throughput): " + "; ".join(f"{k}: " + ", ".join(f"{s['throughput']:,.0f}" for s in v)
                                                         for k, v in samples.items()), ""]
    help_s, error_s = quick_command_seconds(["--help"]), quick_command_seconds(["optimizer.lr=-1"])
    lines += ["## Fast feedback", "", f"- `python train.py --help`: {help_s:.2f} s (median of 3)",
              f"- `python train.py optimizer.lr=-1` (config error): {error_s:.2f} s (median of 3)", "",
              f"Benchmark wall time: {time.time() - started:.0f} s."]
    report = "\n".join(lines)
    print(report)
    if args.write:
        template = args.write.read_text() if args.write.exists() else ""
        marker = "<!-- benchmark output -->"
        head = template.split(marker)[0] if marker in template else "# Performance\n\n"
        args.write.write_text(f"{head}{marker}\n{report}\n")


if __name__ == "__main__":
    main()
