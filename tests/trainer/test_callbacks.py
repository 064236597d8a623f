"""The trainer's callbacks and recorders tested directly, with fake logs, in the style of Keras' own callback tests
(`callbacks/*_test.py`): milliseconds each, no training run. What they promise a full run is tested elsewhere
(tests/contract/test_faults.py, tests/contract/test_resume.py); here each piece alone, so a failure names the piece.
"""

from __future__ import annotations

import math
import os
import signal

import numpy as np
import pytest
import tf_keras as keras
from callback_harness import attached, tiny_model
from conftest import compose_config

from tfhydra.trainer.callbacks import BestCheckpoint, EarlyStopping, RunRecorder, best_so_far, read_history
from tfhydra.trainer.progress import EpochProgress
from tfhydra.trainer.state import Interrupted, ResumableBackup, StopOnSignal

# ---- the divergence check (RunRecorder) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "loss,max_loss,diverged",
    [
        (0.7, None, False),
        (float("nan"), None, True),
        (float("inf"), None, True),
        (2e6, 1e6, True),
        (2e6, None, False),
        (5e5, 1e6, False),
    ],
)
def test_the_recorder_stops_a_run_whose_loss_is_not_finite_or_above_the_bound(loss, max_loss, diverged):
    recorder = attached(RunRecorder(max_loss=max_loss))
    recorder.on_train_begin()
    recorder.on_epoch_begin(0)
    recorder.on_train_batch_end(3, {"loss": loss})
    assert recorder.model.stop_training is diverged
    assert (recorder.diverged is not None) is diverged
    if diverged:
        assert recorder.diverged["epoch"] == 1 and recorder.diverged["step"] == 4
        assert math.isnan(recorder.diverged["loss"]) if math.isnan(loss) else recorder.diverged["loss"] == loss


def test_the_recorder_reads_the_loss_only_every_check_every_steps():
    recorder = attached(RunRecorder(), steps=100)
    recorder.on_train_begin()
    recorder.on_epoch_begin(0)
    recorder.on_train_batch_end(0, {"loss": 0.5})  # step 1: checked (the first)
    recorder.on_train_batch_end(5, {"loss": float("nan")})  # step 6: before the next check at step 17
    assert recorder.diverged is None
    recorder.on_train_batch_end(RunRecorder.CHECK_EVERY, {"loss": float("nan")})
    assert recorder.diverged["step"] == RunRecorder.CHECK_EVERY + 1


def test_the_recorder_calls_nan_weights_diverged_at_the_epochs_end(tmp_path):
    recorder = attached(RunRecorder(tmp_path / "history.json"))
    recorder.on_train_begin()
    recorder.on_epoch_begin(0)
    kernel = recorder.model.trainable_variables[0]
    kernel.assign(np.full(kernel.shape, np.nan, np.float32))
    recorder.on_epoch_end(0, {"loss": 0.4, "val_loss": 0.5})
    assert recorder.diverged["weights"] == kernel.name and recorder.model.stop_training
    assert read_history(tmp_path / "history.json")["diverged"]["weights"] == kernel.name


def test_a_resumed_recorder_forgets_the_epochs_after_the_state_it_resumed_from(tmp_path):
    first = attached(RunRecorder(tmp_path / "history.json"))
    first.on_train_begin()
    for epoch in range(3):
        first.on_epoch_begin(epoch)
        first.on_epoch_end(epoch, {"loss": 1.0 / (epoch + 1)})
    again = attached(RunRecorder(tmp_path / "history.json"))
    again.on_train_begin()
    assert [e["loss"] for e in again.epochs] == [1.0, 0.5, pytest.approx(1 / 3)]
    again.on_epoch_begin(1)  # the saved state was at epoch 1: the record runs ahead of it by two epochs
    assert [e["loss"] for e in again.epochs] == [1.0] and len(again.train_seconds) == 1


def test_a_damaged_history_is_read_as_none(tmp_path):
    (tmp_path / "history.json").write_text('{"epochs": 3')
    assert read_history(tmp_path / "history.json") is None
    assert best_so_far([{"val_loss": 0.3}, {"val_loss": 0.2}, {}], "val_loss", "min") == {"val_loss": 0.2}
    assert best_so_far([{"acc": 0.3}, {"acc": 0.9}], "acc", "max", from_epoch=1) == {"acc": 0.9}
    assert best_so_far([{"acc": 0.9}], "acc", "max", from_epoch=1) is None


