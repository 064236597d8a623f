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

`--decision [--seeds 0 1 2 3 4]`: the article's decision ("which learning rate is best, and how good is it on all
the data") two ways, for each `trainer.seed`: the three background processes (the full grid: every learning rate
on all the data for the run's epochs; the winner is the best validation figure, the first learning rate on a tie,
as the summary ranks) against `-m ... sweep.decide=true` (decide mode: tfhydra/sweep/decide.py screens the three
and promotes the best to the full run; its winner is the promoted setting). Alternated per seed; it reports each
seed's two wall times, their ratio, both winners and whether they agree, the decision decide mode printed, and the
totals. Goal (issue 37): the same winner in at least 4 of 5 seeds in <= 0.5x the time. `--alone` then times the
winner's full job alone on the machine (`python train.py optimizer.lr=X`, after both ways): no screen with one
promoted setting can take less, so alone / article is the bound of the ratio on this machine and data.
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
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LRS = ["1e-3", "5e-4", "1e-4"]
DATA = {"digits": [], "synthetic": ["data=synthetic"]}


class CpuMeter:
    """CPU seconds (user + system) of the benchmark's children and all their descendants (workers, the fork
    server), read from /proc every 0.2 s (Linux; a process's last 0.2 s before it exits may be missed). On a
    machine other work shares, the wall time says how busy the others were; the CPU time says how much work each
    way did."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, int], float] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.tick = os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> CpuMeter:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()

    @property
    def seconds(self) -> float:
        return sum(self.seen.values())

    def _poll(self) -> None:
        while True:
            stats = {}
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except (OSError, IndexError):
                    continue  # not a process, or it exited
                stats[int(entry.name)] = (
                    int(fields[1]),
                    int(fields[19]),
                    (int(fields[11]) + int(fields[12])) / self.tick,
                )
            mine, grew = {os.getpid()}, True
            while grew:
                found = {pid for pid, (ppid, _, _) in stats.items() if ppid in mine} - mine
                mine, grew = mine | found, bool(found)
            for pid in mine - {os.getpid()}:
                self.seen[(pid, stats[pid][1])] = stats[pid][2]  # (pid, start time): a reused pid is another process
            if self.done.wait(0.2):
                return


def best_of(run_dir: Path) -> float:
    record = json.loads((run_dir / "metrics.json").read_text())
    if record["status"] != "completed":
        sys.exit(f"{run_dir}: {record['status']}: {record.get('error')}")
    return record["best"][record["monitor"]]


def article(overrides: list[str], cwd: Path) -> tuple[float, list[float]]:
    dirs = [cwd / f"article_{lr}" for lr in LRS]
    started = time.perf_counter()
    runs = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "train.py"), f"optimizer.lr={lr}", f"hydra.run.dir={d}", *overrides],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        for lr, d in zip(LRS, dirs, strict=True)
    ]
    errors = [run.communicate()[1] for run in runs]
    seconds = time.perf_counter() - started
    for run, error in zip(runs, errors, strict=True):
        if run.returncode:
            sys.exit(f"a background run failed:\n{error[-3000:]}")
    return seconds, [best_of(d) for d in dirs]


def sweep(overrides: list[str], cwd: Path, extra=(), stage: str = "") -> tuple[float, list[float], str]:
    sweep_dir = cwd / "sweep"
    started = time.perf_counter()
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "train.py"),
            "-m",
            f"optimizer.lr={','.join(LRS)}",
            f"hydra.sweep.dir={sweep_dir}",
            *overrides,
            *extra,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    seconds = time.perf_counter() - started
    if result.returncode:
        sys.exit(f"the sweep failed:\n{result.stderr[-3000:]}")
    jobs = sorted(d for d in (sweep_dir / stage).iterdir() if (d / "metrics.json").is_file())
    return seconds, [best_of(d) for d in jobs], result.stdout + result.stderr


def ranking(values: list[float]) -> list[str]:
    return [lr for _, lr in sorted(zip(values, LRS, strict=True), key=lambda vl: -vl[0])]


def compare(name: str, overrides: list[str], rounds: int) -> dict:
    samples = {"article": [], "sweep": []}
    ranks = {"article": [], "sweep": []}
    for round_ in range(rounds):
        for way in ("article", "sweep") if round_ % 2 == 0 else ("sweep", "article"):
            with tempfile.TemporaryDirectory() as cwd:
                seconds, values = article(overrides, Path(cwd)) if way == "article" else sweep(overrides, Path(cwd))[:2]
            samples[way].append(seconds)
            ranks[way].append(ranking(values))
            print(
                f"{name} round {round_ + 1}: {way}: {seconds:.1f} s, best {[round(v, 4) for v in values]} "
                f"(lr ranking {ranks[way][-1]})",
                flush=True,
            )
    medians = {way: statistics.median(values) for way, values in samples.items()}
    return {
        "data": name,
        "article": medians["article"],
        "sweep": medians["sweep"],
        "ratio": medians["sweep"] / medians["article"],
        "samples": samples,
        "same_ranking": [a == s for a, s in zip(ranks["article"], ranks["sweep"], strict=True)],
        "rankings": ranks,
    }


def decide_sweep(overrides: list[str], cwd: Path) -> tuple[float, str, str]:
    """`-m` over LRS in decide mode: its wall time, the learning rate it promoted (best promoted job by its
    record's validation figure) and the line that says how the screen was chosen."""
    seconds, _, output = sweep(overrides, cwd, ["sweep.decide=true"], stage="promote")
    promoted = sorted(
        (best_of(d), d.name) for d in (cwd / "sweep" / "promote").iterdir() if (d / "metrics.json").is_file()
    )
    if not promoted:
        sys.exit(f"decide mode promoted nothing:\n{output[-3000:]}")
    value = promoted[-1][1].split("optimizer.lr=", 1)[1].split(",")[0]
    winner = next(lr for lr in LRS if float(lr) == float(value))
    decided = next((line for line in output.splitlines() if "decided by sweep.decide" in line), "?")
    return seconds, winner, decided


def alone(overrides: list[str], lr: str, cwd: Path) -> float:
    """One full job of the winning setting, alone on the machine (`python train.py optimizer.lr=X`): the least
    any screen-then-promote way with one promoted setting can take, whatever its screen costs."""
    started = time.perf_counter()
    run = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), f"optimizer.lr={lr}", f"hydra.run.dir={cwd / 'alone'}", *overrides],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if run.returncode:
        sys.exit(f"the lone run failed:\n{run.stderr[-3000:]}")
    return time.perf_counter() - started


