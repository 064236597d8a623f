"""Compare two commits where a user waits: B/A ratios from alternated pairs, in one invocation.

    python benchmarks/compare_commits.py A B [--pairs 5] [--npz PATH] [--only whole_run stream recipe csv]
                                         [--examples 40000] [--epochs 5] [--recipe-epochs 10]
                                         [--csv-rows 442 100000]

asv's idea on this project's own benchmarks. Each commit is checked out in a git work tree of its own (under a
temporary directory, removed at the end), and every command of a side runs with that tree first on `PYTHONPATH`
and as its working directory. Before anything is timed, each side proves where its code comes from: `tfhydra` and
`hydra_plugins.tfhydra_conf` must be imported from its own tree (an editable install of the checkout, or a stale
`.pth`, would otherwise measure the same code twice). Both sides run on this venv's Python, so the two commits must
declare the same dependencies (pyproject.toml's `[project]` dependencies and extras): when they differ the script
refuses and names what differs (measure each in its own venv instead).

Benchmarks, each pair alternating the order (A then B, then B then A):
  whole_run  `python train.py model=cnn data=npz data.path=NPZ trainer.epochs=5 data.batch_size=64` (the default
             run: validation, TensorBoard with histograms, best weights, one test pass, both SavedModels):
             whole-process wall, training examples/s and time to the first step (metrics.json).
  stream     `python train.py model=mlp data=tfrecord data.encoding=raw` over 8 shards of 32x32x3 raw-uint8
             records (`--examples`), one epoch, no export: training examples/s.
  recipe     `recipe=fast` against the default recipe on digits, `--recipe-epochs` each: the training seconds the
             fast recipe takes to first reach the default's best validation accuracy, over the default's own time
             to it (the recipe's time-to-best ratio; lower is better).
  csv        `python train.py model=mlp data=csv` on generated numeric tables of `--csv-rows` rows (10 float columns
             and a 3-class label; 442 rows is the diabetes table's size), `--epochs` epochs, no export, no logger:
             whole-process wall and training examples/s, per table size; every run with an empty CSV index.
Without `--npz`, whole_run trains on digits (bundled). The ratios B/A are what to read (a shared machine is noisy):
the median over the pairs, with the smallest and largest. Machine load is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own dependency
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ("whole_run", "stream", "recipe", "csv")
LOWER_IS_BETTER = {"wall_s", "first_step_s", "recipe_time_ratio"}  # and every figure ending in _wall_s


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def dependencies(commit: str, repo: Path = ROOT) -> dict:
    """What the commit's pyproject.toml asks to be installed: `[project]` dependencies and optional extras."""
    project = tomllib.loads(git("show", f"{commit}:pyproject.toml", cwd=repo)).get("project", {})
    return {"dependencies": sorted(project.get("dependencies", [])), **{
        f"extra {name}": sorted(pins) for name, pins in project.get("optional-dependencies", {}).items()
    }}  # fmt: skip


def refuse_other_dependencies(a: str, b: str, repo: Path = ROOT) -> None:
    deps_a, deps_b = dependencies(a, repo), dependencies(b, repo)
    differ = [key for key in sorted(set(deps_a) | set(deps_b)) if deps_a.get(key) != deps_b.get(key)]
    if differ:
        sys.exit(
            f"compare_commits: {a} and {b} declare different dependencies ({', '.join(differ)}): one venv cannot run "
            "both as their users would; measure each in a venv of its own"
        )


class Side:
    """One commit in its own work tree, run with that tree first on the path."""

    def __init__(self, label: str, commit: str, base: Path) -> None:
        self.label, self.commit = label, git("rev-parse", commit)
        self.tree = base / label
        git("worktree", "add", "--detach", str(self.tree), self.commit)
        self.env = {**os.environ, "PYTHONPATH": str(self.tree)}

    def check_imports(self) -> None:
        """`tfhydra` and its Hydra plugin from this side's tree, or the comparison would measure other code."""
        probe = (
            "import json, tfhydra, hydra_plugins.tfhydra_conf as p; print(json.dumps([tfhydra.__file__, p.__file__]))"
        )
        found = json.loads(self.run([sys.executable, "-c", probe]).stdout.strip().splitlines()[-1])
        outside = [path for path in found if not Path(path).resolve().is_relative_to(self.tree.resolve())]
        if outside:
            sys.exit(f"compare_commits: side {self.label} ({self.commit[:10]}) imports {outside} from outside its tree")

    def run(self, command: list[str]) -> subprocess.CompletedProcess:
        result = subprocess.run(command, cwd=self.tree, env=self.env, capture_output=True, text=True)
        if result.returncode:
            sys.exit(f"compare_commits: side {self.label}: {' '.join(command)} failed:\n{result.stderr[-3000:]}")
        return result

    def train(self, run_dir: Path, *overrides: str) -> tuple[float, dict]:
        """(whole-process wall seconds, metrics.json) of one `python train.py` of this side."""
        started = time.perf_counter()
        self.run([sys.executable, "train.py", *overrides, f"hydra.run.dir={run_dir}"])
        wall = time.perf_counter() - started
        record = json.loads((run_dir / "metrics.json").read_text())
        return wall, {**record, "_started": time.time() - wall}

    def remove(self) -> None:
        git("worktree", "remove", "--force", str(self.tree))


def whole_run(side: Side, out: Path, args) -> dict:
    data = ["data=npz", f"data.path={args.npz}"] if args.npz else ["data=digits"]
    wall, record = side.train(
        out, "model=cnn", *data, f"trainer.epochs={args.epochs}", "data.batch_size=64", "optimizer.lr=1e-3"
    )
    return {
        "wall_s": wall,
        "examples_per_s": record["examples_per_second"],
        "first_step_s": record.get("time_to_first_step_seconds"),
    }


