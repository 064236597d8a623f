"""Keras 3: is `python train.py keras=3` slower than a hand-written Keras 3 script, and than keras=2?

    python benchmarks/keras3_tax.py [--rounds 5] [--epochs 20] [--write docs/performance.md docs/keras.md]
                                    [--json FILE] [--no-keras2]

Three sides, alternated in one invocation, A,B,C then C,B,A round after round, so drift on a shared machine
(load, caches) falls on all of them alike:
  A  benchmarks/keras3_reference.py --equal-work DIR: the default run written by hand with `import keras` (Keras 3,
     TensorFlow backend): the seed CNN on the digits (tfhydra's splits, 1077 / 360 / 360), TensorBoard with graph and
     histograms every epoch, the best epoch by val_accuracy checkpointed and restored, a SavedModel of it, the test
     split measured once, a JSON record
  B  python train.py keras=3: tfhydra's defaults otherwise (which do all of that)
  C  python train.py keras=2: the same run on tf_keras, tfhydra's default Keras (left out with --no-keras2)
and reports per round B/A (issue 45, item 5: training throughput >= 1.0x, whole-process wall <= 1.05x; both sides
start from the same weights and data order, so their metrics must agree for the ratios to mean anything) and B/C
(keras=3 against keras=2: users report Keras 3 slower, keras-team/keras#18648), as min, median and max over the
rounds, with the CPU seconds of each process (what other work on the machine does not move).

The seed CNN, not the MLP: it is the run `python train.py keras=3` gives, and benchmarks/framework_tax.py measures
the same model under keras=2; an MLP on 28x28 digits is mostly per-step overhead, which would measure
`trainer.steps_per_execution` more than Keras or tfhydra.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from framework_tax import ROOT, machine, write_section
from task_tax import TIMES, alternate, pair_ratios, ratio_table, run_reference, run_train

HEADING = "## Keras 3: a hand-written Keras 3 script and keras=2 against keras=3"
FIGURES = ("val_accuracy", "val_loss", "test_accuracy", "test_loss")
TOLERANCE = 0.02  # the same weights and batches on both sides; threads' summation order may move the last digits
SIDES = {"A": "Keras 3 script", "B": "tfhydra keras=3", "C": "tfhydra keras=2"}


def runs(args) -> dict:
    """The sides' runs, each a fresh process into a fresh directory."""
    reference = [sys.executable, str(ROOT / "benchmarks" / "keras3_reference.py"), "--epochs", str(args.epochs)]
    sides = {
        "A": lambda: run_reference(reference),
        "B": lambda: run_train(["keras=3", f"trainer.epochs={args.epochs}"]),
        "C": lambda: run_train(["keras=2", f"trainer.epochs={args.epochs}"]),
    }
    return {side: run for side, run in sides.items() if args.keras2 or side != "C"}


def metrics(samples: list[dict]) -> dict[str, float]:
    """The medians of the validation figures at the kept epoch and of the test figures."""
    return {
        **{name: statistics.median(s["best"][name] for s in samples) for name in FIGURES[:2]},
        **{name: statistics.median(s["test"][name.removeprefix("test_")] for s in samples) for name in FIGURES[2:]},
    }


def summarise(samples: dict[str, list[dict]]) -> dict:
    """Per-round ratios B/A (and B/C), each side's medians and metrics, and whether A and B reached the same ones."""
    figures = {side: metrics(runs) for side, runs in samples.items()}
    gaps = [abs(figures["B"][name] - figures["A"][name]) for name in FIGURES]
    summary = {
        "ratios": {"B/A": pair_ratios(samples["B"], samples["A"], (*TIMES, "first_step"))},
        "median": {side: {f: statistics.median(s[f] for s in runs) for f in TIMES} for side, runs in samples.items()},
        "metrics": figures,
        "comparable": max(gaps) <= TOLERANCE,
        "tolerance": TOLERANCE,
        "samples": {side: [{k: s[k] for k in TIMES} for s in runs] for side, runs in samples.items()},
    }
    if "C" in samples:
        summary["ratios"]["B/C"] = pair_ratios(samples["B"], samples["C"], (*TIMES, "first_step"))
    return summary


