"""Kill a run with SIGKILL mid-epoch, run the same command again: it resumes and ends where an
uninterrupted run ends, bit for bit (custom loop, deterministic mode)."""

import json
import os

import pytest
from conftest import ROOT, TESTS, last_line, read_run_record, run_cli, start_cli
from run_processes import kill_when_ready, saved_step, weights_digest

ARGS = [
    "trainer.loop=custom",
    "trainer.deterministic=true",
    "trainer.epochs=3",
    "trainer.save_every=7",
    "model=mlp",
    "logging.histogram_freq=0",
]  # the MLP has Dropout: its random generator must resume exactly too


def start(run_dir):
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    return start_cli(*ARGS, f"hydra.run.dir={run_dir}", cwd=ROOT, env=env, stderr=run_dir.parent / "stderr")


@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_matches_an_uninterrupted_run(tmp_path):
    killed = tmp_path / "killed"
    process = start(killed)
    history, state = killed / "checkpoints" / "history.json", killed / "checkpoints" / "state"
    # wait until epoch 1 is recorded and a mid-epoch save of epoch 2 exists, then kill
    kill_when_ready(process, lambda: history.exists() and saved_step(state) > 0)
    assert not (killed / "metrics.json").exists()
    epochs_before = len(json.loads(history.read_text())["epochs"])
    assert 1 <= epochs_before < 3 and saved_step(state) > 0  # killed mid-epoch, after a mid-epoch save

    # A different model is refused: the directory belongs to the run being continued.
    refused = run_cli(*ARGS[:-2], "model=cnn", "logging.histogram_freq=0", f"hydra.run.dir={killed}")
    assert refused.returncode == 1 and "its saved config differs in model." in last_line(refused.stderr)

    resumed = run_cli(*ARGS, f"hydra.run.dir={killed}")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resumed from" in (killed / "train.log").read_text()

    reference = tmp_path / "reference"
    assert run_cli(*ARGS, f"hydra.run.dir={reference}").returncode == 0
    a, b = (read_run_record(d) for d in (killed, reference))
    assert a["status"] == b["status"] == "completed" and a["epochs_run"] == 3
    assert a["history"] == b["history"]
    # How each started, decided once at its start and kept in the record: the killed run from its saved state,
    # after the epochs history.json had recorded; the reference from nothing.
    assert {k: a["resumed"][k] for k in ("kind", "epoch")} == {"kind": "saved_state", "epoch": epochs_before}
    assert (
        a["resumed"]["reason"] == f"resuming from the saved state in checkpoints/state ({epochs_before} epoch(s) "
        "recorded)"
    )
    assert b["resumed"] == {"kind": "fresh", "epoch": 0, "reason": "a new run: nothing saved in its directory"}
    assert (killed / "train.log").read_text().count("start: saved_state after epoch") == 1
    assert weights_digest(killed / "checkpoints" / "last.weights.h5") == weights_digest(
        reference / "checkpoints" / "last.weights.h5"
    )


def test_a_record_without_saved_state_is_started_over(tmp_path, compose_cfg):
    """Killed before the first state save (the record of epoch 1 was written, its state was not)."""
    import tfhydra

    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "history.json").write_text(
        json.dumps({"epochs": [{"loss": 1.0}], "train_seconds": [1]})
    )
    cfg = compose_cfg(["model=mlp", "trainer.epochs=1", "trainer.steps_per_epoch=4", "logging.histogram_freq=0"])
    tfhydra.run(cfg, run_dir=tmp_path)
    record = read_run_record(tmp_path)
    assert record["status"] == "completed" and record["epochs_run"] == 1 and record["history"][0]["loss"] != 1.0
    assert record["resumed"] == {
        "kind": "fresh",
        "epoch": 0,
        "reason": "checkpoints/history.json records epochs but "
        "no state was saved before the earlier attempt ended: starting over",
    }
