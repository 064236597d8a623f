"""tfhydra-compare (tfhydra/comparison/): runs found under the directories given, their config differences and
figures in one table, every file read as data. Run directories are written by hand here (a record and a saved
config, as a run leaves them), so the room is exercised in milliseconds; one test reads two real runs."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT
from shared_runs import DIGITS_CNN, DIGITS_MLP, trained_run

from tfhydra.comparison.table import compare
from tfhydra.config.errors import ConfigError
from tfhydra.record.run_record import RunRecord, Status


def _run(folder, lr, accuracy, digest="sha256:aaaa", epochs=3, extra=None):
    folder.mkdir(parents=True)
    record = RunRecord(
        status=Status.COMPLETED, run_dir=str(folder), monitor="val_accuracy", task={"name": "classification"},
        best={"epoch": 2, "val_loss": 0.3, "val_accuracy": accuracy}, epochs_run=epochs,
        test={"examples": 10, "metrics": {"loss": 0.4, "accuracy": accuracy - 0.01}},
        train_seconds_per_epoch=[2.0, 1.0, 1.0], examples_per_second=1000.0,
        data={"name": "csv", **({"digest": digest} if digest != "old" else {})},
    )  # fmt: skip
    (folder / "metrics.json").write_text(json.dumps(dataclasses.asdict(record), default=str))
    config = {"model": {"name": "mlp", "units": [64, 32]}, "optimizer": {"lr": lr}, "data": {"path": "/d/t.csv"},
              "trainer": {"epochs": epochs}, **(extra or {})}  # fmt: skip
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    return folder


@pytest.fixture
def runs(tmp_path):
    sweep = tmp_path / "sweep"
    _run(sweep / "0_optimizer.lr=0.001", 0.001, 0.91)
    _run(sweep / "1_optimizer.lr=0.01", 0.01, 0.95)
    single = _run(tmp_path / "single", 0.001, 0.80, digest="sha256:bbbb", epochs=5)
    old = _run(tmp_path / "old", 0.001, 0.70, digest="old")
    return tmp_path, sweep, single, old


def test_only_the_keys_that_differ_are_columns_and_the_figures_follow(runs):
    tmp_path, sweep, single, old = runs
    table = compare([sweep, single, old])
    assert table.columns == [
        "run", "status", "optimizer.lr", "trainer.epochs", "val_accuracy", "test_accuracy", "epochs", "best_epoch",
        "seconds_to_best", "examples_per_second", "stop_reason", "data",
    ]  # fmt: skip
    assert [r["optimizer.lr"] for r in table.rows] == [0.001, 0.01, 0.001, 0.001]
    assert [r["val_accuracy"] for r in table.rows] == [0.91, 0.95, 0.80, 0.70]
    assert table.rows[0]["seconds_to_best"] == 3.0 and table.rows[0]["test_accuracy"] == pytest.approx(0.90)
    # the same data source with another digest is marked; a record from before digests says unknown
    assert [r["data"] for r in table.rows] == ["sha256:aaaa *", "sha256:aaaa *", "sha256:bbbb *", "unknown"]
    assert any(n.startswith("* data changed: csv at /d/t.csv") for n in table.notes)
    best_first = table.sorted_by("val_accuracy", descending=True)
    assert [r["val_accuracy"] for r in best_first.rows] == [0.95, 0.91, 0.80, 0.70]
    with pytest.raises(ConfigError, match="^--sort=nope: no such"):
        table.sorted_by("nope")
    assert table.to_csv().splitlines()[0] == ",".join(table.columns)
    assert table.to_markdown().splitlines()[1] == "|" + "---|" * len(table.columns)


def test_a_hostile_directory_is_read_as_data(tmp_path):
    run = _run(tmp_path / "r", 0.001, 0.9, extra={"evil": "${oc.env:HOME}"})
    (run / ".hydra" / "config.yaml").write_text(
        (run / ".hydra" / "config.yaml").read_text() + "tag: !!python/object/apply:os.system ['touch pwned']\n"
    )
    other = _run(tmp_path / "s", 0.01, 0.9)
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "metrics.json").write_text("[" * 100_000)
    table = compare([run, other, tmp_path / "big", tmp_path / "nothing"])
    assert not (tmp_path / "pwned").exists() and len(table.rows) == 2
    assert table.rows[0]["optimizer.lr"] == "(unset)"  # its config is not plain YAML: nothing of it is read, or run
    assert any(n.endswith("its saved config is not plain YAML: its keys are not compared") for n in table.notes)
    assert any("big: its record is not readable" in n for n in table.notes)
    assert any(n.startswith(f"{tmp_path / 'nothing'}: no run record here") for n in table.notes)


def test_the_command_prints_a_table_csv_and_one_line_errors(runs):
    tmp_path, sweep, single, old = runs
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def command(*args):
        return subprocess.run(
            [sys.executable, "-m", "tfhydra.comparison", *args], capture_output=True, text=True, timeout=60, env=env
        )

    shown = command(str(sweep), str(single), "--sort", "val_accuracy", "--desc")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split()[:3] == ["run", "status", "optimizer.lr"] and "1_optimizer.lr=0.01" in lines[1]
    as_csv = command(str(sweep), "--format", "csv")
    assert as_csv.stdout.splitlines()[0].startswith("run,status,optimizer.lr,val_accuracy")
    wrong = command(str(sweep), "--sort", "nope")
    assert (
        wrong.returncode == 1 and wrong.stderr.startswith("Error: --sort=nope") and len(wrong.stderr.splitlines()) == 1
    )
    assert "tensorflow" not in sys.modules or True  # the command's own process imports none: checked below
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, tfhydra.comparison.cli; print('tensorflow' in sys.modules)"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert probe.stdout.strip() == "False"


@pytest.mark.slow
def test_two_real_runs_differ_by_their_model(tmp_path_factory):
    import tfhydra

    cnn, mlp = trained_run(tmp_path_factory, *DIGITS_CNN), trained_run(tmp_path_factory, *DIGITS_MLP)
    table = tfhydra.compare([cnn, mlp])
    assert "model.name" in table.columns and "trainer.epochs" not in table.columns  # both ran 2 epochs
    assert [r["model.name"] for r in table.rows] == ["auto", "mlp"]  # DIGITS_CNN: auto, the seed CNN
    records = [json.loads((d / "metrics.json").read_text()) for d in (cnn, mlp)]
    assert [r["test_accuracy"] for r in table.rows] == [rec["test"]["metrics"]["accuracy"] for rec in records]
    assert [r["data"] for r in table.rows] == ["(no path)", "(no path)"]  # the bundled digits
    assert table._repr_markdown_().startswith("| run | status |")
