"""export/README.md, the model card (tfhydra/export/card.py): written from the record, its figures the record's,
and shown by `tfhydra-predict RUN_DIR --info` without a model or TensorFlow."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT, TESTS
from shared_runs import DIGITS_CNN, trained_run

from tfhydra.export.card import model_card, write_card
from tfhydra.record.run_record import RunRecord, Status


def _record(**changes) -> RunRecord:
    record = RunRecord(
        status=Status.COMPLETED,
        run_dir="/runs/r1",
        overrides=["model=mlp", "trainer.epochs=3"],
        monitor="val_accuracy",
        model="mlp",
        params=52650,
        data={
            "name": "digits",
            "input_shape": [28, 28, 1],
            "class_names": list("0123456789"),
            "train_size": 1077,
            "val_size": 360,
            "test_size": 360,
        },
        task={"name": "classification"},
        best={"epoch": 2, "val_loss": 0.31, "val_accuracy": 0.9111},
        test={"examples": 360, "metrics": {"loss": 0.3333, "accuracy": 0.9028}, "weights": {"epoch": 2}},
        exports={"saved_model": "export/saved_model"},
        versions={"tensorflow": "2.21.0"},
    )
    for key, value in changes.items():
        setattr(record, key, value)
    return record


def test_the_card_says_what_the_record_says(tmp_path):
    card = model_card(_record(), "python train.py model=mlp trainer.epochs=3")
    assert "| accuracy | 0.9028 |" in card and "| loss | 0.3333 |" in card
    assert "epoch 2, val_loss=0.31, val_accuracy=0.9111" in card and "1077 train / 360 val / 360 test" in card
    assert "python train.py model=mlp trainer.epochs=3" in card and "mlp (52,650 parameters)" in card
    assert "No test split" in model_card(_record(test=None), "x")
    # only a completed run that exported gets one, written whole
    assert write_card(tmp_path, _record(exports={}), "x") is None
    assert write_card(tmp_path, _record(status=Status.FAILED), "x") is None
    written = write_card(tmp_path, _record(), "x")
    assert written == tmp_path / "export" / "README.md" and [p.name for p in written.parent.iterdir()] == ["README.md"]


def test_info_shows_a_hostile_records_control_characters_escaped(tmp_path):
    record = _record(model="mlp\x1b]0;owned\x07", run_dir=str(tmp_path))
    (tmp_path / "metrics.json").write_text(json.dumps(record.__dict__, default=str))
    shown = subprocess.run(
        [sys.executable, "-m", "tfhydra.predict", str(tmp_path), "--info"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\\x1b]0;owned\\x07" in shown.stdout
    assert "tensorflow" not in shown.stderr.lower()


@pytest.mark.slow
def test_a_trained_runs_card_holds_its_test_figures_and_info_prints_it(tmp_path_factory):
    run = trained_run(tmp_path_factory, *DIGITS_CNN)
    record = json.loads((run / "metrics.json").read_text())
    card = (run / "export" / "README.md").read_text()
    rows = dict(re.findall(r"^\| (\w+) \| ([-\d.e]+) \|$", card, re.M))
    assert set(rows) == set(record["test"]["metrics"]) and rows
    for name, value in record["test"]["metrics"].items():
        assert float(rows[name]) == pytest.approx(value, rel=1e-3)  # 4 significant digits of the record's
    assert "python train.py trainer.epochs=2 logging.histogram_freq=1" in card
    info = subprocess.run(
        [sys.executable, "-m", "tfhydra.predict", str(run), "--info"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(TESTS)},
    )
    assert info.returncode == 0 and info.stdout == card, info.stderr
