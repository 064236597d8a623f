"""A time budget and targets (`trainer.max_minutes`, `trainer.stop_at`; tfhydra/trainer/stopping.py): the rules
driven with fake logs in milliseconds, the keys as the command line writes them, then one run per loop."""

from __future__ import annotations

import json
import time

import pytest
from conftest import FAST, last_line, run_cli

from tfhydra.config.errors import ConfigError
from tfhydra.platform.keras_lib import keras
from tfhydra.trainer.checks import check_monitor
from tfhydra.trainer.stopping import StopRules, maximized, stop_figures


class _Model:
    stop_training = False


def _rules(max_minutes=None, stop_at=(), started_ago=0.0, spent_before=0.0) -> StopRules:
    rules = StopRules(max_minutes, dict(stop_at), time.time() - started_ago, spent_before)
    rules.model = _Model()
    return rules


def test_a_target_stops_at_the_first_epoch_reaching_it_in_its_own_direction():
    rules = _rules(stop_at={"val_accuracy": 0.9, "val_loss": 0.2})
    rules.on_epoch_end(0, {"val_accuracy": 0.89, "val_loss": 0.5})
    assert not rules.model.stop_training and stop_figures([rules]) == {
        "stop_reason": "epochs",
        "time_to_target_seconds": None,
    }
    rules.on_epoch_end(1, {"val_accuracy": 0.85, "val_loss": 0.2})  # a loss reaches its target from above
    assert rules.model.stop_training and rules.reached == {"val_loss": 0.2}
    figures = stop_figures([rules])
    assert figures["stop_reason"] == "target" and 0 <= figures["time_to_target_seconds"] < 5
    assert [maximized(n) for n in ("val_accuracy", "val_auc", "val_r2", "val_rmse", "loss", "val_mae")] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]


def test_the_budget_counts_from_the_start_and_what_a_resumed_run_spent_before():
    fresh = _rules(max_minutes=1, started_ago=30)
    fresh.on_epoch_end(0, {"val_accuracy": 0.5})
    assert not fresh.model.stop_training
    resumed = _rules(max_minutes=1, started_ago=30, spent_before=31)
    resumed.on_epoch_end(0, {"val_accuracy": 0.5})
    assert resumed.model.stop_training and stop_figures([resumed])["stop_reason"] == "time"
    nan = _rules(stop_at={"val_accuracy": 0.1})
    nan.on_epoch_end(0, {"val_accuracy": float("nan")})
    assert not nan.model.stop_training


def test_early_stopping_is_the_reason_when_it_stopped():
    stopping = keras.callbacks.EarlyStopping()
    stopping.stopped_epoch = 4
    assert stop_figures([stopping])["stop_reason"] == "patience"


def test_a_target_is_written_as_the_command_line_writes_it_and_must_be_logged(compose_cfg):
    assert dict(compose_cfg(["trainer.stop_at.val_accuracy=0.9"]).trainer.stop_at) == {"val_accuracy": 0.9}
    assert dict(compose_cfg(["trainer.stop_at={val_loss: 0.3}"]).trainer.stop_at) == {"val_loss": 0.3}
    with pytest.raises(ConfigError, match=r"^trainer\.stop_at\.val_acc=0\.9: not a metric this run logs"):
        check_monitor(compose_cfg(["trainer.stop_at.val_acc=0.9"]))
    done = run_cli("trainer.max_minutes=-1", "trainer.epochs=1")
    assert done.returncode == 1 and last_line(done.stderr).startswith("Error: trainer.max_minutes=-1")


@pytest.mark.slow
@pytest.mark.parametrize(
    "loop, rule, reason",
    [
        ("fit", "trainer.stop_at.val_accuracy=0.9", "target"),
        ("custom", "trainer.stop_at={val_accuracy: 0.9}", "target"),
        ("custom", "trainer.max_minutes=0.001", "time"),
    ],  # the budget in the fit loop: the same StopRules callback that stops fit at its target (fit-target above)
)
def test_a_run_stops_at_its_target_or_budget_and_exports_its_best_weights(tmp_path, loop, rule, reason):
    run_dir = tmp_path / "run"
    done = run_cli(
        "model=mlp", f"trainer.loop={loop}", "trainer.epochs=50", rule, *FAST[1:], f"hydra.run.dir={run_dir}"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((run_dir / "metrics.json").read_text())
    assert record["status"] == "completed" and record["stop_reason"] == reason
    assert record["epochs_run"] < 50 and record["exported"]["epoch"] == record["best"]["epoch"]
    assert (run_dir / "export" / "saved_model").is_dir()
    if reason == "target":
        assert record["best"]["val_accuracy"] >= 0.9 and record["time_to_target_seconds"] > 0
        assert record["history"][-1]["val_accuracy"] >= 0.9  # the first epoch that reached it is the last
        assert all(e["val_accuracy"] < 0.9 for e in record["history"][:-1])


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_a_resumed_run_stops_at_its_target_counting_the_epochs_before(tmp_path, loop):
    """Killed after its first epoch (below the target), the same command resumes from the saved state and ends at
    the first epoch reaching the target, as an uninterrupted run would."""
    from run_processes import epochs_recorded, kill_when_ready, start

    args = ["model=mlp", f"trainer.loop={loop}", "trainer.epochs=50", "trainer.stop_at.val_accuracy=0.9", *FAST[1:]]
    run_dir = tmp_path / "run"
    process = start(run_dir, *args)
    kill_when_ready(process, lambda: epochs_recorded(run_dir) >= 1 and (run_dir / "checkpoints" / "state").is_dir())
    assert (
        not (run_dir / "metrics.json").exists()
        or json.loads((run_dir / "metrics.json").read_text())["status"] != "completed"
    ), "the run reached its target before it could be killed"
    done = run_cli(*args, f"hydra.run.dir={run_dir}")
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((run_dir / "metrics.json").read_text())
    assert record["status"] == "completed" and record["stop_reason"] == "target"
    assert record["resumed"]["kind"] == "saved_state" and record["resumed"]["epoch"] >= 1
    accuracies = [e["val_accuracy"] for e in record["history"]]
    assert accuracies[-1] >= 0.9 and all(a < 0.9 for a in accuracies[:-1]), accuracies
    assert record["time_to_target_seconds"] > 0 and record["exported"]["epoch"] == record["best"]["epoch"]
