"""Many drawn feature combinations with a fault each (tests/combinations.py), for a long local run:

    python benchmarks/combinations.py --cases 50 [--seed N]

Prints each case and what happened, and the failures at the end (exit 1 if any). CI runs a few of the same cases
(tests/properties/test_combinations.py); this is the long run the issue asks for, not a timing."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import combinations  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"seed {seed}", flush=True)
    rng, failures = random.Random(seed), []
    for number in range(args.cases):
        case = combinations.draw(rng)  # by the property's rules (combinations.strategies()), seeded
        with tempfile.TemporaryDirectory() as folder:
            try:
                print(
                    f"{number + 1}/{args.cases} {case}: {combinations.check_case(case, Path(folder) / 'out')}",
                    flush=True,
                )
            except AssertionError as error:
                failures.append((case, str(error)))
                print(f"{number + 1}/{args.cases} {case}: FAILED {str(error).splitlines()[0]}", flush=True)
            except Exception:  # noqa: BLE001
                failures.append((case, traceback.format_exc()))
    print(f"{args.cases - len(failures)} passed, {len(failures)} failed (seed {seed})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
