"""k-fold as a sweep (issue 59, item 4; docs/sweeps.md "k-fold"): `-m sweep.folds=K` expands to K jobs per setting,
and the summary groups the jobs that differ only by `data.fold`, ranking the settings by their fold mean. The
expansion and the summary are driven from the command line's parse and from records written by hand (milliseconds);
one small real sweep checks the whole path (slow)."""

import csv
import gzip
import io
import json
from importlib.resources import files

import numpy as np
import pytest
import yaml
from conftest import run_cli
from omegaconf import OmegaConf

from tfhydra.data.splits import hold_out


def expand(*overrides):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from tfhydra.sweep.preflight_checks import jobs_of

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    return jobs_of(parsed, list(overrides), multirun=True)


def test_the_acceptance_command_expands_to_ten_jobs_setting_by_setting():
    jobs = expand("sweep.folds=5", "optimizer.lr=1e-3,1e-4")
    assert len(jobs) == 10
    assert jobs[0] == ["sweep.folds=5", "optimizer.lr=0.001", "data.folds=5", "data.fold=0"]
    assert [(j[1], j[3]) for j in jobs[4:6]] == [
        ("optimizer.lr=0.001", "data.fold=4"),
        ("optimizer.lr=0.0001", "data.fold=0"),
    ]
    assert len(expand("sweep.folds=3")) == 3 and len(expand("optimizer.lr=1e-3,1e-4")) == 2  # no folds: as before


def write_fold_job(sweep, num, lr, fold, best, test, status="completed"):
    overrides = [f"optimizer.lr={lr}", "sweep.folds=3", "data.folds=3", f"data.fold={fold}"]
    job = sweep / f"{num}_optimizer.lr={lr},data.fold={fold}"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (job / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"job": {"num": num}}}))
    record = {
        "schema_version": 2,
        "status": status,
        "history": [{"val_accuracy": best, "val_loss": 1.0 - best}],
        "monitor": "val_accuracy",
        "monitor_mode": "max",
        "overrides": overrides,
        "test": {"split": "test", "examples": 360, "metrics": {"accuracy": test}},
    }
    (job / "metrics.json").write_text(json.dumps(record))


@pytest.fixture
def fold_sweep(tmp_path):
    """`-m sweep.folds=3 optimizer.lr=1,2`: lr=1 has the best single fold (0.99) but the lower mean (0.8); lr=2's
    third fold never started."""
    sweep = tmp_path / "folds"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text(
        yaml.safe_dump(
            {
                "trainer": {"monitor": "val_accuracy", "monitor_mode": "max"},
                "sweep": {"folds": 3},
                "hydra": {
                    "sweeper": {"_target_": "hydra_plugins.tfhydra_basic.basic_sweeper.BasicSweeper", "params": None},
                    "overrides": {"task": ["optimizer.lr=1,2", "sweep.folds=3"]},
                },
            }
        )
    )
    for num, (lr, fold, best, test) in enumerate(
        [(1, 0, 0.99, 0.9), (1, 1, 0.71, 0.7), (1, 2, 0.7, 0.8), (2, 0, 0.9, 0.85), (2, 1, 0.86, 0.87)]
    ):
        write_fold_job(sweep, num, lr, fold, best, test)
    return sweep


