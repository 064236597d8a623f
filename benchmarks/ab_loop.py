"""The article's A/B loop two ways: three background processes against tfhydra's `-m` sweep, with the defaults.

    python benchmarks/ab_loop.py [--rounds 3] [--data digits synthetic] [--npz PATH] [--rss-jobs 10] [overrides ...]

"Article": `python train.py optimizer.lr=X hydra.run.dir=...` three times at once (the shell's `&`), waited for
together. "Sweep": `python train.py -m optimizer.lr=1e-3,5e-4,1e-4` (the default launcher: tfhydra's). Both
are whole commands as a user types them (process start, TensorFlow import, export included), alternated in
each round so load on a shared machine spreads over both; figures are medians over the rounds. For each
data set it reports both wall times, their ratio, and whether the three learning rates rank the same by
each job's best `trainer.monitor` (its metrics.json).

Then the memory of a reused worker: a sweep of `--rss-jobs` short jobs (seeds 0..N-1, 2 epochs, one worker:
`hydra.launcher.workers=1`) and the worker's peak RSS after its 1st and its last job (the launcher logs both).
`--npz PATH` adds outside data in the Keras mnist.npz layout (issue 28 measured 4,000 real digit images).
The fast recipe against the article's recipe (time to its best accuracy, final accuracy): benchmarks/recipe.py.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LRS = ["1e-3", "5e-4", "1e-4"]
DATA = {"digits": [], "synthetic": ["data=synthetic"]}


def best_of(run_dir: Path) -> float:
    record = json.loads((run_dir / "metrics.json").read_text())
    if record["status"] != "completed":
        sys.exit(f"{run_dir}: {record['status']}: {record.get('error')}")
    return record["best"][record["monitor"]]


def article(overrides: list[str], cwd: Path) -> tuple[float, list[float]]:
    dirs = [cwd / f"article_{lr}" for lr in LRS]
    started = time.perf_counter()
    runs = [subprocess.Popen([sys.executable, str(ROOT / "train.py"), f"optimizer.lr={lr}", f"hydra.run.dir={d}",
                              *overrides], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, text=True) for lr, d in zip(LRS, dirs)]
    errors = [run.communicate()[1] for run in runs]
    seconds = time.perf_counter() - started
    for run, error in zip(runs, errors):
        if run.returncode:
            sys.exit(f"a background run failed:\n{error[-3000:]}")
    return seconds, [best_of(d) for d in dirs]


def sweep(overrides: list[str], cwd: Path, extra=()) -> tuple[float, list[float], str]:
    sweep_dir = cwd / "sweep"
    started = time.perf_counter()
    result = subprocess.run([sys.executable, str(ROOT / "train.py"), "-m", f"optimizer.lr={','.join(LRS)}",
                             f"hydra.sweep.dir={sweep_dir}", *overrides, *extra], cwd=cwd, capture_output=True,
                            text=True, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    if result.returncode:
        sys.exit(f"the sweep failed:\n{result.stderr[-3000:]}")
    jobs = sorted(d for d in sweep_dir.iterdir() if (d / "metrics.json").is_file())
    return seconds, [best_of(d) for d in jobs], result.stdout + result.stderr


def ranking(values: list[float]) -> list[str]:
    return [lr for _, lr in sorted(zip(values, LRS), key=lambda vl: -vl[0])]


def compare(name: str, overrides: list[str], rounds: int) -> dict:
    samples = {"article": [], "sweep": []}
    ranks = {"article": [], "sweep": []}
    for round_ in range(rounds):
        for way in (("article", "sweep") if round_ % 2 == 0 else ("sweep", "article")):
            with tempfile.TemporaryDirectory() as cwd:
                seconds, values = (article(overrides, Path(cwd)) if way == "article" else
                                   sweep(overrides, Path(cwd))[:2])
            samples[way].append(seconds)
            ranks[way].append(ranking(values))
            print(f"{name} round {round_ + 1}: {way}: {seconds:.1f} s, best {[round(v, 4) for v in values]} "
                  f"(lr ranking {ranks[way][-1]})", flush=True)
    medians = {way: statistics.median(values) for way, values in samples.items()}
    return {"data": name, "article": medians["article"], "sweep": medians["sweep"],
            "ratio": medians["sweep"] / medians["article"], "samples": samples,
            "same_ranking": [a == s for a, s in zip(ranks["article"], ranks["sweep"])], "rankings": ranks}


def worker_memory(jobs: int, overrides: list[str]) -> tuple[float, float]:
    """Peak RSS (MB) of the one worker after its first and its last job of a `jobs`-job sweep."""
    with tempfile.TemporaryDirectory() as cwd:
        extra = ["hydra.launcher.workers=1", f"trainer.seed=range(0,{jobs})", "trainer.epochs=2",
                 "export.formats=[]"]
        global LRS
        saved, LRS = LRS, ["1e-3"]
        try:
            _, _, output = sweep(overrides, Path(cwd), extra)
        finally:
            LRS = saved
    peaks = [float(p) for p in re.findall(r"\(its job \d+\): RSS [\d.]+ MB, peak ([\d.]+) MB", output)]
    if len(peaks) != jobs:
        sys.exit(f"expected {jobs} memory lines from the launcher, found {len(peaks)}:\n{output[-3000:]}")
    return peaks[0], peaks[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", nargs="+", default=list(DATA), choices=list(DATA))
    parser.add_argument("--npz", type=Path, help="also outside data in the Keras mnist.npz layout")
    parser.add_argument("--rss-jobs", type=int, default=10, help="0: skip the memory measurement")
    parser.add_argument("overrides", nargs="*", help="added to every command (default: none, the defaults)")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0]
    datasets = {name: DATA[name] for name in args.data}
    if args.npz:
        datasets[args.npz.name] = ["data=npz", f"data.path={args.npz.resolve()}"]
    results = [compare(name, data + args.overrides, args.rounds) for name, data in datasets.items()]
    print(f"\n{cores} cores, load average {load:.2f} at start, {args.rounds} rounds alternated, "
          f"overrides: {' '.join(args.overrides) or '(the defaults)'}")
    print("| data | 3 background processes | `-m` (tfhydra launcher) | ratio | same ranking (per round) | samples |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['data']} | {r['article']:.1f} s | {r['sweep']:.1f} s | **{r['ratio']:.2f}x** | "
              f"{r['same_ranking']} | article {r['samples']['article']}, sweep {r['samples']['sweep']} |")
    if args.rss_jobs:
        first, last = worker_memory(args.rss_jobs, args.overrides)
        print(f"\none worker, {args.rss_jobs} jobs (seed CNN on digits, 2 epochs, no export): peak RSS after job 1 "
              f"{first:.0f} MB, after job {args.rss_jobs} {last:.0f} MB: **{last / first:.2f}x**")


if __name__ == "__main__":
    main()