def ratio_rows(summary: dict, pair: str) -> list[str]:
    over, under = pair.split("/")
    labels = (f"{under}: {SIDES[under]}", f"{over}: {SIDES[over]}")
    return ratio_table(summary["median"], summary["ratios"][pair], (under, over), labels, "round")


def section(summary: dict, args, loads: tuple[float, float], seconds: float) -> str:
    sides = list(summary["metrics"])
    lines = [
        f"{HEADING} ({args.epochs} epochs)",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Command: `python benchmarks/keras3_tax.py --rounds "
        f"{args.rounds} --epochs {args.epochs}{'' if args.keras2 else ' --no-keras2'}`. Machine: {machine()}, keras "
        f"{keras_version()}; load average {loads[0]:.2f} at the start, {loads[1]:.2f} at the end.",
        "",
        "A: benchmarks/keras3_reference.py (`import keras`, the seed CNN on the digits split as tfhydra splits them, "
        "Adam 1e-3, batch 32, seed 42; TensorBoard with graph and histograms every epoch, the best epoch by "
        "val_accuracy restored, `model.export` SavedModel, the test split measured once, a JSON record). B: "
        f"`python train.py keras=3 trainer.epochs={args.epochs}`, tfhydra's defaults otherwise."
        + (f" C: `python train.py keras=2 trainer.epochs={args.epochs}`." if "C" in sides else "")
        + f" {args.rounds} rounds alternated {','.join(sides)} / {','.join(sides[::-1])}. Throughput: training "
        "examples/s inside fit, the first epoch left out.",
        "",
        "### A hand-written Keras 3 script against keras=3",
        "",
        *ratio_rows(summary, "B/A"),
        "",
        "| metric (median) | " + " | ".join(f"{side}: {SIDES[side]}" for side in sides) + " |",
        "|---" * (len(sides) + 1) + "|",
        *(f"| {n} | " + " | ".join(f"{summary['metrics'][s][n]:.4f}" for s in sides) + " |" for n in FIGURES),
        "",
        *goal_lines(summary),
    ]
    if "B/C" in summary["ratios"]:
        lines += ["", "### keras=2 against keras=3 (tfhydra, the same run)", "", *ratio_rows(summary, "B/C")]
    lines += [
        "",
        "- Samples (wall s / examples/s / CPU s): "
        + "; ".join(
            f"{side}: " + ", ".join(f"{s['wall']:.2f} / {s['throughput']:,.0f} / {s['cpu']:.1f}" for s in runs)
            for side, runs in summary["samples"].items()
        ),
        "",
        f"Benchmark wall time: {seconds:.0f} s.",
    ]
    return "\n".join(lines)


def goal_lines(summary: dict) -> list[str]:
    ratios = summary["ratios"]["B/A"]
    throughput, wall = ratios["throughput"]["median"], ratios["wall"]["median"]
    return [
        f"- A and B reached the same metrics (every figure within {summary['tolerance']}): "
        f"{'yes' if summary['comparable'] else 'NO: the ratios compare different work'}.",
        f"- Goal throughput B/A >= 1.0x: {throughput:.2f}x (median), {'met' if throughput >= 1.0 else 'not met'}.",
        f"- Goal whole-process wall B/A <= 1.05x: {wall:.2f}x (median), {'met' if wall <= 1.05 else 'not met'}.",
    ]


def keras_version() -> str:
    import importlib.metadata as md

    return md.version("keras")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=20, help="every side (tfhydra's default trainer.epochs)")
    parser.add_argument("--no-keras2", dest="keras2", action="store_false", help="leave side C (keras=2) out")
    parser.add_argument(
        "--write", type=Path, nargs="+", default=[], help="replace this section of these markdown files"
    )
    parser.add_argument("--json", type=Path, help="also write the summary here (tests/benchmarks/)")
    args = parser.parse_args()

    started, load = time.time(), os.getloadavg()[0]
    summary = summarise(alternate(runs(args), args.rounds, "keras3"))
    report = section(summary, args, (load, os.getloadavg()[0]), time.time() - started)
    print(report)
    for path in args.write:
        write_section(path, report, HEADING)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
