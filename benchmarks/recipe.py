"""`recipe=fast` against the article's recipe (tfhydra's defaults: Adam 1e-3, batch 32, constant rate), 20 epochs.

    python benchmarks/recipe.py [--data digits synthetic] [--npz PATH] [--rounds 2] [--ablation] [--epochs 20]

For each data set it alternates, round after round, `python train.py <data>` (the article's recipe) and
`python train.py <data> recipe=fast`, and reads each run's metrics.json: the validation accuracy of every
epoch and its training seconds. It reports, as medians over the rounds:
  - the article recipe's best accuracy and the training seconds it took to first reach it;
  - the seconds the fast recipe took to first reach that accuracy, and the ratio (goal <= 0.5);
  - both final accuracies after the same epochs (goal: the fast recipe's higher).
Time is training time (the sum of the epochs' training seconds up to that epoch): start-up and validation are
the same work in both and are left out. `--ablation` adds, on the same data, recipe=fast with each of its
parts put back to the article's (the table in docs/training.md). `--npz PATH` adds data kept outside the
repository in the Keras mnist.npz layout (x_train, y_train, x_test, y_test): the recipe was chosen on digits
and synthetic data only, so that set measures it without having tuned it.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = {"digits": ["data=digits"],
        "synthetic": ["data=synthetic", "data.shape=[28,28,1]", "data.train_size=4096", "data.val_size=1024",
                      "data.signal=0.15"]}
ABLATION = {  # each part of conf/recipe/fast.yaml put back to the article's, and the parts tried and left out
    "constant rate (no schedule)": ["optimizer.schedule.name=constant"],
    "no warm-up": ["optimizer.schedule.warmup_epochs=0"],
    "peak rate 1e-3": ["optimizer.lr=1e-3"],
    "batch 32": ["data.batch_size=32"],
    "+ label smoothing 0.1": ["trainer.label_smoothing=0.1"],
    "+ augmentation (shifts of 10%)": ["data.augment=[{name:random_translation,height_factor:0.1,width_factor:0.1}]"],
    "+ EMA 0.99": ["trainer.ema.decay=0.99"],
}


def train(overrides: list[str], epochs: int) -> dict:
    with tempfile.TemporaryDirectory() as run_dir:
        result = subprocess.run([sys.executable, str(ROOT / "train.py"), *overrides, f"trainer.epochs={epochs}",
                                 "export.formats=[]", "logging.histogram_freq=0", f"hydra.run.dir={run_dir}"],
                                cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if result.returncode:
            sys.exit(f"{' '.join(overrides)} failed:\n{result.stderr[-3000:]}")
        record = json.loads((Path(run_dir) / "metrics.json").read_text())
    accuracy = [epoch["val_accuracy"] for epoch in record["history"]]
    elapsed, total = [], 0.0
    for seconds in record["train_seconds_per_epoch"]:
        total += seconds
        elapsed.append(total)
    return {"accuracy": accuracy, "elapsed": elapsed}


def seconds_to(run: dict, target: float) -> float:
    """Training seconds until the first epoch at or above `target` (inf when never)."""
    return next((t for a, t in zip(run["accuracy"], run["elapsed"]) if a >= target), float("inf"))


def compare(name: str, data: list[str], rounds: int, epochs: int, variants: dict[str, list[str]]) -> list[dict]:
    runs: dict[str, list[dict]] = {variant: [] for variant in variants}
    for round_ in range(rounds):
        order = list(variants) if round_ % 2 == 0 else list(reversed(variants))
        for variant in order:
            runs[variant].append(train(data + variants[variant], epochs))
            last = runs[variant][-1]
            print(f"{name} round {round_ + 1} {variant}: best {max(last['accuracy']):.4f} final "
                  f"{last['accuracy'][-1]:.4f} in {last['elapsed'][-1]:.1f} s", flush=True)
    article = runs["article"]
    rows = []
    for variant, samples in runs.items():
        pairs = list(zip(article, samples))
        targets = [max(a["accuracy"]) for a, _ in pairs]
        rows.append({"data": name, "variant": variant,
                     "best": statistics.median(max(s["accuracy"]) for s in samples),
                     "final": statistics.median(s["accuracy"][-1] for s in samples),
                     "to_article_best": statistics.median(seconds_to(s, t) for (_, s), t in zip(pairs, targets)),
                     "article_to_best": statistics.median(seconds_to(a, t) for (a, _), t in zip(pairs, targets)),
                     "total": statistics.median(s["elapsed"][-1] for s in samples)})
    return rows


def report(rows: list[dict], epochs: int, rounds: int) -> None:
    print(f"\n{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end; {epochs} epochs, "
          f"medians of {rounds} alternated rounds; seconds are training seconds")
    print("| data | recipe | best val acc | final val acc | s to the article's best (its own) | ratio | "
          "s for all epochs |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        ratio = r["to_article_best"] / r["article_to_best"]
        print(f"| {r['data']} | {r['variant']} | {r['best']:.4f} | {r['final']:.4f} | {r['to_article_best']:.1f} "
              f"({r['article_to_best']:.1f}) | {ratio:.2f} | {r['total']:.1f} |")
    for data in dict.fromkeys(r["data"] for r in rows):
        article = next(r for r in rows if r["data"] == data and r["variant"] == "article")
        fast = next(r for r in rows if r["data"] == data and r["variant"] == "recipe=fast")
        ratio = fast["to_article_best"] / article["article_to_best"]
        print(f"- {data}: time to the article's best {ratio:.2f}x (goal <= 0.5: {'met' if ratio <= 0.5 else 'not met'});"
              f" final accuracy {fast['final']:.4f} against {article['final']:.4f} "
              f"({'met' if fast['final'] > article['final'] else 'not met'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="*", default=list(DATA), choices=list(DATA))
    parser.add_argument("--npz", type=Path, help="outside data in the Keras mnist.npz layout, never tuned on")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--ablation", action="store_true", help="also recipe=fast with each part put back")
    args = parser.parse_args()
    datasets = {name: DATA[name] for name in args.data}
    if args.npz:
        datasets["outside"] = ["data=npz", f"data.path={args.npz.resolve()}"]
    variants = {"article": [], "recipe=fast": ["recipe=fast"]}
    if args.ablation:
        variants.update({f"fast, {part}": ["recipe=fast", *overrides] for part, overrides in ABLATION.items()})
    rows = [row for name, data in datasets.items() for row in compare(name, data, args.rounds, args.epochs, variants)]
    report(rows, args.epochs, args.rounds)


if __name__ == "__main__":
    main()
