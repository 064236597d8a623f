"""Training throughput against `trainer.steps_per_execution`, both loops, measured side by side.

    python benchmarks/steps_per_execution.py [--rounds 3] [--epochs 4] [--values 1,4,16]

Runs are alternated (1, 4, 16, 1, 4, 16, ...) in one process so load on a shared machine
spreads over every setting; the figure is the median `examples_per_second` of each
setting (training phase only, first epoch excluded), reported relative to 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from hydra import compose, initialize_config_dir

import tfhydra

CONFIG_DIR = Path(__file__).resolve().parents[1] / "conf"


def measure(loop: str, spe: int, epochs: int, extra: list[str]) -> float:
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                f"trainer.loop={loop}",
                f"trainer.steps_per_execution={spe}",
                f"trainer.epochs={epochs}",
                "logging.histogram_freq=0",
                *extra,
            ],
        )
    with tempfile.TemporaryDirectory() as run_dir:
        tfhydra.run(cfg, run_dir=run_dir)
        return json.loads((Path(run_dir) / "metrics.json").read_text())["examples_per_second"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--values", default="1,4,16")
    parser.add_argument("--loops", default="fit,custom")
    parser.add_argument("overrides", nargs="*", help="extra overrides, e.g. data=synthetic")
    args = parser.parse_args()
    values = [int(v) for v in args.values.split(",")]
    for loop in args.loops.split(","):
        samples = {v: [] for v in values}
        for _ in range(args.rounds):
            for v in values:
                samples[v].append(measure(loop, v, args.epochs, args.overrides))
        base = statistics.median(samples[values[0]])
        print(f"\nloop={loop} ({args.rounds} rounds, {args.epochs} epochs, {' '.join(args.overrides) or 'defaults'})")
        print("| steps_per_execution | median examples/s | vs 1 | samples |\n|---|---|---|---|")
        for v in values:
            median = statistics.median(samples[v])
            print(f"| {v} | {median:,.0f} | {median / base:.2f}x | {', '.join(f'{s:,.0f}' for s in samples[v])} |")


if __name__ == "__main__":
    main()