def test_the_settings_are_ranked_by_their_fold_mean_and_each_group_names_its_jobs(fold_sweep):
    from tfhydra.sweep.summary import summarize
    from tfhydra.sweep.summary_render import to_csv, to_markdown

    summary = summarize(fold_sweep, write=False)  # the files' text without summary.png (matplotlib's import)
    assert len(summary.jobs) == 6 and summary.counts() == "5 completed, 1 not started"  # the grid's sixth job
    assert summary.jobs[0].name == "0_optimizer.lr=1,data.fold=0"  # the best single job ...
    assert [(g.label, g.rank, g.n, round(g.mean, 4), round(g.std, 4)) for g in summary.groups] == [
        ("optimizer.lr=2", 1, 2, 0.88, 0.0283),  # ... is not the best setting: the fold mean ranks
        ("optimizer.lr=1", 2, 3, 0.8, 0.1646),
    ]
    assert [(round(g.test_mean, 4), round(g.test_std, 4)) for g in summary.groups] == [(0.86, 0.0141), (0.8, 0.1)]
    markdown = to_markdown(summary, plot=False)
    assert "## Settings over folds (jobs that differ only by `data.fold`)" in markdown
    assert "| 1 | `optimizer.lr=2` | 0.88 | 0.02828 | 0.86 ± 0.01414 | 2 | 3_optimizer.lr=2,data.fold=0, " in markdown
    assert "the test split is the same in every job" in markdown
    assert "best setting: optimizer.lr=2 (mean val_accuracy=0.88 ± 0.02828 over 2 folds)" in summary.report()
    rows = list(csv.DictReader(io.StringIO(to_csv(summary))))
    assert [(r["data.fold"], r["group_rank"]) for r in rows[:3]] == [("0", "1"), ("1", "1"), ("2", "1")]
    assert "data.folds=3 data.fold=0" in summary.reproduce(summary.jobs[0])  # a fold job runs alone without sweep.*
    assert "sweep.folds" not in summary.reproduce(summary.jobs[0])


@pytest.mark.slow
def test_a_two_fold_sweep_of_two_rates_runs_four_jobs_on_one_test_split(tmp_path):
    from tfhydra.sweep.summary import summarize

    sweep = tmp_path / "sweep"
    args = [
        "-m",
        "hydra/launcher=basic",
        "sweep.folds=2",
        "optimizer.lr=1e-2,1e-4",
        "model=mlp",
        "trainer.epochs=1",
        "export.formats=[]",
    ]
    result = run_cli(*args, "logging.histogram_freq=0", f"hydra.sweep.dir={sweep}")
    assert result.returncode == 0, result.stderr[-2000:]
    summary = summarize(sweep, write=False)
    assert sorted(j.name for j in summary.jobs) == [
        "0_optimizer.lr=0.01,data.fold=0",
        "1_optimizer.lr=0.01,data.fold=1",
        "2_optimizer.lr=0.0001,data.fold=0",
        "3_optimizer.lr=0.0001,data.fold=1",
    ]
    assert [g.label for g in summary.groups] == ["optimizer.lr=0.01", "optimizer.lr=0.0001"]  # by the fold mean
    means = [g.mean for g in summary.groups]
    assert means[0] > means[1] and summary.groups[0].n == summary.groups[1].n == 2
    records = [json.loads((sweep / j.name / "metrics.json").read_text()) for j in summary.jobs]
    assert {r["test"]["examples"] for r in records} == {360}
    # each job's saved config, split as its job split it: one test split, and each rate's two folds cover the rest
    with files("tfhydra.data").joinpath("digits.csv.gz").open("rb") as raw, gzip.open(raw, "rt") as file:
        labels = np.loadtxt(file, delimiter=",")[:, -1].astype(int)  # read_digits' labels, without importing TensorFlow
    held = {
        j.name: hold_out(labels, OmegaConf.load(sweep / j.name / ".hydra" / "config.yaml").data, 0)
        for j in summary.jobs
    }
    tests = [h.test.tolist() for h in held.values()]
    assert all(t == tests[0] for t in tests) and len(tests[0]) == 360
    for job, record in zip(summary.jobs, records, strict=True):
        assert record["data"]["val_size"] == len(held[job.name].validation)
    first, second = held["0_optimizer.lr=0.01,data.fold=0"], held["1_optimizer.lr=0.01,data.fold=1"]
    assert sorted(first.validation.tolist() + second.validation.tolist()) == sorted(
        first.train.tolist() + first.validation.tolist()
    )
