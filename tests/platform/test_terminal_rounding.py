"""Figures as a person reads them (issue 38 item 5): 4 significant digits in every terminal line and summary, full
precision in the record. The one formatter is tfhydra/platform/terminal.py's `figure`."""

import math

import pytest

from tfhydra.platform.terminal import figure
from tfhydra.record.run_record import RunRecord


@pytest.mark.parametrize(
    "value, shown",
    [
        (0.9833333492279053, "0.9833"),
        (0.001, "0.001"),
        (0.0027123, "0.002712"),
        (2.3456789e-5, "2.346e-05"),
        (1.0, "1"),
        (12.34567, "12.35"),
        (3, "3"),
        (math.nan, "nan"),
        (math.inf, "inf"),
        (None, "None"),
        (True, "True"),
    ],
)
def test_figure_has_four_significant_digits(value, shown):
    assert figure(value) == shown


def test_the_end_line_is_rounded_and_the_record_is_not():
    from tfhydra.runner.phase_report import monitored as _monitored

    record = RunRecord(monitor="val_accuracy", best={"epoch": 13, "val_accuracy": 0.9833333492279053})
    assert _monitored(record) == "best val_accuracy=0.9833 at epoch 13"
    assert record.best_monitored == 0.9833333492279053


def test_the_epoch_line_is_rounded_and_the_history_is_not(tmp_path, caplog):
    import logging

    from callback_harness import attached

    from tfhydra.trainer.callbacks import RunRecorder, read_history

    recorder = attached(RunRecorder(tmp_path / "history.json"))
    recorder.on_train_begin()
    recorder.on_epoch_begin(0)
    logs = {"loss": 0.002712345, "val_accuracy": 0.9833333492279053, "learning_rate": 3.0e-5}
    with caplog.at_level(logging.INFO, logger="tfhydra"):
        recorder.on_epoch_end(0, logs)
    assert "epoch 1/3 loss=0.002712 val_accuracy=0.9833 learning_rate=3e-05" in caplog.text
    assert read_history(tmp_path / "history.json")["epochs"][0]["val_accuracy"] == 0.9833333492279053


def test_a_run_directory_is_shown_relative_under_the_working_directory_else_absolute(tmp_path, monkeypatch):
    from tfhydra.platform.terminal import shown_path

    monkeypatch.chdir(tmp_path)
    assert shown_path(tmp_path / "outputs" / "r1") == "outputs/r1"
    assert shown_path("outputs/r1") == "outputs/r1"
    elsewhere = tmp_path.parent / "elsewhere"
    assert shown_path(elsewhere) == str(elsewhere)