# ---- BestCheckpoint --------------------------------------------------------------------------------------------


def test_best_checkpoint_keeps_only_new_bests_from_its_first_epoch_and_leaves_no_partial_file(tmp_path):
    best = tmp_path / "best.weights.h5"
    callback = attached(BestCheckpoint(str(best), monitor="val_loss", mode="min", save_weights_only=True, from_epoch=1))
    kernel = callback.model.trainable_variables[0]
    for epoch, (val_loss, value) in enumerate([(0.1, 1.0), (0.5, 2.0), (0.3, 3.0), (0.4, 4.0)]):
        kernel.assign(np.full(kernel.shape, value, np.float32))
        callback.on_epoch_end(epoch, {"val_loss": val_loss})
    assert best.is_file() and not list(tmp_path.glob(".best.partial*"))
    restored = tiny_model()
    restored.load_weights(str(best))
    assert float(restored.trainable_variables[0][0, 0]) == 3.0  # epoch 2: the best from epoch 1 on (0.1 came before)


def weights_saved(path) -> float:
    restored = tiny_model()
    restored.load_weights(str(path))
    return float(restored.trainable_variables[0][0, 0])


def test_best_checkpoint_breaks_an_exact_tie_by_the_lower_val_loss_then_keeps_the_earlier(tmp_path):
    """Issue 55: a saturated val_accuracy keeps the epoch with the lowest val_loss, as the record says."""
    best = tmp_path / "best.weights.h5"
    callback = attached(BestCheckpoint(str(best), monitor="val_accuracy", mode="max", save_weights_only=True))
    kernel = callback.model.trainable_variables[0]
    history = [(0.9, 0.5), (1.0, 0.68), (1.0, 0.003), (1.0, 0.003), (0.95, 0.001)]
    for epoch, (accuracy, loss) in enumerate(history):
        kernel.assign(np.full(kernel.shape, float(epoch + 1), np.float32))
        callback.on_epoch_end(epoch, {"val_accuracy": accuracy, "val_loss": loss})
    assert weights_saved(best) == 3.0  # epoch 3: tied at 1.0, the lowest val_loss; epoch 4 ties it fully
    from tfhydra.record.report import epoch_summary

    logs = [{"val_accuracy": a, "val_loss": v} for a, v in history]
    assert epoch_summary(logs, "val_accuracy", "max")["best"]["epoch"] == 3  # the record keeps the same epoch


def test_a_resumed_best_checkpoint_must_beat_the_best_so_far_and_its_val_loss(tmp_path):
    best = tmp_path / "best.weights.h5"
    so_far = best_so_far([{"val_accuracy": 1.0, "val_loss": 0.2}], "val_accuracy", "max")
    callback = attached(
        BestCheckpoint(str(best), monitor="val_accuracy", mode="max", save_weights_only=True, best=so_far)
    )
    callback.on_epoch_end(1, {"val_accuracy": 1.0, "val_loss": 0.3})  # tied, a higher loss: not a best
    assert not best.exists()
    callback.on_epoch_end(2, {"val_accuracy": 1.0, "val_loss": 0.1})
    assert best.is_file() and callback.best_logs["val_loss"] == 0.1


def test_early_stopping_waits_while_a_tie_is_broken_by_a_lower_val_loss():
    stopping = attached(EarlyStopping("val_accuracy", "max", patience=2), epochs=10)
    stopping.on_train_begin()
    for epoch, loss in enumerate([0.5, 0.4, 0.3, 0.2]):  # val_accuracy saturated, val_loss still falling
        stopping.on_epoch_end(epoch, {"val_accuracy": 1.0, "val_loss": loss})
        assert not stopping.model.stop_training
    stopping.on_epoch_end(4, {"val_accuracy": 1.0, "val_loss": 0.2})  # a full tie: waiting
    assert not stopping.model.stop_training
    stopping.on_epoch_end(5, {"val_accuracy": 0.9, "val_loss": 0.1})
    assert stopping.model.stop_training and stopping.stopped_epoch == 5 and stopping.best_epoch == 3


def test_early_stopping_counts_min_delta_as_keras_does():
    stopping = attached(EarlyStopping("val_loss", "min", patience=1, min_delta=0.1), epochs=10)
    stopping.on_train_begin()
    stopping.on_epoch_end(0, {"val_loss": 1.0})
    stopping.on_epoch_end(1, {"val_loss": 0.95})  # better, by less than min_delta: no improvement
    assert stopping.model.stop_training and stopping.best == 1.0


