"""The figure the user asked for (issue 55 item 4): the end line, the record's summary block and the notebook's
Result lead with the task's headline figures (tfhydra/record/headline.py), read from fake records in milliseconds;
the keys other tools read keep their names."""

import json

import pytest

from tfhydra.record import RunRecord, Status, load_record
from tfhydra.record.headline import epochs_in_words, headline_figures, tie_in_words
from tfhydra.runner.phase_report import monitored

REGRESSION = RunRecord(
    status=Status.COMPLETED,
    monitor="val_loss",
    monitor_mode="min",
    task={"name": "regression", "standardize": True, "headline": ["rmse", "r2"]},
    best={"epoch": 12, "loss": 3000.0, "val_loss": 3601.2, "val_rmse": 60.0099, "val_mae": 48.1, "val_r2": 0.41234},
    test={"split": "test", "examples": 89, "metrics": {"loss": 3400.0, "rmse": 58.31, "mae": 45.2, "r2": 0.4412}},
    data={"test_size": 89},
    examples_per_second=1234.5678,
)


def classification(**changes) -> RunRecord:
    record = RunRecord(
        status=Status.COMPLETED,
        monitor="val_accuracy",
        monitor_mode="max",
        task={"name": "classification", "headline": ["accuracy"]},
        best={"epoch": 17, "val_accuracy": 0.9777777791023254, "val_loss": 0.1377},
        test={"split": "test", "examples": 360, "metrics": {"loss": 0.1479, "accuracy": 0.975}},
        data={"test_size": 360},
    )
    return record.update(**changes)


def test_a_regressions_end_line_shows_rmse_and_r2_and_what_chose_the_epoch():
    assert monitored(REGRESSION) == (
        "best val_rmse=60.01 val_r2=0.4123 at epoch 12 (chosen by val_loss=3601); "
        "test rmse=58.31 r2=0.4412 (89 examples, not used to choose)"
    )


def test_a_classifications_end_line_is_as_before():
    assert monitored(classification()) == (
        "best val_accuracy=0.9778 at epoch 17; test accuracy=0.975 (360 examples, not used to choose)"
    )


@pytest.mark.parametrize(
    "task, best, test, said",
    [
        (
            {"name": "binary", "headline": ["auc", "accuracy"]},
            {"epoch": 3, "val_auc": 0.99, "val_accuracy": 0.95, "val_loss": 0.2},
            {"auc": 0.98, "accuracy": 0.94, "loss": 0.25},
            "best val_auc=0.99 val_accuracy=0.95 at epoch 3; test auc=0.98 accuracy=0.94",
        ),
        (
            {"name": "multilabel", "headline": ["f1", "auc"]},
            {"epoch": 2, "val_auc": 0.9, "val_f1": 0.6, "val_binary_accuracy": 0.8},
            {"auc": 0.88, "f1": 0.55},
            "best val_f1=0.6 val_auc=0.9 at epoch 2; test f1=0.55 auc=0.88",
        ),
        (  # the user's trainer.metrics left the headline out: the monitored metric, as before
            {"name": "regression", "headline": ["rmse", "r2"]},
            {"epoch": 2, "val_loss": 4.0, "val_mae": 1.5},
            {"loss": 4.2, "mae": 1.6},
            "best val_loss=4 at epoch 2; test loss=4.2",
        ),
        (  # a record from before the headline, or a user's own task naming none
            None,
            {"epoch": 2, "val_auc": 0.9, "val_loss": 0.3},
            {"auc": 0.91},
            "best val_auc=0.9 at epoch 2; test auc=0.91",
        ),
    ],
)
def test_every_task_leads_with_its_headline(task, best, test, said):
    monitor = "val_loss" if "val_auc" not in best else "val_auc"
    record = RunRecord(
        status=Status.COMPLETED,
        monitor=monitor,
        task=task,
        best=best,
        test={"examples": 10, "metrics": test},
        data={"test_size": 10},
    )
    assert monitored(record) == f"{said} (10 examples, not used to choose)"


