"""`python -m tfhydra.evaluate RUN_DIR [data=...]`: a finished run's export, evaluated without retraining."""

import json

import pytest
from conftest import ROOT, TESTS, last_line, read_run_record, run_module
from shared_runs import DIGITS_CNN, copy_run, trained_run


def evaluate(*args):
    return run_module(
        "tfhydra.evaluate", "--json", *map(str, args), env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{TESTS}"}
    )


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """The session's shared 2-epoch digits run (tests/shared_runs.py), copied: evaluate writes into evaluations/."""
    return copy_run(trained_run(tmp_path_factory, *DIGITS_CNN), tmp_path_factory.mktemp("finished") / "run")


@pytest.mark.slow
def test_evaluate_reproduces_the_runs_test_and_validation_figures(finished_run):
    result = evaluate(finished_run)  # the test split by default (issue 34)
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    record = read_run_record(finished_run)
    assert figures["split"] == "test" and figures["examples"] == 360 and figures["input"] == "raw"  # as stored
    assert figures["metrics"]["accuracy"] == pytest.approx(record["test"]["metrics"]["accuracy"], abs=1e-6)
    assert figures["metrics"]["loss"] == pytest.approx(record["test"]["metrics"]["loss"], rel=1e-4)
    validated = evaluate("--split", "validation", finished_run)
    assert validated.returncode == 0, validated.stderr[-2000:]
    best, figures_val = record["best"], json.loads(validated.stdout.strip().splitlines()[-1])
    assert figures_val["metrics"]["accuracy"] == pytest.approx(best["val_accuracy"], abs=1e-6)
    assert figures_val["metrics"]["loss"] == pytest.approx(best["val_loss"], rel=1e-4)
    written = json.loads((finished_run / "evaluations" / figures["written_to"].rsplit("/", 1)[-1]).read_text())
    assert written["metrics"] == figures["metrics"]


@pytest.mark.slow
def test_a_run_directory_evaluate_cannot_write_into_still_gets_its_figures_and_one_line(finished_run, tmp_path):
    """A shared run that is not the user's to write: the figures are printed, then where they did not go, exit 1.
    (A file where evaluations/ would be fails the same call a read-only directory does, and root, who ignores
    permission bits, sees it too.)"""
    run = copy_run(finished_run, tmp_path / "run")
    if (run / "evaluations").exists():
        import shutil

        shutil.rmtree(run / "evaluations")
    (run / "evaluations").write_text("not a directory")
    result = evaluate("--split", "validation", run)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["metrics"]["accuracy"] == pytest.approx(read_run_record(run)["best"]["val_accuracy"], abs=1e-6)
    assert "written_to" not in figures and figures["not_written"].startswith(f"{run}/evaluations/")
    assert last_line(result.stderr) == (
        f"Error: not written: {figures['not_written']} (the figures above are the whole result)"
    )


@pytest.mark.slow
def test_evaluate_on_another_dataset(finished_run):
    result = evaluate(finished_run, "data=synthetic", "data.test_size=200", "data.signal=0.0")  # its test split
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["data"] == "synthetic" and figures["examples"] == 200
    assert figures["metrics"]["accuracy"] < 0.5  # noise images: the digits model cannot know them


@pytest.mark.slow
@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["data=synthetic", "data.shape=[16,16,1]", "data.num_classes=10"],
            "data=synthetic: its examples are float32 of shape (16, 16, 1), which the run's model does not take; "
            "accepted: data whose examples are float32 of shape (28, 28, 1)",
        ),
        (["data.val_size=5"], "data.val_size=5: unknown key"),
    ],
)
def test_evaluate_refuses_data_the_model_cannot_take(finished_run, args, message):
    result = evaluate(finished_run, *args)
    assert result.returncode == 1 and message in last_line(result.stderr) and "Traceback" not in result.stderr


def test_evaluate_refuses_a_directory_that_is_not_a_finished_run(tmp_path):
    result = evaluate(tmp_path)
    assert result.returncode == 1
    assert last_line(result.stderr) == (
        f"Error: {tmp_path}: not a completed run (status: None); accepted: the "
        "directory of a completed run with .hydra/ and export/saved_model or "
        "export/tflite/model.tflite"
    )
