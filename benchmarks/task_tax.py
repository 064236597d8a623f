"""Regression and multi-label: is tfhydra slower than a hand-written Keras script doing the same work?

    python benchmarks/task_tax.py [--rounds 5] [--epochs 10] [--write docs/performance.md] [--json FILE]

For each task it writes one npz of float features with float targets (regression, 2 targets) or multi-hot
labels (multilabel, 8 labels), its train, validation and test splits given (x_/y_ train, val, test: no hold-out
to match), then alternates pair by pair, A,B / B,A round after round:
  A  benchmarks/keras_reference.py --task T --data npz --path FILE --equal-work DIR: the seed MLP with the
     task's head, loss and metrics written by hand (its TASKS), TensorBoard with graph and histograms every epoch,
     the best epoch's weights by the task's monitor (val_loss min, val_auc max), restored, a SavedModel of them,
     the test split measured once on them, a JSON record
  B  python train.py data=npz ... task=T model=mlp: tfhydra's defaults otherwise (which do all of that)
and reports, per pair, B/A of the training throughput (examples/s inside fit, training phase, first epoch left
out) and of the whole-process wall (min, median, max over the pairs), the CPU seconds of each process (what other
work on the machine does not move), and both sides' best validation and test figures, which must agree for the
ratios to mean anything. Goals (issue 44, item 6): throughput B/A >= 1.0x and wall B/A <= 1.05x.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from framework_tax import ROOT, children_cpu_seconds, machine, timed, write_section

HEADING = "## Tasks: regression and multi-label against a Keras script"


@dataclass(frozen=True)
class Case:
    """One task's benchmark: its monitor (as conf/task/ has it), the figures both sides must agree on, and how
    far apart they may be (the same seed gives the same weights on both sides, up to threads' summation order)."""

    monitor: str
    mode: str
    figures: tuple[str, ...]
    tolerance: float


CASES = {
    "regression": Case("val_loss", "min", ("rmse", "mae", "r2"), 0.05),
    "multilabel": Case("val_auc", "max", ("auc", "f1", "binary_accuracy"), 0.03),
}
FEATURES, LABELS = 32, 8
TIMES = {"throughput": "training examples/s", "wall": "whole-process wall (s)", "cpu": "CPU of the process (s)"}


def task_arrays(task: str, rng: np.random.Generator, weights: np.ndarray, count: int):
    """(x, y) float32: standard-normal features; two smooth targets of a few features plus noise (regression), or
    8 labels each on when a random projection plus a bend of another passes its threshold (multilabel, 20-50% on)."""
    x = rng.normal(size=(count, FEATURES)).astype(np.float32)
    if task == "regression":
        targets = [np.sin(x[:, 0]) + x[:, 1] * x[:, 2] + 0.5 * x[:, 3], np.tanh(x[:, 4] + x[:, 5]) - 0.3 * x[:, 6] ** 2]
        return x, (np.stack(targets, 1) + 0.1 * rng.normal(size=(count, 2))).astype(np.float32)
    scores = x @ weights[0] + 0.5 * np.sin(x @ weights[1])
    thresholds = np.linspace(0.0, 0.85, LABELS) * np.sqrt(FEATURES / 4)
    return x, (scores > thresholds).astype(np.float32)


def write_data(task: str, path: Path, train_size: int, seed: int = 0) -> Path:
    """The task's npz: train_size training examples, a quarter as many each for validation and test."""
    rng = np.random.default_rng(seed)
    weights = rng.normal(size=(2, FEATURES, LABELS)) / 2
    splits = {"train": train_size, "val": train_size // 4, "test": train_size // 4}
    arrays = {}
    for split, count in splits.items():
        arrays[f"x_{split}"], arrays[f"y_{split}"] = task_arrays(task, rng, weights, count)
    np.savez(path, **arrays)
    return path


def run_hand(task: str, data: Path, args) -> dict:
    reference = [sys.executable, str(ROOT / "benchmarks" / "keras_reference.py"), "--task", task]
    return run_reference(
        [
            *reference,
            *("--data", "npz", "--path", str(data), "--epochs", str(args.epochs)),
            *("--batch-size", str(args.batch_size), "--dropout", str(args.dropout)),
        ]
    )


def run_tfhydra(task: str, data: Path, args) -> dict:
    return run_train(
        [
            *(f"task={task}", "model=mlp", "model.units=[64,32]"),
            *(["task.standardize=false"] if task == "regression" else []),  # the hand-written side: targets as given
            *("data=npz", f"data.path={data}", "data.x_val=x_val", "data.y_val=y_val"),
            *(f"model.dropout={args.dropout}", f"data.batch_size={args.batch_size}", f"trainer.epochs={args.epochs}"),
        ]
    )


def run_reference(command: list[str]) -> dict:
    """A hand-written script's process, `--equal-work` into a fresh directory: the figures of its JSON line."""
    cpu_before = children_cpu_seconds()
    with tempfile.TemporaryDirectory() as run_dir:
        start, wall, result = timed([*command, "--equal-work", run_dir])
    if result.returncode:
        raise SystemExit(f"reference failed:\n{result.stderr[-2000:]}")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    return sample(figures, start, wall, children_cpu_seconds() - cpu_before)


def run_train(overrides: list[str]) -> dict:
    """`python train.py` with these overrides into a fresh run directory: the figures of its metrics.json."""
    cpu_before = children_cpu_seconds()
    with tempfile.TemporaryDirectory() as run_dir:
        start, wall, result = timed([sys.executable, str(ROOT / "train.py"), *overrides, f"hydra.run.dir={run_dir}"])
        if result.returncode:
            raise SystemExit(f"tfhydra failed:\n{result.stderr[-2000:]}")
        record = json.loads((Path(run_dir) / "metrics.json").read_text())
    record["test"] = record["test"]["metrics"]  # the record's test block also says which weights and examples
    return sample(record, start, wall, children_cpu_seconds() - cpu_before)


def sample(figures: dict, start: float, wall: float, cpu: float) -> dict:
    """What both sides report, under one set of names: the record's `best` (validation at the kept epoch) and
    `test` blocks read the same from the script's JSON line and from tfhydra's metrics.json."""
    return {
        "throughput": figures["examples_per_second"],
        "wall": wall,
        "cpu": cpu,
        "first_step": figures["first_step_unix_time"] - start,
        "best": {k: v for k, v in figures["best"].items() if k.startswith("val_")},
        "test": {k: float(v) for k, v in (figures["test"] or {}).items()},
    }


def measure(task: str, data: Path, args) -> dict[str, list[dict]]:
    return alternate(
        {"A": lambda: run_hand(task, data, args), "B": lambda: run_tfhydra(task, data, args)}, args.rounds, task
    )


def alternate(runs: dict[str, Callable[[], dict]], rounds: int, label: str) -> dict[str, list[dict]]:
    """`rounds` rounds of every side, in order then reversed (A,B / B,A; A,B,C / C,B,A), so drift on a shared machine
    (load, caches) falls on every side alike."""
    samples: dict[str, list[dict]] = {side: [] for side in runs}
    for round_ in range(rounds):
        for side in list(runs) if round_ % 2 == 0 else list(runs)[::-1]:
            samples[side].append(runs[side]())
            print(
                f"{label} {side} {round_ + 1}/{rounds}: {samples[side][-1]['wall']:.2f} s", file=sys.stderr, flush=True
            )
    return samples


def pair_ratios(over: list[dict], under: list[dict], figures) -> dict[str, dict[str, float]]:
    """Per round, `over`'s figure / `under`'s, as min, median and max over the rounds."""
    spread = {figure: sorted(b[figure] / a[figure] for a, b in zip(under, over, strict=True)) for figure in figures}
    return {k: {"min": v[0], "median": statistics.median(v), "max": v[-1]} for k, v in spread.items()}


def summarise(task: str, samples: dict[str, list[dict]]) -> dict:
    """Per-pair ratios B/A (min, median, max), medians of each side, and whether the two reached the same
    metrics (the medians of the validation figure at the kept epoch and of every test figure)."""
    case = CASES[task]
    median = {
        side: {figure: statistics.median(s[figure] for s in runs) for figure in TIMES} for side, runs in samples.items()
    }
    names = [case.monitor, *(f"val_{f}" for f in case.figures)]
    metrics = {
        side: {
            **{name: statistics.median(s["best"][name] for s in runs) for name in names},
            **{f"test_{f}": statistics.median(s["test"][f] for s in runs) for f in case.figures},
        }
        for side, runs in samples.items()
    }
    gaps = {name: abs(metrics["B"][name] - metrics["A"][name]) for name in metrics["A"]}
    return {
        "task": task,
        "ratios": pair_ratios(samples["B"], samples["A"], (*TIMES, "first_step")),
        "median": median,
        "metrics": metrics,
        "comparable": all(gap <= case.tolerance for gap in gaps.values()),
        "tolerance": case.tolerance,
        "samples": {side: [{k: s[k] for k in TIMES} for s in runs] for side, runs in samples.items()},
    }


def section(summaries: list[dict], args, loads: tuple[float, float], seconds: float) -> str:
    lines = [
        f"{HEADING} ({args.epochs} epochs)",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Command: `python benchmarks/task_tax.py --rounds "
        f"{args.rounds} --epochs {args.epochs} --train-size {args.train_size}`. Machine: {machine()}; load "
        f"average {loads[0]:.2f} at the start, {loads[1]:.2f} at the end.",
        "",
        f"A: benchmarks/keras_reference.py --task T --equal-work (the MLP [64, 32], dropout {args.dropout}, the "
        "task's head, loss and metrics by hand; TensorBoard with graph and histograms, the best epoch by the task's "
        "monitor restored, SavedModel export, the test split measured once, metrics.json). B: `python train.py "
        f"task=T model=mlp model.units=[64,32] model.dropout={args.dropout} (regression: task.standardize=false) "
        "data=npz data.x_val=x_val "
        f"data.y_val=y_val data.batch_size={args.batch_size}`, tfhydra's defaults otherwise. {args.rounds} pairs "
        f"alternated A,B / B,A; {args.train_size:,} training, {args.train_size // 4:,} validation and "
        f"{args.train_size // 4:,} test examples of {FEATURES} features.",
        "",
    ]
    for summary in summaries:
        lines += task_rows(summary)
    return "\n".join([*lines, f"Benchmark wall time: {seconds:.0f} s."])


def task_rows(summary: dict) -> list[str]:
    ratios, median, metrics = summary["ratios"], summary["median"], summary["metrics"]
    lines = [
        f"### {summary['task']}",
        "",
        *ratio_table(median, ratios, ("A", "B"), ("A: Keras script", "B: tfhydra"), "pair"),
        "",
        "| metric (median) | A | B |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {metrics['A'][name]:.4f} | {metrics['B'][name]:.4f} |" for name in metrics["A"]]
    throughput, wall = ratios["throughput"]["median"], ratios["wall"]["median"]
    return [
        *lines,
        "",
        f"- Both sides reached the same metrics (every figure within {summary['tolerance']}): "
        f"{'yes' if summary['comparable'] else 'NO: the ratios compare different work'}.",
        f"- Goal throughput B/A >= 1.0x: {throughput:.2f}x (median), {'met' if throughput >= 1.0 else 'not met'}.",
        f"- Goal whole-process wall B/A <= 1.05x: {wall:.2f}x (median), {'met' if wall <= 1.05 else 'not met'}.",
        "- Samples (wall s / examples/s / CPU s): "
        + "; ".join(
            f"{side}: " + ", ".join(f"{s['wall']:.2f} / {s['throughput']:,.0f} / {s['cpu']:.1f}" for s in runs)
            for side, runs in summary["samples"].items()
        ),
        "",
    ]


def ratio_table(median: dict, ratios: dict, sides: tuple[str, str], labels: tuple[str, str], per: str) -> list[str]:
    """A markdown table: each side's medians of TIMES (`sides`: under, over) and the per-`per` ratios over/under of
    TIMES and of the time to the first step, as min, median and max."""
    under, over = sides
    lines = [
        f"| figure | {labels[0]} (median) | {labels[1]} (median) | {over}/{under} per {per}: min | median | max |",
        "|---|---|---|---|---|---|",
    ]
    for figure, label in TIMES.items():
        r = ratios[figure]
        lines.append(
            f"| {label} | {median[under][figure]:,.2f} | {median[over][figure]:,.2f} | {r['min']:.2f}x | "
            f"{r['median']:.2f}x | {r['max']:.2f}x |"
        )
    r = ratios["first_step"]
    return [*lines, f"| process start to first step | | | {r['min']:.2f}x | {r['median']:.2f}x | {r['max']:.2f}x |"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="pairs per task")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--train-size", type=int, default=8192, help="training examples (val and test: a quarter)")
    parser.add_argument("--batch-size", type=int, default=32, help="both sides (tfhydra's default data.batch_size)")
    parser.add_argument("--dropout", type=float, default=0.1, help="the MLP's dropout, both sides")
    parser.add_argument("--tasks", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--write", type=Path, help="replace this section of a markdown file (docs/performance.md)")
    parser.add_argument("--json", type=Path, help="also write the summaries here (tests/benchmarks/)")
    args = parser.parse_args()

    started, load = time.time(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as data_dir:
        summaries = [
            summarise(task, measure(task, write_data(task, Path(data_dir) / f"{task}.npz", args.train_size), args))
            for task in args.tasks
        ]
    report = section(summaries, args, (load, os.getloadavg()[0]), time.time() - started)
    print(report)
    if args.write:
        write_section(args.write, report, HEADING)
    if args.json:
        args.json.write_text(json.dumps(summaries, indent=2))


if __name__ == "__main__":
    main()