@pytest.mark.parametrize("name", ["augment=[{name_random_flip,mode_horizontal}]", "{epoch}", "{", "}}{"])
def test_best_checkpoint_in_a_directory_whose_name_holds_braces(tmp_path, name):
    """A sweep over a dict value names its job directory with braces; Keras formats checkpoint paths with them."""
    best = tmp_path / name / "checkpoints" / "best.weights.h5"
    best.parent.mkdir(parents=True)
    callback = attached(BestCheckpoint(str(best), monitor="loss", save_weights_only=True))
    callback.on_epoch_end(0, {"loss": 0.5})
    assert best.is_file() and [p.name for p in best.parent.iterdir()] == ["best.weights.h5"]


def test_best_checkpoint_discards_a_partial_file_when_the_write_fails(tmp_path, monkeypatch):
    best = tmp_path / "best.weights.h5"
    callback = attached(BestCheckpoint(str(best), monitor="loss", save_weights_only=True))
    callback.on_epoch_end(0, {"loss": 0.5})
    before = best.read_bytes()

    def full_disk(path, *args, **kwargs):
        open(path, "wb").write(b"half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(callback.model, "save_weights", full_disk)
    with pytest.raises(OSError):
        callback.on_epoch_end(1, {"loss": 0.1})
    assert best.read_bytes() == before and not list(tmp_path.glob(".best.partial*"))


# ---- StopOnSignal ----------------------------------------------------------------------------------------------


def test_a_signal_during_training_saves_at_the_next_step_boundary_then_stops():
    with StopOnSignal() as stop:
        stop.training = True
        os.kill(os.getpid(), signal.SIGUSR2)
        assert stop.signum == signal.SIGUSR2
        saved = []
        with pytest.raises(Interrupted) as raised:
            stop.check(lambda: saved.append("state") or "epoch 1, step 3")
        assert saved == ["state"] and raised.value.exit_code == 128 + signal.SIGUSR2
        assert "epoch 1, step 3" in raised.value.reason
        stop.check(lambda: pytest.fail("no signal: nothing to save"))  # the signal was used up


def test_a_signal_outside_training_stops_at_once_and_the_old_handlers_come_back():
    previous = signal.getsignal(signal.SIGTERM)
    with StopOnSignal():
        with pytest.raises(Interrupted) as raised:
            os.kill(os.getpid(), signal.SIGTERM)
        assert raised.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) is previous


# ---- ResumableBackup -------------------------------------------------------------------------------------------


def test_resumable_backup_saves_at_step_boundaries_and_a_new_one_resumes_there(tmp_path):
    model = tiny_model()
    backup = attached(ResumableBackup(str(tmp_path / "state"), save_every=3), model, epochs=2, steps=8)
    backup.on_train_begin()
    backup.on_epoch_begin(0)
    backup.on_train_batch_end(1)  # steps 1-2: no save point crossed
    assert not list((tmp_path / "state").rglob("*.index"))
    backup.on_train_batch_end(4)  # a call ending at step 5 crossed step 3
    assert len(list((tmp_path / "state").rglob("ckpt-*.index"))) == 1
    kernel = model.trainable_variables[0]
    kernel.assign(np.full(kernel.shape, 7.0, np.float32))
    backup.on_epoch_end(0)
    backup.on_train_end()

    fresh = tiny_model()
    again = attached(ResumableBackup(str(tmp_path / "state"), save_every=3), fresh, epochs=2, steps=8)
    again.on_train_begin()
    assert float(fresh.trainable_variables[0][0, 0]) == 7.0
    state = fresh._training_state
    assert (int(state._ckpt_saved_epoch.numpy()), int(state._ckpt_saved_batch.numpy())) == (0, 7)


def test_resumable_backup_saves_on_a_signal_and_says_where(tmp_path):
    with StopOnSignal() as stop:
        backup = attached(ResumableBackup(str(tmp_path / "state"), save_every="epoch", stop=stop), epochs=2, steps=8)
        backup.on_train_begin()
        backup.on_epoch_begin(0)
        stop.training = True
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(Interrupted) as raised:
            backup.on_train_batch_end(2)
    assert "epoch 1, step 3" in raised.value.reason and list((tmp_path / "state").rglob("ckpt-*.index"))


