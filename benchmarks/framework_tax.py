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

    python benchmarks/framework_tax.py --startup [--rounds 5] [--epochs 5] [--batch-size 64] [--npz PATH]
                                       [--write docs/performance.md]

measures start-up against equal work instead: on digits (and on outside data in the Keras mnist.npz
layout with --npz, e.g. 4,000 real digit images) it alternates A_eq (the reference with
`--equal-work`: TensorBoard with graph and histograms, best checkpoint, SavedModel export and a
JSON record, as `python train.py` does by default) and B (`python train.py`, defaults), both at
`--batch-size`, so the whole-process ratio B/A_eq is what tfhydra itself costs (goal: <= 1.05) and
the throughput ratio what its tuned defaults gain (goal: >= 1.5). With --write it replaces only its
own section of that file (STARTUP_HEADING), above the full benchmark's marker.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STARTUP_HEADING = "## Start-up: equal-work reference"
MARKER = "<!-- benchmark output -->"
DATASETS = {
    "digits": (["data=digits"], ["--data", "digits"]),
    "synthetic": (
        ["data=synthetic", "data.shape=[28,28,1]", "data.train_size=2048", "data.val_size=512"],
        ["--data", "synthetic", "--train-size", "2048", "--val-size", "512"],
    ),
}


def timed(command: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    start = time.time()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return start, time.time() - start, result


def children_cpu_seconds() -> float:
    """User + system CPU of the finished child processes so far: what a run cost, whatever else the machine ran."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_reference(data_args: list[str], epochs: int, equal_work: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as run_dir:
        start, wall, result = timed(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "keras_reference.py"),
                *data_args,
                "--epochs",
                str(epochs),
                *(["--equal-work", run_dir] if equal_work else []),
            ]
        )
    if result.returncode:
        raise SystemExit(f"reference failed:\n{result.stderr[-2000:]}")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    return {
        "throughput": figures["examples_per_second"],
        "wall": wall,
        "first_step": figures["first_step_unix_time"] - start,
        "accuracy": figures["best_val_accuracy"],
    }


def run_tfhydra(overrides: list[str], epochs: int) -> dict:
    cpu_before = children_cpu_seconds()
    with tempfile.TemporaryDirectory() as run_dir:
        start, wall, result = timed(
            [sys.executable, str(ROOT / "train.py"), *overrides, f"trainer.epochs={epochs}", f"hydra.run.dir={run_dir}"]
        )
        if result.returncode:
            raise SystemExit(f"tfhydra failed:\n{result.stderr[-2000:]}")
        metrics = json.loads((Path(run_dir) / "metrics.json").read_text())
    return {
        "throughput": metrics["examples_per_second"],
        "wall": wall,
        "first_step": metrics["first_step_unix_time"] - start,
        "accuracy": metrics["best"]["val_accuracy"],
        "params": metrics["params"],
        "cpu": children_cpu_seconds() - cpu_before,
    }


def matmul_peak_flops() -> float:
    """Best of several 2048x2048 float32 matmuls, FLOP/s (2 n^3 per product), in a fresh process."""
    code = (
        "import os; os.environ['TF_CPP_MIN_LOG_LEVEL']='2'\n"
        "import time, tensorflow as tf\n"
        "n = 2048; a = tf.random.normal((n, n)); b = tf.random.normal((n, n)); (a @ b).numpy()\n"
        "best = float('inf')\n"
        "for _ in range(10):\n"
        "    t = time.perf_counter(); (a @ b).numpy(); best = min(best, time.perf_counter() - t)\n"
        "print(2 * n ** 3 / best)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return float(result.stdout.strip().splitlines()[-1])


def training_flops_per_example() -> float:
    """3x the forward FLOPs of the seed CNN at 28x28x1 (forward + two backward matmul-likes), by TF's profiler."""
    code = (
        "import os; os.environ['TF_USE_LEGACY_KERAS']='1'; os.environ['TF_CPP_MIN_LOG_LEVEL']='2'\n"
        "import tensorflow as tf, tf_keras as keras\n"
        "from tensorflow.python.profiler.model_analyzer import profile\n"
        "from tensorflow.python.profiler.option_builder import ProfileOptionBuilder\n"
        "m = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(32, 3, activation='relu'),"
        " keras.layers.MaxPooling2D(), keras.layers.Conv2D(64, 3, activation='relu'), keras.layers.MaxPooling2D(),"
        " keras.layers.Flatten(), keras.layers.Dense(64, activation='relu'),"
        " keras.layers.Dense(10, activation='softmax')])\n"
        "f = tf.function(lambda x: m(x)).get_concrete_function(tf.TensorSpec((1, 28, 28, 1)))\n"
        "opts = ProfileOptionBuilder(ProfileOptionBuilder.float_operation()).with_empty_output().build()\n"
        "print(profile(f.graph, options=opts).total_float_ops)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return 3.0 * float(result.stdout.strip().splitlines()[-1])


def quick_command_seconds(args: list[str], repeats: int = 3) -> float:
    return statistics.median(timed([sys.executable, str(ROOT / "train.py"), *args])[1] for _ in range(repeats))


def machine() -> str:
    cpu = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else ""
    )
    import importlib.metadata as md

    return (
        f"{os.cpu_count()} CPU cores ({cpu}), Python {platform.python_version()}, "
        f"tensorflow {md.version('tensorflow')}, tf-keras {md.version('tf-keras')}"
    )


def startup_datasets(npz: Path | None) -> dict[str, tuple[list[str], list[str]]]:
    """digits, and outside data in the Keras mnist.npz layout when given (issue 28 measured 4,000 images)."""
    datasets = {"digits": ([], ["--data", "digits"])}
    if npz:
        datasets[npz.name] = (["data=npz", f"data.path={npz.resolve()}"], ["--data", "npz", "--path", str(npz)])
    return datasets


def startup_report(rounds: int, epochs: int, batch: int, npz: Path | None) -> str:
    """The `--startup` section: A_eq and B alternated A,B / B,A round by round, so drift on a shared
    machine (load, thermal, caches) falls on both equally."""
    started = time.time()
    load = os.getloadavg()[0]
    lines = [
        f"{STARTUP_HEADING} ({epochs} epochs)",
        "",
        f"{time.strftime('%Y-%m-%d')}. Command: `python benchmarks/framework_tax.py --startup --rounds {rounds} "
        f"--epochs {epochs} --batch-size {batch}{' --npz ' + npz.name if npz else ''}`. Machine: {machine()}; "
        f"load average at start {load:.2f}.",
        "",
        "A_eq: benchmarks/keras_reference.py --equal-work (TensorBoard with graph and histograms every epoch, "
        "best checkpoint by val_accuracy, SavedModel export of it, metrics.json), no tfhydra. "
        f"B: `python train.py data.batch_size={batch}`, tfhydra's defaults otherwise (seed CNN). "
        f"Runs alternated A_eq, B / B, A_eq; medians of {rounds} each. Throughput: training examples/s "
        "inside fit, the first epoch left out.",
        "",
    ]
    for name, (overrides, reference_args) in startup_datasets(npz).items():
        lines += startup_rows(name, rounds, epochs, batch, overrides, reference_args)
    lines.append(f"Benchmark wall time: {time.time() - started:.0f} s.")
    return "\n".join(lines)


def startup_rows(
    name: str, rounds: int, epochs: int, batch: int, overrides: list[str], reference_args: list[str]
) -> list[str]:
    samples = {"A_eq": [], "B": []}
    runs = {
        "A_eq": lambda: run_reference([*reference_args, "--batch-size", str(batch)], epochs, equal_work=True),
        "B": lambda: run_tfhydra([*overrides, f"data.batch_size={batch}"], epochs),
    }
    for round_ in range(rounds):
        for way in ("A_eq", "B") if round_ % 2 == 0 else ("B", "A_eq"):
            samples[way].append(runs[way]())
    for sample in (s for v in samples.values() for s in v):
        sample["after_first_step"] = sample["wall"] - sample["first_step"]
    figures = ("throughput", "wall", "first_step", "after_first_step", "accuracy")
    median = {k: {f: statistics.median(s[f] for s in v) for f in figures} for k, v in samples.items()}
    a, b = median["A_eq"], median["B"]
    wall, throughput = b["wall"] / a["wall"], b["throughput"] / a["throughput"]
    lines = [
        f"### {name}",
        "",
        "| figure (median) | A_eq: Keras script, equal work | B: tfhydra defaults | B/A_eq |",
        "|---|---|---|---|",
    ]
    for figure, label in (
        ("throughput", "training examples/s"),
        ("wall", "whole-process wall (s)"),
        ("first_step", "process start to first step (s)"),
        ("after_first_step", "first step to exit (s)"),
    ):
        lines.append(f"| {label} | {a[figure]:,.2f} | {b[figure]:,.2f} | {b[figure] / a[figure]:.2f}x |")
    return lines + [
        f"| best val accuracy | {a['accuracy']:.4f} | {b['accuracy']:.4f} | "
        f"{100 * (b['accuracy'] - a['accuracy']):+.2f} pts |",
        "",
        f"- Goal whole-process wall B/A_eq <= 1.05x: {wall:.2f}x, {'met' if wall <= 1.05 else 'not met'}.",
        f"- Goal training throughput B/A_eq >= 1.5x: {throughput:.2f}x, {'met' if throughput >= 1.5 else 'not met'}.",
        "- Samples (wall, s; throughput, examples/s): "
        + "; ".join(
            f"{k}: " + ", ".join(f"{s['wall']:.2f} / {s['throughput']:,.0f}" for s in v) for k, v in samples.items()
        ),
        "",
    ]


def write_section(path: Path, section: str, heading: str = STARTUP_HEADING) -> None:
    """Replace the section under `heading` in place, or add it above the full benchmark's marker (the full
    benchmark rewrites everything below it), so each mode (and benchmarks/task_tax.py) keeps the others' figures."""
    lines = path.read_text().splitlines() if path.exists() else ["# Performance", ""]
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is None:
        start = end = lines.index(MARKER) if MARKER in lines else len(lines)
    else:
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ") or lines[i] == MARKER), len(lines)
        )
    path.write_text("\n".join([*lines[:start], *section.splitlines(), "", *lines[end:]]).rstrip("\n") + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--startup", action="store_true", help="whole-process time and throughput against an equal-work reference"
    )
    parser.add_argument("--rounds", type=int, help="default: 3, or 5 with --startup")
    # tfhydra's default trainer.epochs: the run a user gets from `python train.py`. Fixed costs (Hydra,
    # TensorBoard writers, the export) weigh more on shorter runs: --epochs 5 shows them, and --startup
    # uses it by default because start-up is what it measures (docs/performance.md).
    parser.add_argument("--epochs", type=int, help="default: 20, or 5 with --startup")
    parser.add_argument("--write", type=Path, help="write the report (markdown) to this file")
    parser.add_argument("--batch-size", type=int, default=64, help="--startup: both sides' batch (issue 28: 64)")
    parser.add_argument("--npz", type=Path, help="--startup: also this outside data (Keras mnist.npz layout)")
    args = parser.parse_args()
    rounds = args.rounds if args.rounds is not None else 5 if args.startup else 3
    epochs = args.epochs if args.epochs is not None else 5 if args.startup else 20

    if args.startup:
        section = startup_report(rounds, epochs, args.batch_size, args.npz)
        print(section)
        if args.write:
            write_section(args.write, section)
        return

    started = time.time()
    lines = [
        f"Machine: {machine()}; load average at start {os.getloadavg()[0]:.2f}.",
        f"Command: `python benchmarks/framework_tax.py --rounds {rounds} --epochs {epochs}`; "
        f"{epochs} epochs per run, batch 32, Adam 1e-3, seed 42, runs alternated A, B1, B, B0.",
        "",
    ]
    peak, flops = matmul_peak_flops(), training_flops_per_example()
    for name, (overrides, reference_args) in DATASETS.items():
        samples = {k: [] for k in ("A", "B1", "B", "B0")}
        for _ in range(rounds):
            samples["A"].append(run_reference(reference_args, epochs))
            samples["B1"].append(run_tfhydra([*overrides, "trainer.steps_per_execution=1"], epochs))
            samples["B"].append(run_tfhydra(overrides, epochs))
            samples["B0"].append(run_tfhydra([*overrides, "logging.histogram_freq=0"], epochs))
        median = {
            k: {f: statistics.median(s[f] for s in v) for f in ("throughput", "wall", "first_step", "accuracy")}
            for k, v in samples.items()
        }
        a = median["A"]
        lines += [
            f"## {name}",
            "",
            "| figure (median) | A: Keras script | B1: tfhydra, steps_per_execution=1 | B: tfhydra defaults "
            "| B1/A | B/A |",
            "|---|---|---|---|---|---|",
        ]
        for figure, unit in (("throughput", "examples/s"), ("wall", "s"), ("first_step", "s")):
            lines.append(
                f"| {figure} ({unit}) | {a[figure]:,.2f} | {median['B1'][figure]:,.2f} | "
                f"{median['B'][figure]:,.2f} | {median['B1'][figure] / a[figure]:.2f}x | "
                f"{median['B'][figure] / a[figure]:.2f}x |"
            )
        lines.append(
            f"| best val accuracy | {a['accuracy']:.4f} | {median['B1']['accuracy']:.4f} | "
            f"{median['B']['accuracy']:.4f} | {100 * (median['B1']['accuracy'] - a['accuracy']):+.2f} pts | "
            f"{100 * (median['B']['accuracy'] - a['accuracy']):+.2f} pts |"
        )
        per_epoch_cost = (median["B"]["wall"] - median["B0"]["wall"]) / epochs
        epoch_seconds = median["B0"]["wall"] / epochs
        cpu = {k: statistics.median(s["cpu"] for s in samples[k]) for k in ("B", "B0")}
        per_epoch_cpu, epoch_cpu = (cpu["B"] - cpu["B0"]) / epochs, cpu["B0"] / epochs
        lines += [
            "",
            f"- Training FLOP/s of B: {flops * median['B']['throughput'] / 1e9:.2f} GFLOP/s "
            f"({flops / 1e6:.2f} MFLOP per example, 3x the profiled forward pass) = "
            f"{100 * flops * median['B']['throughput'] / peak:.1f}% of the measured fp32 matmul peak "
            f"({peak / 1e9:.1f} GFLOP/s).",
            f"- Histograms every epoch (B vs B0, whole-process wall): {per_epoch_cost:+.3f} s per epoch "
            f"= {100 * per_epoch_cost / epoch_seconds:+.1f}% of an average epoch's share of the run "
            f"({epoch_seconds:.2f} s).",
            f"- Histograms every epoch (B vs B0, CPU seconds of the process, unmoved by other work on the "
            f"machine): {per_epoch_cpu:+.3f} s per epoch = {100 * per_epoch_cpu / epoch_cpu:+.1f}% of an "
            f"average epoch's share of the run's CPU ({epoch_cpu:.2f} s; medians {cpu['B']:.2f} / "
            f"{cpu['B0']:.2f} s).",
            "- Samples (throughput): "
            + "; ".join(f"{k}: " + ", ".join(f"{s['throughput']:,.0f}" for s in v) for k, v in samples.items()),
            "",
        ]
    help_s, error_s = quick_command_seconds(["--help"]), quick_command_seconds(["optimizer.lr=-1"])
    lines += [
        "## Fast feedback",
        "",
        f"- `python train.py --help`: {help_s:.2f} s (median of 3)",
        f"- `python train.py optimizer.lr=-1` (config error): {error_s:.2f} s (median of 3)",
        "",
        f"Benchmark wall time: {time.time() - started:.0f} s.",
    ]
    report = "\n".join(lines)
    print(report)
    if args.write:
        template = args.write.read_text() if args.write.exists() else ""
        head = template.split(MARKER)[0] if MARKER in template else "# Performance\n\n"
        args.write.write_text(f"{head}{MARKER}\n{report}\n")


if __name__ == "__main__":
    main()
