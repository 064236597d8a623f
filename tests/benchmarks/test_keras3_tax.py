"""benchmarks/keras3_tax.py in a tiny mode: the hand-written Keras 3 script and `python train.py keras=3` train the
same weights on the same batches and reach the same metrics, or the benchmark's ratios would compare different
work. Timing is not asserted (a loaded machine must not fail the suite), so the two processes run side by side here
rather than alternated; keras=2 is left out (its initial weights differ)."""

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import ROOT

sys.path.append(str(ROOT / "benchmarks"))  # after tests/: its combinations.py is not the tests' own
import keras3_tax  # noqa: E402


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_keras3_script_and_keras3_run_reach_the_same_metrics():
    args = argparse.Namespace(rounds=1, epochs=2, keras2=False)
    with ThreadPoolExecutor(2) as pool:
        started = {side: pool.submit(run) for side, run in keras3_tax.runs(args).items()}
        summary = keras3_tax.summarise({side: [future.result()] for side, future in started.items()})
    hand, tfhydra = summary["metrics"]["A"], summary["metrics"]["B"]
    assert sorted(summary["metrics"]) == ["A", "B"] and hand.keys() == tfhydra.keys()
    assert summary["comparable"], (hand, tfhydra)
    for name in hand:  # the same initial weights and batches: equal but for threads' summation order
        assert tfhydra[name] == pytest.approx(hand[name], abs=1e-3), (name, hand[name], tfhydra[name])
    assert hand["val_accuracy"] > 0.5 and hand["test_accuracy"] > 0.5  # learnt something (chance: 0.1)
    report = keras3_tax.section(summary, args, (0.0, 0.0), 0.0)
    assert "### A hand-written Keras 3 script against keras=3" in report and "| val_accuracy |" in report
