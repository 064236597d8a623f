"""The run record (tfhydra/record/run_record.py): its fields as documented, versions, where a result came from,
and a record for every way a run ends."""

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, last_line, read_run_record, run_cli

import tfhydra
from tfhydra.record.run_record import (
    FIELDS,
    SCHEMA_VERSION,
    RecordError,
    RunRecord,
    load_record,
    read_record,
    run_status,
)


def documented_fields() -> set[str]:
    table = (ROOT / "docs" / "record.md").read_text()
    return set(re.findall(r"^\| `([a-z_0-9]+)` \|", table, flags=re.MULTILINE))


def test_docs_list_every_field_of_the_record():
    assert documented_fields() == set(FIELDS)


def test_an_earlier_phase_is_known_from_the_run_and_its_phases_and_from_a_workers_scratch(tmp_path):
    """RunPaths.is_earlier_phase: what lets a later phase read an earlier phase's config as the run's own."""
    from tfhydra.record.rundir import RunPaths

    run, head = tmp_path / "run", tmp_path / "run" / "phases" / "0_head"
    assert RunPaths(run).is_earlier_phase(head)  # the run's own phase, after it
    assert RunPaths(run / "phases" / "1_pretrain").is_earlier_phase(head)  # a later earlier phase
    assert RunPaths(tmp_path / "scratch", checkpoints_root=run).is_earlier_phase(head)  # a non-chief worker
    assert not RunPaths(tmp_path / "other").is_earlier_phase(head)  # another run: a stranger's
    assert not RunPaths(run).is_earlier_phase(tmp_path / "elsewhere" / "phases" / "0_head")
    assert not RunPaths(run).is_earlier_phase(run / "0_head")  # not under phases/


def test_a_record_round_trips_and_refuses_unknown_fields(tmp_path):
    record = RunRecord(run_dir=str(tmp_path), monitor="val_accuracy", monitor_mode="max")
    record.update(status="completed", best={"epoch": 2, "val_accuracy": 0.75}, wall_seconds=float("nan"))
    record.write(tmp_path)
    again = load_record(tmp_path)
    assert again.status == "completed" and again.best_monitored == 0.75 and again.schema_version == SCHEMA_VERSION
    assert again.wall_seconds is None  # JSON has no NaN: written as null
    with pytest.raises(TypeError, match="not fields of the run record: stauts"):
        record.update(stauts="completed")