def test_the_end_line_says_the_tie_the_best_epoch_was_chosen_from():
    best = {
        "epoch": 20,
        "val_accuracy": 1.0,
        "val_loss": 0.003,
        "tie": {"value": 1.0, "epochs": list(range(4, 21)), "kept": 20, "by": "val_loss"},
    }
    line = monitored(classification(best=best))
    assert line.startswith(
        "best val_accuracy=1 at epoch 20 (epochs 4-20 tied at val_accuracy=1: epoch 20 kept, the lowest val_loss); "
    )
    assert tie_in_words({"value": 0.8, "epochs": [2, 3], "kept": 2, "by": "earliest"}, "val_auc") == (
        "epochs 2, 3 tied at val_auc=0.8: epoch 2 kept, the earliest (equal val_loss)"
    )
    assert tie_in_words(None, "val_auc") is None and tie_in_words({"epochs": "x"}, "val_auc") is None
    assert epochs_in_words([9, 4, 5, 6, 11, 12]) == "4-6, 9, 11, 12"


def test_the_summary_block_leads_with_the_headline_and_keeps_the_keys_tools_read(tmp_path):
    REGRESSION.write(tmp_path)
    written = json.loads((tmp_path / "metrics.json").read_text())
    summary = written["summary"]
    assert list(written)[0] == "summary"
    assert summary["best"] == {"epoch": 12, "val_rmse": 60.01, "val_r2": 0.4123, "val_loss": 3601.0}
    assert list(summary["test"]) == ["rmse", "r2", "loss", "mae"] and summary["test"]["rmse"] == 58.31
    assert summary["tie"] is None and summary["examples_per_second"] == 1235.0
    assert load_record(tmp_path).best["val_loss"] == 3601.2  # the fields keep full precision


def test_the_summary_block_says_a_broken_tie():
    best = {"epoch": 2, "val_accuracy": 1.0, "val_loss": 0.1, "tie": {"value": 1.0, "epochs": [1, 2], "kept": 2}}
    summary = classification(best=best).summary()
    assert summary["best"] == {"epoch": 2, "val_accuracy": 1.0}
    assert summary["tie"] == "epochs 1, 2 tied at val_accuracy=1: epoch 2 kept, the earliest (equal val_loss)"
    assert summary["test"] == {"accuracy": 0.975, "loss": 0.1479}


def test_a_record_without_a_best_or_test_has_an_empty_summary():
    summary = RunRecord(monitor="val_loss").summary()
    assert summary["best"] is None and summary["test"] is None and summary["tie"] is None


def test_the_notebooks_headline_figures():
    assert headline_figures(REGRESSION.task, REGRESSION.best, REGRESSION.test["metrics"], "val_loss") == {
        "val_rmse": 60.0099,
        "val_r2": 0.41234,
        "test_rmse": 58.31,
        "test_r2": 0.4412,
    }
    record = classification(task=None)
    assert headline_figures(None, record.best, record.test["metrics"], "val_accuracy") == {
        "val_accuracy": 0.9777777791023254,
        "test_accuracy": 0.975,
    }


def test_the_notebooks_result_leads_with_the_headline(tmp_path):
    from tfhydra.notebook import Result

    result = Result(tmp_path, REGRESSION)
    assert repr(result) == (
        "Result(completed, best val_rmse=60.01 val_r2=0.4123 at epoch 12 (chosen by val_loss=3601), "
        f"test rmse=58.31 r2=0.4412, run_dir={str(tmp_path)!r})"
    )
    assert result.headline == {"val_rmse": 60.0099, "val_r2": 0.41234, "test_rmse": 58.31, "test_r2": 0.4412}
    tied = classification(best={"epoch": 2, "val_accuracy": 1.0, "tie": {"epochs": [1, 2], "kept": 2}})
    assert Result(tmp_path, tied).metrics == {"val_accuracy": 1.0}  # the tie is no figure
    assert "no epoch" in repr(Result(tmp_path, RunRecord(monitor="val_loss")))
