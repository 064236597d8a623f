"""Wall time of one sweep run sequentially (Hydra's basic launcher) and with the joblib launcher.

    python benchmarks/sweep_parallel.py [--rounds 3] [--n-jobs 2] [sweep overrides ...]

Default sweep: the seed A/B test, 4 jobs `optimizer.lr=1e-3,5e-4 data.batch_size=32,64` with
every other setting at its default (seed CNN on digits, 20 epochs, export). Each measurement
is the whole command as a user types it (`python train.py -m ...` in a subprocess, process
start and TensorFlow import included). The two launchers are alternated (sequential, parallel,
sequential, ...) so load on a shared machine spreads over both; the figure is the ratio of
the median wall times. Before each round, two CPU-bound processes measure how many cores the
machine really gives (a shared virtual machine may give fewer than it shows): a round where
they got far less than `--n-jobs` cores says nothing about the launcher.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["optimizer.lr=1e-3,5e-4", "data.batch_size=32,64"]


def run_sweep(overrides: list[str], launcher: list[str]) -> float:
    with tempfile.TemporaryDirectory() as cwd:
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, str(ROOT / "train.py"), "-m", *launcher, *overrides],
            cwd=cwd,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        seconds = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"sweep failed ({' '.join(launcher) or 'basic launcher'}):\n{result.stderr[-3000:]}")
    return seconds


BUSY = "import time; t = time.perf_counter(); sum(range(40_000_000)); print(time.perf_counter() - t)"


def cpu_capacity(processes: int) -> float:
    """How many cores the machine really gives `processes` CPU-bound processes at once (a shared or
    overcommitted virtual machine may give fewer than it shows): `processes` x (time alone / time together)."""

    def timed(count: int) -> float:
        runs = [subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True) for _ in range(count)]
        return max(float(run.communicate()[0]) for run in runs)

    return processes * timed(1) / timed(processes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("overrides", nargs="*", help=f"the sweep (default: {' '.join(SWEEP)})")
    args = parser.parse_args()
    overrides = args.overrides or SWEEP
    launchers = {
        "sequential": [],
        f"joblib n_jobs={args.n_jobs}": ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={args.n_jobs}"],
    }
    samples: dict[str, list[float]] = {name: [] for name in launchers}
    load = os.getloadavg()[0]
    capacity = []
    for round_ in range(args.rounds):
        capacity.append(cpu_capacity(args.n_jobs))
        for name, launcher in launchers.items():
            samples[name].append(run_sweep(overrides, launcher))
            print(
                f"round {round_ + 1}: {name}: {samples[name][-1]:.1f} s (CPU capacity for {args.n_jobs} "
                f"processes before this round: {capacity[-1]:.2f} cores)",
                flush=True,
            )
    medians = {name: statistics.median(values) for name, values in samples.items()}
    sequential, parallel = medians.values()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"\n{' '.join(overrides)}\n{cores} cores, load average {load:.2f} at start, {args.rounds} rounds alternated; "
        f"{args.n_jobs} CPU-bound processes got {', '.join(f'{c:.2f}' for c in capacity)} cores' worth"
    )
    print("| launcher | median wall time | samples |\n|---|---|---|")
    for name, values in samples.items():
        print(f"| {name} | {medians[name]:.1f} s | {', '.join(f'{v:.1f}' for v in values)} |")
    print(f"\nparallel / sequential = {parallel / sequential:.2f}x")


if __name__ == "__main__":
    main()