def decision(name: str, overrides: list[str], seeds: list[int], with_alone: bool = False) -> dict:
    """The full grid (three background processes) against decide mode, per seed, alternated; `with_alone`: then
    the winner's full job alone, the bound of any screen with one promoted setting."""
    rows = []
    for i, seed in enumerate(seeds):
        seeded = [*overrides, f"trainer.seed={seed}"]
        found = {}
        for way in ("article", "decide") if i % 2 == 0 else ("decide", "article"):
            with tempfile.TemporaryDirectory() as cwd, CpuMeter() as cpu:
                if way == "article":
                    seconds, values = article(seeded, Path(cwd))
                    found[way] = (seconds, ranking(values)[0], [round(v, 4) for v in values])
                else:
                    found[way] = decide_sweep(seeded, Path(cwd))
            found[f"{way}_cpu"] = cpu.seconds
        (a_s, a_win, values), (d_s, d_win, decided) = found["article"], found["decide"]
        a_cpu, d_cpu = found["article_cpu"], found["decide_cpu"]
        if with_alone:
            with tempfile.TemporaryDirectory() as cwd:
                found["alone"] = alone(seeded, d_win, Path(cwd))
        rows.append(
            {
                "seed": seed,
                "article": a_s,
                "decide": d_s,
                "ratio": d_s / a_s,
                "article_winner": a_win,
                "decide_winner": d_win,
                "same": a_win == d_win,
                "values": values,
                "decided": decided,
                "article_cpu": a_cpu,
                "decide_cpu": d_cpu,
                "alone": found.get("alone"),
                "load": os.getloadavg()[0],
            }
        )
        bound = f", the winner alone {found['alone']:.1f} s ({found['alone'] / a_s:.2f}x)" if with_alone else ""
        print(
            f"{name} seed {seed}: article {a_s:.1f} s, {a_cpu:.0f} CPU s (best val {values}: {a_win}), decide "
            f"{d_s:.1f} s, {d_cpu:.0f} CPU s (promoted {d_win}): {d_s / a_s:.2f}x wall, {d_cpu / a_cpu:.2f}x CPU, "
            f"same winner: {a_win == d_win}{bound}; load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
    total = {key: sum(r[key] for r in rows) for key in ("article", "decide", "article_cpu", "decide_cpu")}
    if with_alone:
        total["alone"] = sum(r["alone"] for r in rows)
    return {
        "data": name,
        "rows": rows,
        "ratio": total["decide"] / total["article"],
        **total,
        "cpu_ratio": total["decide_cpu"] / total["article_cpu"],
        "same": sum(r["same"] for r in rows),
    }


def print_decision(results: list[dict], overrides: list[str]) -> None:
    print(
        f"\noverrides: {' '.join(overrides) or '(the defaults)'}; load average (1, 5, 15 min) at the end: "
        f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )
    print(
        "| data | seed | 3 background processes: wall, CPU | `-m ... sweep.decide=true`: wall, CPU | ratio wall, "
        "CPU | full grid's winner (best val per lr) | decide's winner | same | load after |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for row in r["rows"]:
            print(
                f"| {r['data']} | {row['seed']} | {row['article']:.0f} s, {row['article_cpu']:.0f} s | "
                f"{row['decide']:.0f} s, {row['decide_cpu']:.0f} s | {row['ratio']:.2f}x, "
                f"{row['decide_cpu'] / row['article_cpu']:.2f}x | {row['article_winner']} ({row['values']}) | "
                f"{row['decide_winner']} | {'yes' if row['same'] else 'no'} | {row['load']:.1f} |"
            )
        print(
            f"| {r['data']} | all {len(r['rows'])} | {r['article']:.0f} s, {r['article_cpu']:.0f} s | "
            f"{r['decide']:.0f} s, {r['decide_cpu']:.0f} s | **{r['ratio']:.2f}x, {r['cpu_ratio']:.2f}x** | | | "
            f"**{r['same']} of {len(r['rows'])}** | |"
        )
    for r in results:
        if "alone" in r:
            print(
                f"{r['data']}: the winner's full job alone, summed over the seeds: {r['alone']:.0f} s, "
                f"**{r['alone'] / r['article']:.2f}x** the three background processes (the bound of a screen "
                "with one promoted setting)"
            )
        print(f"{r['data']}: {r['rows'][0]['decided']}")


def worker_memory(jobs: int, overrides: list[str]) -> tuple[float, float]:
    """Peak RSS (MB) of the one worker after its first and its last job of a `jobs`-job sweep."""
    with tempfile.TemporaryDirectory() as cwd:
        extra = ["hydra.launcher.workers=1", f"trainer.seed=range(0,{jobs})", "trainer.epochs=2", "export.formats=[]"]
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
    parser.add_argument("--data", nargs="*", default=list(DATA), choices=list(DATA))
    parser.add_argument("--npz", type=Path, help="also outside data in the Keras mnist.npz layout")
    parser.add_argument("--rss-jobs", type=int, default=10, help="0: skip the memory measurement")
    parser.add_argument("--decision", action="store_true", help="the full grid against sweep.decide=true, per seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="--decision: trainer.seed")
    parser.add_argument("--alone", action="store_true", help="--decision: also time the winner's full job alone")
    parser.add_argument("overrides", nargs="*", help="added to every command (default: none, the defaults)")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0]
    datasets = {name: DATA[name] for name in args.data}
    if args.npz:
        datasets[args.npz.name] = ["data=npz", f"data.path={args.npz.resolve()}"]
    if args.decision:
        print(f"{cores} cores, load average {load:.2f} at start", flush=True)
        print_decision(
            [decision(name, data + args.overrides, args.seeds, args.alone) for name, data in datasets.items()],
            args.overrides,
        )
        return
    results = [compare(name, data + args.overrides, args.rounds) for name, data in datasets.items()]
    print(
        f"\n{cores} cores, load average {load:.2f} at start, {args.rounds} rounds alternated, "
        f"overrides: {' '.join(args.overrides) or '(the defaults)'}"
    )
    print("| data | 3 background processes | `-m` (tfhydra launcher) | ratio | same ranking (per round) | samples |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['data']} | {r['article']:.1f} s | {r['sweep']:.1f} s | **{r['ratio']:.2f}x** | "
            f"{r['same_ranking']} | article {r['samples']['article']}, sweep {r['samples']['sweep']} |"
        )
    if args.rss_jobs:
        first, last = worker_memory(args.rss_jobs, args.overrides)
        print(
            f"\none worker, {args.rss_jobs} jobs (seed CNN on digits, 2 epochs, no export): peak RSS after job 1 "
            f"{first:.0f} MB, after job {args.rss_jobs} {last:.0f} MB: **{last / first:.2f}x**"
        )


if __name__ == "__main__":
    main()