def test_an_older_record_reads_and_a_newer_one_is_refused(tmp_path):
    (tmp_path / "metrics.json").write_text(json.dumps({"status": "completed", "best": {"epoch": 1}, "loss": 0.1}))
    old = load_record(tmp_path)  # version 0: written before the record was typed
    assert (old.status, old.best, old.schema_version) == ("completed", {"epoch": 1}, 0)
    (tmp_path / "metrics.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1, "status": "completed"}))
    with pytest.raises(RecordError, match="schema_version"):
        load_record(tmp_path)
    assert read_record(tmp_path) is None and run_status(tmp_path) is None
    for broken in ("[1, 2]", "{not json", '{"status": 3}'):
        (tmp_path / "metrics.json").write_text(broken)
        assert read_record(tmp_path) is None


def test_a_run_from_python_keeps_hydra_files_provenance_and_evaluates(tmp_path):
    """`tfhydra.run(tfhydra.compose([...]), run_dir=...)` leaves the same run directory as the command line."""
    overrides = ["model=mlp", "trainer.epochs=2", "logging.histogram_freq=0"]
    returned = tfhydra.run(tfhydra.compose(overrides), run_dir=tmp_path)
    record = read_run_record(tmp_path)
    assert record["status"] == "completed" and record["schema_version"] == SCHEMA_VERSION
    assert record["best"]["val_accuracy"] == pytest.approx(returned)
    assert set(record["versions"]) == {
        "python",
        "tfhydra",
        "tensorflow",
        "tf-keras",
        "tensorflow-model-optimization",
        "hydra-core",
        "omegaconf",
        "numpy",
    }
    assert record["versions"]["tensorflow"].startswith("2.") and record["versions"]["hydra-core"].startswith("1.3")
    # the record's git is the working directory's checkout (the user's project), wherever pytest was started from
    head = subprocess.run(["git", "-C", str(Path.cwd()), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:  # started from a checkout (CI starts from its clone)
        assert record["git"]["commit"] == head.stdout.strip() and isinstance(record["git"]["dirty"], bool)
    else:
        assert record["git"] is None
    assert record["host"] and record["command"]
    hydra = tmp_path / ".hydra"
    assert [line.removeprefix("- ") for line in (hydra / "overrides.yaml").read_text().splitlines()] == overrides
    assert "name: mlp" in (hydra / "config.yaml").read_text() and (hydra / "hydra.yaml").is_file()

    from tfhydra.evaluate import evaluate_run

    evaluated = evaluate_run(tmp_path, [])  # the test split by default (issue 34): the record's test figures
    assert evaluated["split"] == "test" and evaluated["examples"] == record["test"]["examples"] == 360
    assert evaluated["metrics"]["accuracy"] == pytest.approx(record["test"]["metrics"]["accuracy"], abs=1e-6)
    validated = evaluate_run(tmp_path, [], split="validation")
    assert validated["metrics"]["accuracy"] == pytest.approx(record["best"]["val_accuracy"], abs=1e-6)


def test_a_record_outside_git_says_so(tmp_path):
    from tfhydra.record.run_record import git_state

    assert git_state(tmp_path) is None
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "empty",
        ],
        check=True,
    )
    assert git_state(tmp_path)["dirty"] is False
    (tmp_path / "mymodels.py").write_text("# a new, uncommitted model\n")
    assert git_state(tmp_path)["dirty"] is True


@pytest.mark.slow
def test_an_export_the_converter_refuses_is_a_failed_record_and_one_line(tmp_path):
    """A model with an op TFLite's builtins do not have (tf.math.lgamma in a Lambda): TensorFlow 2.21's converter
    writes a file that LiteRT cannot run ("shapes not broadcastable"); the run says so in one line and in its
    record, keeps its trained state, and the same command without tflite finishes it without training again."""
    run_dir = tmp_path / "run"
    argv = [
        "~model",
        "+model._target_=user_code.build_model_tflite_refuses",
        "trainer.epochs=1",
        "logging.histogram_freq=0",
        f"hydra.run.dir={run_dir}",
    ]
    result = run_cli(*argv, "export.formats=[saved_model,tflite]")
    message = last_line(result.stderr)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert message.startswith("Error: export.formats=tflite: the tflite file does not run in its runtime ("), message
    assert "accepted: export.formats=[saved_model]" in message
    record = read_run_record(run_dir)
    assert record["status"] == "failed" and record["error"] == message.removeprefix("Error: ")
    assert record["epochs_run"] == 1 and not (run_dir / "export" / "tflite").exists()

    finished = run_cli(*argv, "export.formats=[saved_model]")
    assert finished.returncode == 0, finished.stderr[-2000:]
    record = read_run_record(run_dir)
    assert record["status"] == "completed" and record["epochs_run"] == 1  # not trained again
    assert "training ended in an earlier attempt" in (run_dir / "train.log").read_text()


def test_the_summary_block_comes_first_rounded_and_is_never_read_back(tmp_path):
    record = RunRecord(run_dir=str(tmp_path), monitor="val_accuracy", monitor_mode="max", status="completed")
    record.update(
        best={"epoch": 17, "val_accuracy": 0.97777777, "learning_rate": 0.0010000000474974513},
        test={"split": "test", "examples": 360, "metrics": {"loss": 0.147912345, "accuracy": 0.975}},
        epochs_run=20,
        wall_seconds=22.123456,
    )
    record.write(tmp_path)
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert next(iter(written)) == "summary"
    assert written["summary"] == {
        "status": "completed",
        "error": None,
        "best": {"epoch": 17, "val_accuracy": 0.9778},
        "tie": None,
        "test": {"accuracy": 0.975, "loss": 0.1479},  # the monitored metric's first (a record naming no headline)
        "test_examples": 360,
        "epochs_run": 20,
        "examples_per_second": None,
        "wall_seconds": 22.12,
    }
    assert written["best"]["learning_rate"] == 0.0010000000474974513  # the fields keep full precision
    assert load_record(tmp_path).as_dict() == record.as_dict()  # derived: not a field, not read back