def stream(side: Side, out: Path, args) -> dict:
    train, val, _ = args.shards
    _, record = side.train(
        out,
        "model=mlp",
        "data=tfrecord",
        f"data.train={train}",
        f"data.validation={val}",
        "data.encoding=raw",
        "data.raw_shape=[32,32,3]",
        "data.test_fraction=0",
        "trainer.epochs=1",
        "data.batch_size=128",
        "export.formats=[]",
    )
    return {"stream_examples_per_s": record["examples_per_second"]}


def csv(side: Side, out: Path, args) -> dict:
    """Each run with an empty CSV index of its own (TFHYDRA_CACHE_DIR): the streaming passes are paid every time."""
    figures, env = {}, side.env
    side.env = {**env, "TFHYDRA_CACHE_DIR": str(out / "cache")}
    for rows, path in args.tables:
        wall, record = side.train(
            out / str(rows),
            "model=mlp",
            "data=csv",
            f"data.path={path}",
            "data.label=label",
            f"trainer.epochs={args.epochs}",
            "export.formats=[]",
            "logger=[]",
        )
        figures |= {f"csv{rows}_wall_s": wall, f"csv{rows}_examples_per_s": record["examples_per_second"]}
    side.env = env
    return figures


def write_tables(folder: Path, sizes: list[int]) -> list[tuple[int, str]]:
    """(rows, path) of numeric CSVs: 10 normal float columns and a label in 0..2 that depends on them."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    rng, tables = np.random.default_rng(0), []
    for rows in sizes:
        x = rng.normal(size=(rows, 10))
        label = (x[:, :3] + rng.normal(size=(rows, 3))).argmax(axis=1)
        path = folder / f"table-{rows}.csv"
        header = ",".join([*(f"f{i}" for i in range(10)), "label"])
        np.savetxt(
            path, np.column_stack([x, label]), fmt=["%.6g"] * 10 + ["%d"], delimiter=",", header=header, comments=""
        )
        tables.append((rows, str(path)))
    return tables


def time_to(record: dict, target: float) -> float | None:
    """Training seconds until the first epoch whose val_accuracy reaches `target`."""
    spent = 0.0
    for seconds, logs in zip(record["train_seconds_per_epoch"], record["history"], strict=False):
        spent += seconds
        if logs.get("val_accuracy", -1.0) >= target:
            return spent
    return None


def recipe(side: Side, out: Path, args) -> dict:
    epochs = f"trainer.epochs={args.recipe_epochs}"
    _, default = side.train(out / "default", "data=digits", epochs)
    _, fast = side.train(out / "fast", "data=digits", epochs, "recipe=fast")
    target = max(logs["val_accuracy"] for logs in default["history"])
    reached = time_to(fast, target)
    return {"recipe_time_ratio": (reached / time_to(default, target)) if reached is not None else float("inf")}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--npz", help="an MNIST-layout npz for whole_run (default: digits)")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, default=["whole_run", "stream"])
    parser.add_argument("--examples", type=int, default=40000, help="stream: training records")
    parser.add_argument("--epochs", type=int, default=5, help="whole_run: epochs")
    parser.add_argument("--recipe-epochs", type=int, default=10)
    parser.add_argument("--csv-rows", type=int, nargs="+", default=[442, 100000], help="csv: the tables' rows")
    args = parser.parse_args()
    args.npz = str(Path(args.npz).resolve()) if args.npz else None
    refuse_other_dependencies(args.a, args.b)
    with tempfile.TemporaryDirectory(prefix="compare-commits-") as temp:
        base = Path(temp)
        sides = [Side("A", args.a, base), Side("B", args.b, base)]
        try:
            for side in sides:
                side.check_imports()
            if "stream" in args.only:
                sys.path.insert(0, str(ROOT / "benchmarks"))
                from data_scale import write_shards

                args.shards = write_shards(base / "records", args.examples)
            if "csv" in args.only:
                args.tables = write_tables(base / "tables", args.csv_rows)
            print(f"A {sides[0].commit[:10]}  B {sides[1].commit[:10]}  pairs {args.pairs}  load {load()}", flush=True)
            figures: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
            for pair in range(args.pairs):
                for side in sides if pair % 2 == 0 else sides[::-1]:
                    for name in args.only:
                        out = base / "runs" / f"{side.label}{pair}-{name}"
                        for key, value in globals()[name](side, out, args).items():
                            figures[side.label].setdefault(key, []).append(value)
                print(f"pair {pair + 1}/{args.pairs} done, load {load()}", flush=True)
        finally:
            for side in sides:
                side.remove()
    report(figures, sides)


def report(figures: dict, sides: list[Side]) -> None:
    print(f"\n| figure | A {sides[0].commit[:10]} | B {sides[1].commit[:10]} | B/A median (min-max) | better |")
    print("|---|---|---|---|---|")
    for key, a_values in figures["A"].items():
        b_values = figures["B"][key]
        ratios = [b / a for a, b in zip(a_values, b_values, strict=True) if a and b is not None]
        better = "lower" if key in LOWER_IS_BETTER or key.endswith("_wall_s") else "higher"
        print(
            f"| {key} | {statistics.median(a_values):.4g} | {statistics.median(b_values):.4g} | "
            f"{statistics.median(ratios):.3f}x ({min(ratios):.3f}-{max(ratios):.3f}) | {better} |"
        )


if __name__ == "__main__":
    main()
