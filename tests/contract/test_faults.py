"""Faults: a run killed (SIGKILL) at several points, stopped by SIGTERM, SIGUSR2 or Ctrl-C, resumed from a damaged
checkpoint, or hitting a full disk or an unwritable export directory. Each time the same command, run
again, finishes the run: status `completed`, every epoch recorded once, a SavedModel that loads and
predicts. Everything here is a real `python train.py` process."""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import last_line, read_run_record, run_cli
from run_processes import BASE, epochs_recorded, finish, kill, start, wait_for


def in_progress_files(run_dir: Path) -> list[str]:
    """Files a writer has not finished: TensorFlow's `*_temp` checkpoint folders, our `.partial` weights."""
    found = []
    for _root, dirs, files in os.walk(run_dir / "checkpoints"):
        found += [name for name in dirs if name.endswith("_temp")]
        found += [name for name in files if ".partial" in name or "_temp" in name]
    return found


KILL_POINTS = {
    # point: (extra overrides, epochs, the condition to kill at)
    "first_epoch": ([], 2, lambda d: (d / "tensorboard" / "train").exists() and epochs_recorded(d) == 0),
    "between_epochs": ([], 3, lambda d: epochs_recorded(d) >= 2),
    # a 17M-parameter MLP: its checkpoints take long enough to write to be caught mid-write; after
    # epoch 2, so there is an earlier state that the kill must leave usable
    "checkpoint_write": (
        ["model.units=[4096,4096]", "data.batch_size=64", "trainer.steps_per_epoch=6"],
        4,
        lambda d: epochs_recorded(d) >= 2 and in_progress_files(d),
    ),
    "export": ([], 2, lambda d: (d / "export" / ".saved_model.partial").exists()),
}


@pytest.mark.slow
@pytest.mark.parametrize("point", KILL_POINTS)
def test_sigkill_then_the_same_command_finishes_the_run(tmp_path, point):
    extra, epochs, condition = KILL_POINTS[point]
    args = [*BASE, *extra, f"trainer.epochs={epochs}"]
    run_dir = tmp_path / "run"
    process = start(run_dir, *args)
    try:
        hit = wait_for(process, lambda: condition(run_dir))
    finally:
        kill(process)
    assert hit, f"the run ended before the kill point {point}: {(tmp_path / 'run.stderr').read_text()[-2000:]}"
    assert not (run_dir / "metrics.json").exists()  # killed: nothing claims the run is complete
    record = finish(run_dir, *args, epochs=epochs)
    log = (run_dir / "train.log").read_text()
    if point == "export":
        assert "training ended in an earlier attempt" in log  # only the export is redone
        assert {k: record["resumed"][k] for k in ("kind", "epoch")} == {"kind": "after_training", "epoch": epochs}
    elif point != "first_epoch":
        assert "resumed from" in log
        assert record["resumed"]["kind"] == "saved_state" and 2 <= record["resumed"]["epoch"] < epochs
    assert record["best"]["val_accuracy"] > 0.5


def signal_when_training(
    run_dir: Path, args: list[str], signum, module: str | None = None
) -> tuple[subprocess.Popen, str]:
    """Start a run (`python -m MODULE ARGS` when a module is named), send `signum` once it has recorded an epoch;
    returns the process and its stderr."""
    process = start(run_dir, *args, module=module)
    try:
        assert wait_for(process, lambda: epochs_recorded(run_dir) >= 1), "the run ended before the signal"
        time.sleep(0.2)  # into the next epoch
        process.send_signal(signum)
        process.wait(timeout=120)
    finally:
        kill(process)
    return process, (run_dir.parent / f"{run_dir.name}.stderr").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("loop,signum", [("fit", signal.SIGTERM), ("custom", signal.SIGINT), ("fit", signal.SIGUSR2)])
def test_sigterm_or_ctrl_c_saves_the_state_and_the_next_run_resumes(tmp_path, loop, signum):
    args = [*BASE, f"trainer.loop={loop}", "trainer.epochs=3", "trainer.deterministic=true"]
    run_dir = tmp_path / "run"
    process, stderr = signal_when_training(run_dir, args, signum)
    name = signal.Signals(signum).name
    assert process.returncode == 128 + signum
    message = last_line(stderr)
    resume = f"python train.py {' '.join(args)} hydra.run.dir={run_dir}"
    assert re.fullmatch(
        rf"Stopped: interrupted by {name}: state saved at (epoch \d, step \d+|the end of epoch \d) "
        rf"\({re.escape(str(run_dir))}/checkpoints/state\); resume with: {re.escape(resume)}",
        message,
    ), message
    assert "Traceback" not in stderr
    record = read_run_record(run_dir)
    assert record["status"] == "interrupted" and name in record["error"]
    assert record["resumed"] == {"kind": "fresh", "epoch": 0, "reason": "a new run: nothing saved in its directory"}
    resumed = finish(run_dir, *args, epochs=3)["resumed"]  # after the epochs the interrupted attempt recorded
    assert (resumed["kind"], resumed["epoch"]) == ("saved_state", record["epochs_run"]) and record["epochs_run"] >= 1
    # That the custom loop resumes exactly (the same weights as a run never stopped) is held from a signal's save by
    # tests/trainer/test_step_validation.py (SIGTERM mid-epoch), from a periodic save by tests/contract/test_resume.py.