# ---- EpochProgress ---------------------------------------------------------------------------------------------


def redrawn(progress, steps: int) -> None:
    """Wait for the bar's redraw thread to show `steps` (a loaded machine may hold the thread back: no fixed
    sleep decides; a bar that never redraws fails the assertion after the wait)."""
    import time

    for _ in range(1000):
        if progress.bar.n == steps:
            return
        time.sleep(0.01)


def test_the_progress_bar_counts_the_steps_reported_and_closes_its_thread(capsys):
    progress = attached(EpochProgress(batch_size=32), epochs=1, steps=10)
    progress.REDRAW_SECONDS = 0.01
    progress.on_epoch_begin(0)
    progress.on_train_batch_end(5, {"loss": 0.25})
    redrawn(progress, steps=6)
    assert progress.bar.n == 6 and progress.bar.postfix.startswith("loss=0.25,")
    thread = progress._thread
    progress.on_epoch_end(0)
    assert progress._thread is None and not thread.is_alive()
    progress.on_train_end()  # twice is harmless
    assert "epoch 1/1" in capsys.readouterr().err


def test_the_progress_bar_takes_keras_tensors_so_batch_logs_are_not_copied_to_numpy():
    import tensorflow as tf

    progress = attached(EpochProgress(batch_size=32), epochs=1, steps=10)
    assert keras.callbacks.CallbackList([progress])._batch_hooks_support_tf_logs  # else a NumPy copy per batch
    progress.REDRAW_SECONDS = 0.01
    progress.on_epoch_begin(0)
    progress.on_train_batch_end(2, {"loss": tf.constant(0.125)})
    redrawn(progress, steps=3)
    assert progress.bar.n == 3 and progress.bar.postfix.startswith("loss=0.125,")
    progress.on_epoch_end(0)
    progress.on_train_end()


def test_a_default_runs_batch_hooks_take_tensors(tmp_path):
    """Every callback of a default run with a batch hook takes Keras' tensors: no NumPy copy of the logs per call."""

    from tfhydra.record.rundir import RunPaths
    from tfhydra.trainer.callbacks import build_callbacks
    from tfhydra.trainer.state import ResumableBackup

    cfg = compose_config([])
    callbacks = [
        *build_callbacks(cfg.trainer, cfg.logging, RunPaths(tmp_path), RunRecorder()),
        ResumableBackup(str(tmp_path / "state"), "epoch"),
        EpochProgress(32),
    ]
    assert keras.callbacks.CallbackList(callbacks)._batch_hooks_support_tf_logs


def test_ema_swap_sits_after_the_best_checkpoint_and_before_the_resumable_state(tmp_path):
    """trainer.ema: the list build_callbacks makes puts the swap after the best checkpoint (it saves the averages)
    and the fit loop's list puts the resumable state after it (it saves the raw weights); a list that breaks
    either is refused where it is built, as Keras' SwapEMAWeights refuses its own misplacement."""
    from tfhydra.record.rundir import RunPaths
    from tfhydra.trainer.callbacks import build_callbacks
    from tfhydra.trainer.ema import AveragedWeightsForEvaluation, CallbackOrderError, check_ema_place

    cfg = compose_config(["trainer.ema.decay=0.99"])
    built = build_callbacks(cfg.trainer, cfg.logging, RunPaths(tmp_path), RunRecorder())
    kinds = [type(c) for c in built]
    assert kinds.index(BestCheckpoint) < kinds.index(AveragedWeightsForEvaluation)
    backup = ResumableBackup(str(tmp_path / "state"), "epoch")
    assert check_ema_place([*built, backup])[-1] is backup

    swap, best = kinds.index(AveragedWeightsForEvaluation), kinds.index(BestCheckpoint)
    reordered = list(built)
    reordered[swap], reordered[best] = reordered[best], reordered[swap]
    with pytest.raises(CallbackOrderError, match="BestCheckpoint after AveragedWeightsForEvaluation"):
        check_ema_place(reordered)
    with pytest.raises(CallbackOrderError, match="ResumableBackup before AveragedWeightsForEvaluation"):
        check_ema_place([backup, *built])
    without = build_callbacks(compose_config([]).trainer, cfg.logging, RunPaths(tmp_path), RunRecorder())
    assert not any(isinstance(c, AveragedWeightsForEvaluation) for c in without)
    assert check_ema_place([backup, *without])[0] is backup  # no EMA: nothing to place
