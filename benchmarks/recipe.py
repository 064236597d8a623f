"""`recipe=fast` against the article's recipe (tfhydra's defaults: Adam 1e-3, batch 32, constant rate, 20 epochs).

    python benchmarks/recipe.py [--data digits digits+shifts shifted-synthetic] [--npz PATH ...] [--rounds 1]
                                [--seeds 1 2] [--ablation | --candidates [NAME ...]] [--epochs 20]

For each data set (a proxy) and each seed (`trainer.seed`: the initial weights, the shuffling, the augmentation,
and synthetic data's examples) it alternates, round after round, `python train.py <data>` (the article's recipe)
and `python train.py <data> recipe=fast`, and reads each run's metrics.json: the validation accuracy of every
epoch and its training seconds. The runs are deterministic for a seed, so more seeds say more than more rounds.
It reports, as medians over the seeds and rounds (each run against the article's run of the same seed and round):
  - the article recipe's best accuracy and the training seconds it took to first reach it;
  - the seconds the fast recipe took to first reach that accuracy, and the ratio (goal <= 0.5);
  - both final accuracies, each recipe after its own epochs (goal: the fast recipe's at least 0.5 point higher).
The article's recipe runs `--epochs` (20, tfhydra's default); recipe=fast and the candidates run the epochs they
set (`trainer.epochs` is part of a recipe: its cosine ends at the run's last step), the default's when they set
none.
Time is training time (the sum of the epochs' training seconds up to that epoch): start-up and validation are
the same work in both and are left out. `--ablation` adds, on the same data, recipe=fast with each of its
parts put back to the article's; `--candidates` adds the recipes recipe=fast was chosen among (all of them, or
the names given; the tables in docs/design.md). `--npz PATH ...` adds data kept outside the repository in the
Keras mnist.npz layout (x_train, y_train, x_test, y_test; all of x_train trains, x_test is the validation set),
each file a data set named by its stem: the recipe was chosen on the proxies only, so those sets measure it
without having tuned it (docs/training.md names the held-out sets; benchmarks/held_out_images.py builds them).
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
SHIFTS = "data.augment=[{name:random_translation,height_factor:0.1,width_factor:0.1}]"
SYNTHETIC = ["data=synthetic", "data.shape=[28,28,1]", "data.train_size=4096", "data.val_size=1024"]
DATA = {
    "digits": ["data=digits"],
    # every recipe trains on shifted digits (the proxy's data.augment wins over a recipe's): a proxy for data a user
    # augments (slower to fit, harder to overfit)
    "digits+shifts": ["data=digits", SHIFTS],
    # 4x4-pixel-block patterns at a random place (data.shift): position carries no information
    "shifted-synthetic": [*SYNTHETIC, "data.signal=0.2", "data.shift=3"],
    "synthetic": [*SYNTHETIC, "data.signal=0.15"],
}  # the pixel patterns of the first choice (no shifts)
PROXIES = ["digits", "digits+shifts", "shifted-synthetic"]
SHIFTS_5 = "data.augment=[{name:random_translation,height_factor:0.05,width_factor:0.05}]"
# What recipe=fast was chosen among on the proxies (docs/training.md, docs/design.md), each spelled in full so
# that a later change of conf/recipe/fast.yaml leaves it what it was. Issue 37's round ran 20 epochs:
CANDIDATES = {
    "fast + shifts 10%": ["recipe=fast", SHIFTS, "trainer.epochs=20"],
    "fast + shifts 5%": ["recipe=fast", SHIFTS_5, "trainer.epochs=20"],
    "fast + shifts 10%, peak 5e-3": ["recipe=fast", SHIFTS, "optimizer.lr=5e-3", "trainer.epochs=20"],
}
# issue 58's round: the cosine ends sooner (trainer.epochs is part of the recipe), with larger batches
SHORT = ["recipe=fast", "optimizer.schedule.warmup_epochs=1.0"]
CANDIDATES |= {
    "10 epochs, batch 64, peak 3e-3, shifts 10%": [*SHORT, SHIFTS, "trainer.epochs=10"],
    "8 epochs, batch 64, peak 3e-3, no shifts": [*SHORT, "data.augment=[]", "trainer.epochs=8"],
    "8 epochs, batch 128, peak 4e-3, shifts 10%": [
        *SHORT,
        SHIFTS,
        "data.batch_size=128",
        "optimizer.lr=4e-3",
        "trainer.epochs=8",
    ],
    "8 epochs, batch 128, peak 4e-3, shifts 5%": [
        *SHORT,
        SHIFTS_5,
        "data.batch_size=128",
        "optimizer.lr=4e-3",
        "trainer.epochs=8",
    ],
    "6 epochs, batch 128, peak 5e-3, shifts 5%": [
        *SHORT,
        SHIFTS_5,
        "data.batch_size=128",
        "optimizer.lr=5e-3",
        "trainer.epochs=6",
    ],
    # the second pass: throughput per epoch hardly depends on the batch here, so more steps per epoch are cheap
    "10 epochs, batch 32, peak 2e-3, shifts 10%": [
        *SHORT,
        SHIFTS,
        "data.batch_size=32",
        "optimizer.lr=2e-3",
        "trainer.epochs=10",
    ],
    "10 epochs, batch 32, peak 3e-3, shifts 10%": [
        *SHORT,
        SHIFTS,
        "data.batch_size=32",
        "optimizer.lr=3e-3",
        "trainer.epochs=10",
    ],
    "12 epochs, batch 64, peak 3e-3, shifts 10%": [*SHORT, SHIFTS, "trainer.epochs=12"],
    "8 epochs, batch 32, peak 2e-3, shifts 5%": [
        *SHORT,
        SHIFTS_5,
        "data.batch_size=32",
        "optimizer.lr=2e-3",
        "trainer.epochs=8",
    ],
}
ABLATION = {  # each part of conf/recipe/fast.yaml put back to the article's, and the parts tried and left out
    "constant rate (no schedule)": ["optimizer.schedule.name=constant"],
    "the article's 20 epochs": ["trainer.epochs=20"],
    "no warm-up": ["optimizer.schedule.warmup_epochs=0"],
    "peak rate 1e-3": ["optimizer.lr=1e-3"],
    "batch 64 (issue 37's recipe)": ["data.batch_size=64"],
    "+ label smoothing 0.1": ["trainer.label_smoothing=0.1"],
    "+ augmentation (shifts of 10%)": ["data.augment=[{name:random_translation,height_factor:0.1,width_factor:0.1}]"],
    "+ EMA 0.99": ["trainer.ema.decay=0.99"],
}


RUNS: dict[tuple, dict] = {}  # a deterministic run is trained once: the same settings in two lists share it


def train(overrides: list[str]) -> dict:
    """The last value of a key wins (Hydra refuses a key given twice); a deterministic run is trained once."""
    overrides = list({o.split("=", 1)[0]: o for o in overrides}.values())
    key = tuple(sorted(overrides))
    if key not in RUNS:
        RUNS[key] = train_once(overrides)
    return RUNS[key]


def train_once(overrides: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as run_dir:
        result = subprocess.run(
            [
                sys.executable,
                str(ROOT / "train.py"),
                *overrides,
                "export.formats=[]",
                "logging.histogram_freq=0",
                f"hydra.run.dir={run_dir}",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
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
    return next((t for a, t in zip(run["accuracy"], run["elapsed"], strict=True) if a >= target), float("inf"))


def compare(name: str, data: list[str], rounds: int, variants: dict[str, list[str]], seeds: list[int]) -> list[dict]:
    runs: dict[str, list[dict]] = {variant: [] for variant in variants}
    for round_ in range(rounds):
        for i, seed in enumerate(seeds):
            order = list(variants) if (round_ + i) % 2 == 0 else list(reversed(variants))
            for variant in order:
                runs[variant].append(train(variants[variant] + data + [f"trainer.seed={seed}"]))
                last = runs[variant][-1]
                print(
                    f"{name} round {round_ + 1} seed {seed} {variant}: best {max(last['accuracy']):.4f} (epoch "
                    f"{last['accuracy'].index(max(last['accuracy'])) + 1}) final {last['accuracy'][-1]:.4f} after "
                    f"{len(last['accuracy'])} epochs in {last['elapsed'][-1]:.1f} s",
                    flush=True,
                )
    article = runs["article"]
    rows = []
    for variant, samples in runs.items():
        pairs = list(zip(article, samples, strict=True))
        targets = [max(a["accuracy"]) for a, _ in pairs]
        rows.append(
            {
                "data": name,
                "variant": variant,
                "best": statistics.median(max(s["accuracy"]) for s in samples),
                "final": statistics.median(s["accuracy"][-1] for s in samples),
                "to_article_best": statistics.median(
                    seconds_to(s, t) for (_, s), t in zip(pairs, targets, strict=True)
                ),
                "article_to_best": statistics.median(
                    seconds_to(a, t) for (a, _), t in zip(pairs, targets, strict=True)
                ),
                "total": statistics.median(s["elapsed"][-1] for s in samples),
            }
        )
    return rows


def report(rows: list[dict], epochs: int, rounds: int, seeds: list[int]) -> None:
    print(
        f"\n{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end; the article's recipe "
        f"{epochs} epochs, recipe=fast its own (conf/recipe/fast.yaml's trainer.epochs), "
        f"medians of {rounds} alternated round(s) x seeds {seeds}; seconds are training seconds"
    )
    print(
        "| data | recipe | best val acc | final val acc | s to the article's best (its own) | ratio | "
        "s for all epochs |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        ratio = r["to_article_best"] / r["article_to_best"]
        print(
            f"| {r['data']} | {r['variant']} | {r['best']:.4f} | {r['final']:.4f} | {r['to_article_best']:.1f} "
            f"({r['article_to_best']:.1f}) | {ratio:.2f} | {r['total']:.1f} |"
        )
    for data in dict.fromkeys(r["data"] for r in rows):
        article = next(r for r in rows if r["data"] == data and r["variant"] == "article")
        fast = next(r for r in rows if r["data"] == data and r["variant"] == "recipe=fast")
        ratio = fast["to_article_best"] / article["article_to_best"]
        print(
            f"- {data}: time to the article's best {ratio:.2f}x (goal <= 0.5: {'met' if ratio <= 0.5 else 'not met'});"
            f" final accuracy {fast['final']:.4f} against {article['final']:.4f} "
            f"({'met' if fast['final'] >= article['final'] + 0.005 else 'not met'}: goal >= 0.5 points higher)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="*", default=PROXIES, choices=list(DATA))
    parser.add_argument(
        "--npz", type=Path, nargs="*", default=[], help="outside data in the Keras mnist.npz layout, never tuned on"
    )
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2], help="trainer.seed values (medians over them)")
    parser.add_argument("--epochs", type=int, default=20, help="the article recipe's (tfhydra's default: 20)")
    parser.add_argument("--ablation", action="store_true", help="also recipe=fast with each part put back")
    parser.add_argument(
        "--candidates", nargs="*", choices=list(CANDIDATES), help="also the recipes recipe=fast was chosen among (all)"
    )
    args = parser.parse_args()
    datasets = {name: DATA[name] for name in args.data}
    for npz in args.npz:  # each named by its file
        datasets[npz.stem] = [
            "data=npz",
            f"data.path={npz.resolve()}",
            "data.x_val=x_test",
            "data.y_val=y_test",
            "data.x_test=null",
            "data.y_test=null",
            "data.test_fraction=0",
        ]
    variants = {"article": [f"trainer.epochs={args.epochs}"], "recipe=fast": ["recipe=fast"]}
    if args.ablation:
        variants.update({f"fast, {part}": ["recipe=fast", *overrides] for part, overrides in ABLATION.items()})
    if args.candidates is not None:
        variants.update({name: CANDIDATES[name] for name in args.candidates or CANDIDATES})
    rows = [row for name, data in datasets.items() for row in compare(name, data, args.rounds, variants, args.seeds)]
    report(rows, args.epochs, args.rounds, args.seeds)


if __name__ == "__main__":
    main()
