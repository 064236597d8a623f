"""benchmarks/task_tax.py in a tiny mode: both sides of each task (tfhydra and the hand-written Keras script) train
and reach the same metrics, or the benchmark's ratios would compare different work. Timing is not asserted."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_both_sides_of_each_task_reach_the_same_metrics(tmp_path):
    out = tmp_path / "summaries.json"
    result = subprocess.run(
        [sys.executable, "benchmarks/task_tax.py", "--rounds", "1", "--epochs", "2", "--train-size", "1024"]
        + ["--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=850,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summaries = {s["task"]: s for s in json.loads(out.read_text())}
    assert sorted(summaries) == ["multilabel", "regression"]
    for task, summary in summaries.items():
        hand, tfhydra = summary["metrics"]["A"], summary["metrics"]["B"]
        assert summary["comparable"], (task, hand, tfhydra)
        assert hand.keys() == tfhydra.keys()
        for name in hand:
            assert abs(hand[name] - tfhydra[name]) <= summary["tolerance"], (task, name, hand[name], tfhydra[name])
        assert all(summary["ratios"][f]["median"] > 0 for f in ("throughput", "wall", "cpu"))
    regression, multilabel = summaries["regression"]["metrics"], summaries["multilabel"]["metrics"]
    # learnt something, both sides: explained variance on held-out targets, ranking of held-out labels
    assert regression["A"]["test_r2"] > 0.1 and regression["B"]["test_r2"] > 0.1
    assert multilabel["A"]["test_auc"] > 0.65 and multilabel["B"]["test_auc"] > 0.65  # chance: 0.5
    assert "### regression" in result.stdout and "### multilabel" in result.stdout
