"""How a phase starts (tfhydra/record/resume.py), decided from what a directory holds: each of the four kinds, the one
log line, what a fresh start clears, and history.json's one reader and writer. Files only: no TensorFlow."""

import json
import logging

from tfhydra.record.resume import (
    AFTER_TRAINING,
    FRESH,
    HISTORY_FIELDS,
    KEPT,
    SAVED_STATE,
    clear_for,
    how_it_starts,
    read_history,
    start_phase,
    write_history,
)
from tfhydra.record.run_record import RunRecord, Status
from tfhydra.record.rundir import RunPaths


def attempt(root, epochs: int, finished: bool = False, state: bool = False, last: bool = False) -> RunPaths:
    """A directory as an earlier attempt left it: history.json with `epochs`, and the state / last weights."""
    paths = RunPaths(root)
    write_history(
        paths.history,
        {
            "epochs": [{"loss": 1.0 / (i + 1)} for i in range(epochs)],
            "train_seconds": [0.5] * epochs,
            "finished": finished,
            "recoveries": [],
        },
    )
    if state:
        paths.state.mkdir(parents=True)
        (paths.state / "ckpt-3.index").write_bytes(b"x")
    if last:
        paths.last_weights.write_bytes(b"weights")
    return paths


def test_an_empty_directory_starts_fresh(tmp_path):
    assert how_it_starts(RunPaths(tmp_path), resume=True).as_record() == {
        "kind": FRESH,
        "epoch": 0,
        "reason": "a new run: nothing saved in its directory",
    }


def test_an_attempt_that_saved_nothing_is_started_over_and_said(tmp_path, caplog):
    RunRecord(run_dir=str(tmp_path), status=Status.FAILED).write(tmp_path)  # failed before its first save
    with caplog.at_level(logging.INFO, logger="tfhydra"):
        start = start_phase(RunPaths(tmp_path), resume=True)
    assert (start.kind, start.epoch) == (FRESH, 0)
    assert start.reason == "an earlier attempt ended before it saved any state to resume from: starting over"
    assert [r.levelname for r in caplog.records if r.message.startswith("start: fresh")] == ["WARNING"]


def test_saved_state_resumes_after_the_recorded_epochs(tmp_path):
    start = how_it_starts(attempt(tmp_path, 3, state=True), resume=True)
    assert (start.kind, start.epoch, start.trained) == (SAVED_STATE, 3, False)
    assert start.reason == "resuming from the saved state in checkpoints/state (3 epoch(s) recorded)"


def test_ended_training_with_last_weights_redoes_only_what_came_after(tmp_path):
    start = how_it_starts(attempt(tmp_path, 2, finished=True, state=True, last=True), resume=True)
    assert (start.kind, start.epoch, start.trained) == (AFTER_TRAINING, 2, True)
    # without the last weights the saved state is what is left: training resumes from it (0 epochs to go)
    (tmp_path / "checkpoints" / "last.weights.h5").unlink()
    assert how_it_starts(RunPaths(tmp_path), resume=True).kind == SAVED_STATE


def test_a_completed_run_is_kept_whatever_resume_says(tmp_path):
    attempt(tmp_path, 2, finished=True, last=True)
    RunRecord(run_dir=str(tmp_path), status=Status.COMPLETED, epochs_run=2).write(tmp_path)
    for resume in (True, False):
        start = how_it_starts(RunPaths(tmp_path), resume)
        assert (start.kind, start.epoch) == (KEPT, 2)
        assert start.reason == "completed in an earlier run (2 epoch(s)): kept as it is, not rerun"
    RunRecord(run_dir=str(tmp_path), status=Status.INTERRUPTED, epochs_run=2).write(tmp_path)
    assert how_it_starts(RunPaths(tmp_path), resume=True).kind == AFTER_TRAINING  # interrupted: not kept


def test_fresh_starts_clear_the_earlier_attempt_and_say_why_once(tmp_path, caplog):
    lost = attempt(tmp_path / "lost", 1)  # epochs recorded, no state saved: started over, said as a warning
    with caplog.at_level(logging.INFO, logger="tfhydra"):
        start = start_phase(lost, resume=True)
    clear_for(start, lost)
    assert (start.kind, start.epoch) == (FRESH, 0) and "no state was saved before" in start.reason
    assert not lost.history.exists()
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [("WARNING", f"start: fresh ({start.reason})")]

    over = attempt(tmp_path / "over", 3, state=True)  # trainer.resume=false: the saved state is discarded
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tfhydra"):
        start = start_phase(over, resume=False)
    clear_for(start, over)
    assert start.as_record() == {
        "kind": FRESH,
        "epoch": 0,
        "reason": "trainer.resume=false: any saved state is discarded",
    }
    assert not over.state.exists() and not over.history.exists()
    assert [r.getMessage() for r in caplog.records] == [f"start: fresh ({start.reason})"]

    kept = attempt(tmp_path / "resumed", 4, state=True)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tfhydra"):
        clear_for(start_phase(kept, resume=True), kept)
    assert kept.state.exists() and kept.history.exists()  # what it resumes from is left alone
    assert [r.getMessage() for r in caplog.records] == [
        "start: saved_state after epoch 4 (resuming from the saved state in checkpoints/state (4 epoch(s) recorded))"
    ]


def test_history_has_one_format_one_reader_and_one_writer(tmp_path, caplog):
    path = tmp_path / "checkpoints" / "history.json"
    write_history(path, {"epochs": [{"loss": 0.5}], "train_seconds": [1.5], "finished": True, "extra": "dropped"})
    assert list(json.loads(path.read_text())) == list(HISTORY_FIELDS)
    assert read_history(path) == {
        "epochs": [{"loss": 0.5}],
        "train_seconds": [1.5],
        "finished": True,
        "diverged": None,
        "recoveries": [],
        "validations": [],
    }
    assert read_history(tmp_path / "none.json") is None
    path.write_text('{"epochs": 3}')
    with caplog.at_level(logging.WARNING, logger="tfhydra"):
        assert read_history(path) is None
    assert f"{path} cannot be read (not a tfhydra epoch record)" in caplog.text


def test_an_older_record_without_resumed_reads(tmp_path):
    from tfhydra.record.run_record import load_record

    (tmp_path / "metrics.json").write_text(json.dumps({"schema_version": 2, "status": "completed"}))
    assert load_record(tmp_path).resumed is None
