"""A CSV streams with flat memory (issue 57): peak RSS and training examples/s at 1x and 8x the data.

Writes a numeric table (`--rows` rows x `--columns` float columns + a 10-class integer label; 8x by default
1,600,000 rows, about 0.9 GB) under /tmp (removed at the end), then, for each size, alternated pairs of
    python train.py data=csv data.path=CSV data.label=label model=mlp trainer.epochs=1 data.batch_size=256
        export.formats=[] logger=[]
and the hand-written tf.data pipeline benchmarks/csv_reference.py (CsvDataset, the same split shares, MLP,
optimizer and steps_per_execution). Each tfhydra run starts with an empty CSV index (TFHYDRA_CACHE_DIR of its
own), so it pays for the streaming passes (line scan, labels, training statistics) as the script pays for its
statistics pass; `--warm` keeps one index for all runs instead.

    python benchmarks/csv_stream.py [--rows 200000] [--columns 32] [--factors 1,8] [--pairs 2] [--warm]

Peak RSS: the child's ru_maxrss (os.wait4). examples/s: the record's examples_per_second (training examples over
the training seconds), the script's the same way. Acceptance: tfhydra's peak RSS at the largest size within 1.25x
of the smallest's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from data_scale import measured  # noqa: E402  (a sibling script, not a package)


def write_table(path: Path, rows: int, columns: int, seed: int = 0) -> None:
    """`rows` rows of `columns` normal floats (6 significant digits) and a label in 0..9 that depends on them."""
    rng = np.random.default_rng(seed)
    weights = rng.normal(size=(columns, 10))
    with open(path, "w") as file:
        file.write(",".join([*(f"f{i}" for i in range(columns)), "label"]) + "\n")
        for start in range(0, rows, 50_000):
            x = rng.normal(size=(min(50_000, rows - start), columns))
            label = (x @ weights + rng.normal(size=(len(x), 10))).argmax(axis=1)
            np.savetxt(file, np.column_stack([x, label]), fmt=["%.6g"] * columns + ["%d"], delimiter=",")


def tfhydra_run(csv: Path, run_dir: Path, env: dict, batch_size: int) -> dict:
    command = [
        sys.executable,
        "train.py",
        "data=csv",
        f"data.path={csv}",
        "data.label=label",
        "model=mlp",
        "trainer.epochs=1",
        f"data.batch_size={batch_size}",
        "export.formats=[]",
        "logger=[]",
        f"hydra.run.dir={run_dir}",
    ]
    started = time.time()
    rss, _, code = measured(command, env)
    record = json.loads((run_dir / "metrics.json").read_text()) if (run_dir / "metrics.json").exists() else {}
    first = record.get("first_step_unix_time")
    return {
        "peak_rss_mb": rss / 1e6,
        "wall_s": time.time() - started,
        "first_step_s": first - started if first else None,
        "examples_per_s": record.get("examples_per_second"),
        "exit": code,
    }


def reference_run(csv: Path, rows: int, columns: int, scratch: Path, env: dict, batch_size: int) -> dict:
    out = scratch / "reference.json"
    started = time.time()
    rss, _, code = measured(
        [sys.executable, str(ROOT / "benchmarks" / "csv_reference.py"), str(csv), str(rows), str(columns), str(out),
         f"--batch-size={batch_size}"],
        env,
    )  # fmt: skip
    result = json.loads(out.read_text()) if out.exists() else {}
    return {
        "peak_rss_mb": rss / 1e6,
        "wall_s": time.time() - started,
        "first_step_s": result["first_step_unix_time"] - started if result else None,
        "examples_per_s": result.get("examples_per_second"),
        "exit": code,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the 1x table")
    parser.add_argument("--columns", type=int, default=32)
    parser.add_argument("--factors", default="1,8", help="sizes, as multiples of --rows (comma-separated)")
    parser.add_argument("--pairs", type=int, default=2, help="alternated tfhydra/script pairs per size")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--warm", action="store_true", help="one CSV index for every run (the passes run once)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="tfhydra-csv-stream-", dir="/tmp"))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TFHYDRA_CACHE_DIR": str(scratch / "cache")}
    results: dict[int, dict[str, list[dict]]] = {}
    try:
        for factor in (int(f) for f in args.factors.split(",")):
            rows = args.rows * factor
            csv = scratch / f"table-{rows}.csv"
            write_table(csv, rows, args.columns)
            print(f"{rows} rows, {csv.stat().st_size / 1e6:.0f} MB, load {os.getloadavg()[0]:.2f}", flush=True)
            results[rows] = {"tfhydra": [], "script": []}
            for pair in range(args.pairs):
                run_env = env if args.warm else {**env, "TFHYDRA_CACHE_DIR": str(scratch / f"cache-{rows}-{pair}")}
                runs = {
                    "tfhydra": (tfhydra_run, (csv, scratch / f"run-{rows}-{pair}", run_env, args.batch_size)),
                    "script": (reference_run, (csv, rows, args.columns, scratch, env, args.batch_size)),
                }
                for name in list(runs) if pair % 2 == 0 else list(runs)[::-1]:
                    function, arguments = runs[name]
                    results[rows][name].append(function(*arguments))
                    print(name, json.dumps(results[rows][name][-1]), flush=True)
            csv.unlink()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report(results)


def report(results: dict[int, dict[str, list[dict]]]) -> None:
    def median(runs: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in runs if r[key] is not None)

    print(
        "\n| rows | tfhydra peak RSS MB | script peak RSS MB | tfhydra ex/s | script ex/s | ratio ex/s "
        "| tfhydra wall s |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for rows, sides in results.items():
        ours, script = sides["tfhydra"], sides["script"]
        print(
            f"| {rows:,} | {median(ours, 'peak_rss_mb'):.0f} | {median(script, 'peak_rss_mb'):.0f} | "
            f"{median(ours, 'examples_per_s'):,.0f} | {median(script, 'examples_per_s'):,.0f} | "
            f"{median(ours, 'examples_per_s') / median(script, 'examples_per_s'):.2f} | {median(ours, 'wall_s'):.1f} |"
        )
    sizes = list(results)
    if len(sizes) > 1:
        growth = median(results[sizes[-1]]["tfhydra"], "peak_rss_mb") / median(
            results[sizes[0]]["tfhydra"], "peak_rss_mb"
        )
        print(f"\ntfhydra peak RSS {sizes[-1]:,} rows / {sizes[0]:,} rows: {growth:.3f}x (acceptance: <= 1.25x)")


if __name__ == "__main__":
    main()