@pytest.mark.slow
def test_sigusr2_is_handed_to_the_schedulers_handler_after_the_state_is_saved(tmp_path):
    """submitit's convention: SIGUSR2 before pre-emption or the time limit; its own handler requeues the job.
    tfhydra saves and records first, then gives the signal back; the requeued command resumes."""
    args = [*BASE, "trainer.epochs=3"]
    run_dir, marker = tmp_path / "run", tmp_path / "handler-saw"
    process, stderr = signal_when_training(run_dir, [str(marker), *args], signal.SIGUSR2, module="requeue_handler")
    assert process.returncode == 3, stderr[-2000:]  # the scheduler's handler ended the process
    assert marker.read_text() == "SIGUSR2 interrupted"  # ... after tfhydra wrote the record
    assert list((run_dir / "checkpoints" / "state").rglob("*.index"))  # and saved the state
    finish(run_dir, *args, epochs=3)
    assert "resumed from" in (run_dir / "train.log").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_a_damaged_latest_checkpoint_falls_back_to_the_previous_one(tmp_path, loop):
    args = [*BASE, f"trainer.loop={loop}", "trainer.epochs=4"]
    run_dir = tmp_path / "run"
    process = start(run_dir, *args)
    try:
        assert wait_for(process, lambda: epochs_recorded(run_dir) >= 3), "the run ended too early"
    finally:
        kill(process, signal.SIGTERM)
    state = run_dir / "checkpoints" / "state"
    indexes = sorted(state.rglob("ckpt-*.index"), key=lambda p: int(p.stem.split("-")[1]))
    assert len(indexes) == 2  # the newest and one to fall back on
    newest = indexes[-1]
    data = next(newest.parent.glob(f"{newest.stem}.data-*"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # truncated, as by a full disk
    finish(run_dir, *args, epochs=4)
    log = (run_dir / "train.log").read_text()
    assert f"checkpoint {newest.with_suffix('')} is damaged" in log
    assert f"resuming from the previous checkpoint {indexes[0].with_suffix('')}" in log


@pytest.mark.slow
def test_a_full_disk_after_training_is_one_line_and_keeps_the_trained_state(tmp_path):
    marker = tmp_path / "disk-is-full"
    marker.touch()
    args = [
        *BASE,
        "trainer.epochs=2",
        f"+trainer.callbacks=[{{_target_: user_code.DiskFullAfterTraining, marker: '{marker}'}}]",
    ]
    run_dir = tmp_path / "run"
    result = run_cli(*args, f"hydra.run.dir={run_dir}")
    assert result.returncode == 1
    message = last_line(result.stderr)
    assert message.startswith(f"Error: {run_dir}/checkpoints/") and "cannot write it (File too large)" in message
    assert f"the trained state is kept in {run_dir}/checkpoints; finish the run with: python train.py " in message
    assert message.endswith(f"hydra.run.dir={run_dir})")
    assert "Traceback" not in result.stderr
    assert read_run_record(run_dir)["status"] == "failed"
    marker.unlink()  # space freed
    finish(run_dir, *args, epochs=2)
    assert "resumed from" in (run_dir / "train.log").read_text()  # no epoch trained twice


@pytest.mark.slow
def test_an_unwritable_export_directory_is_one_line_and_only_the_export_is_redone(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "export").write_text("a file where the export directory goes")
    args = [*BASE, "trainer.epochs=2"]
    result = run_cli(*args, f"hydra.run.dir={run_dir}")
    assert result.returncode == 1
    message = last_line(result.stderr)
    assert message.startswith(f"Error: {run_dir}/export") and "cannot write it (" in message, message
    assert "Traceback" not in result.stderr
    assert (run_dir / "checkpoints" / "last.weights.h5").is_file()
    (run_dir / "export").unlink()
    resumed = finish(run_dir, *args, epochs=2)["resumed"]
    assert "training ended in an earlier attempt (2 epochs)" in (run_dir / "train.log").read_text()
    assert resumed == {
        "kind": "after_training",
        "epoch": 2,
        "reason": "training ended in an earlier attempt (2 epochs): redoing what came after it",
    }
