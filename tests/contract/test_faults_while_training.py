"""Faults while training, not only after it: a disk that fills up (a real ENOSPC on a small tmpfs, and a file-size
quota), an unwritable checkpoints/ directory, a best-weights file that cannot be read back before the export, and
one worker of a multi-worker cluster whose newest checkpoint is damaged. Each is one line naming the file and the
OS's reason (never the model's fault, never cut mid-reason), a record that says so, and the same command finishes."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import last_line, read_run_record, run_cli
from fault_code import unlock_directory
from run_processes import BASE, finish

FINISH = "; finish the run with: python train.py "


def callbacks(target: str, **arguments) -> str:
    fields = ", ".join(f"{k}: {json.dumps(v) if isinstance(v, str) else v}" for k, v in arguments.items())
    return f"+trainer.callbacks=[{{_target_: fault_code.{target}, {fields}}}]"


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs (a real file system that fills up: ENOSPC); skipped where it cannot be mounted (not root)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16M", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        reason = f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}"
        pytest.fail(reason) if os.environ.get("CI") else pytest.skip(reason)  # CI runs as root: it must run there
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=True)


def assert_one_line(result, run_dir: Path, starts: str, reason: str) -> str:
    """The failed run's last stderr line: `Error: <file>: cannot write it (<reason>...); accepted: ...` whole (it ends
    with the command that finishes the run), no traceback, and the same line as the record's error."""
    message = last_line(result.stderr)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert message.startswith(f"Error: {starts}") and f": cannot write it ({reason}" in message, message
    assert "model=" not in message.split(";")[0] and "training failed in TensorFlow" not in message
    assert FINISH in message and message.endswith(f"hydra.run.dir={run_dir})"), message
    record = read_run_record(run_dir)
    assert record["status"] == "failed" and record["error"] == message.removeprefix("Error: "), record["error"]
    return message


# (what fills up, loop, extra overrides, FillDisk's arguments, the file the line names, relative to the run)
FULL_DISK = {
    "best_weights": ("fit", [], {"epoch": 1}, "checkpoints/.best.partial.weights.h5"),
    "state_fit": ("fit", ["trainer.save_every=50"], {"epoch": 1, "step": 20}, "checkpoints/state/chief/ckpt-1_temp/"),
    "state_custom": ("custom", ["trainer.save_every=50"], {"epoch": 1, "step": 20}, "checkpoints/state/ckpt-1_temp/"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", FULL_DISK)
def test_a_full_disk_while_training_is_one_line_with_the_file_and_the_free_space(tmp_path, small_disk, case):
    loop, extra, where, named = FULL_DISK[case]
    marker, filler, run_dir = tmp_path / "disk-is-full", small_disk / "filler", small_disk / "run"
    marker.touch()
    args = [
        *BASE,
        f"trainer.loop={loop}",
        "trainer.epochs=2",
        *extra,
        callbacks("FillDisk", path=str(filler), marker=str(marker), leave_bytes=32768, **where),
    ]
    result = run_cli(*args, f"hydra.run.dir={run_dir}")
    message = assert_one_line(result, run_dir, f"{run_dir}/{named}", "No space left on device; ")
    free = re.search(r"No space left on device; ([\d.]+ (?:bytes|KiB)) free on (\S+)\)", message)
    assert free and Path(free[2]).is_relative_to(run_dir), message  # where the file was going
    assert f"is kept in {run_dir}/checkpoints" + FINISH in message
    filler.unlink()
    marker.unlink()  # space freed: the same command finishes the run
    finish(run_dir, *args, epochs=2)


@pytest.mark.slow
def test_a_file_size_quota_while_training_is_one_line(tmp_path):
    """RLIMIT_FSIZE (EFBIG) at the end of epoch 1: the best weights (over 64 KiB) are the first write that no longer
    fits (TensorBoard's events file no longer holds Keras' graph, issue 33: the model's graph is written once, at the
    start); the record (a few KiB) still does. Anyone can set it, root or not."""
    run_dir = tmp_path / "run"
    result = run_cli(
        *BASE, "trainer.epochs=2", callbacks("FileSizeLimit", limit_bytes=65536), f"hydra.run.dir={run_dir}"
    )
    assert_one_line(result, run_dir, f"{run_dir}/checkpoints/.best.partial.weights.h5", "File too large)")


def test_a_full_disk_under_tensorboard_is_one_line(small_disk):
    """TensorBoard's writer on a full disk raises ResourceExhaustedError from its flush: a write failure, named."""
    import tensorflow as tf
    from fault_code import fill_disk

    from tfhydra.config.errors import ConfigError, run_directory_writes
    from tfhydra.record.lifecycle import resume_command
    from tfhydra.record.rundir import RunPaths

    paths = RunPaths(small_disk / "run")
    writer = tf.summary.create_file_writer(str(paths.tensorboard_train))
    fill_disk(small_disk / "filler", leave_bytes=0)
    with (
        pytest.raises(ConfigError) as raised,
        run_directory_writes(paths, "the state saved last", resume_command(paths.root)),
    ):
        with writer.as_default():  # more than the page the file already has
            for step in range(200):
                tf.summary.histogram("weights", tf.random.normal([1000]), step=step)
    message = str(raised.value)
    assert re.match(
        rf"{paths.tensorboard_train}/events\.out\.tfevents\.\S+: cannot write it \(No space left on "
        rf"device; 0 bytes free on {paths.tensorboard_train}\); accepted: a writable run directory with "
        rf"free space \(the state saved last is kept in {paths.checkpoints}; finish the run with: ",
        message,
    )


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_an_unwritable_checkpoints_directory_while_training_or_resuming_is_one_line(tmp_path, loop):
    """checkpoints/ refuses new files after epoch 1 (immutable for root, read-only otherwise), then again before
    the same command resumes; once writable, that command finishes the run."""
    marker, run_dir = tmp_path / "locked", tmp_path / "run"
    checkpoints = run_dir / "checkpoints"
    marker.touch()
    reason = "Operation not permitted)" if os.geteuid() == 0 else "Permission denied)"
    args = [
        *BASE,
        f"trainer.loop={loop}",
        "trainer.epochs=3",
        callbacks("LockDirectory", path=str(checkpoints), marker=str(marker)),
    ]
    try:
        result = run_cli(*args, f"hydra.run.dir={run_dir}")
        assert_one_line(result, run_dir, f"{checkpoints}/.best.partial.weights.h5", reason)
        result = run_cli(*args, f"hydra.run.dir={run_dir}")  # still locked: the resume's first write fails
        assert_one_line(result, run_dir, f"{checkpoints}/", reason)
    finally:
        unlock_directory(checkpoints)
    marker.unlink()
    finish(run_dir, *args, epochs=3)


@pytest.mark.slow
def test_an_unreadable_best_checkpoint_exports_the_last_epoch_and_the_record_says_so(tmp_path):
    """best.weights.h5 cut in half before the export: the last epoch is exported, and the record's `exported` says
    so (which epoch, from which file, why) while `best` stays the best epoch (epoch 1: val_loss monitored `max`)."""
    run_dir = tmp_path / "run"
    result = run_cli(
        *BASE,
        "trainer.epochs=3",
        "trainer.monitor=val_loss",
        "trainer.monitor_mode=max",
        callbacks("DamageFile", path=str(run_dir / "checkpoints" / "best.weights.h5")),
        f"hydra.run.dir={run_dir}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = read_run_record(run_dir)
    assert record["status"] == "completed" and record["best"]["epoch"] == 1 and record["final"]["epoch"] == 3
    exported = record["exported"]
    assert exported["epoch"] == 3 and exported["weights"] == "checkpoints/last.weights.h5", exported
    assert exported["reason"].startswith("checkpoints/best.weights.h5 cannot be read (Unable to "), exported
    assert "truncated file" in exported["reason"] and exported["reason"].endswith(")")
    # the exported model is the last epoch's: its accuracy is that epoch's, not the best one's
    accuracy = record["compression"]["keras_val_accuracy"]
    assert accuracy == pytest.approx(record["final"]["val_accuracy"], abs=1e-6) != record["best"]["val_accuracy"]
    warnings = [line for line in (run_dir / "train.log").read_text().splitlines() if "[WARNING]" in line]
    assert [line.split(" - ", 1)[1] for line in warnings] == [
        f"{exported['reason']}: exporting the last epoch's weights (epoch 3) instead of the best epoch's (epoch 1)"
    ]


def test_restore_best_says_which_epoch_it_exports(tmp_path):
    """The best weights when they read back; the last ones, with the reason, when the best file was never written."""
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    from tfhydra.record.run_record import RunRecord
    from tfhydra.record.rundir import RunPaths
    from tfhydra.trainer.weights import restore_best

    paths = RunPaths(tmp_path / "run")
    paths.checkpoints.mkdir(parents=True)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    record = RunRecord(monitor="val_loss", best={"epoch": 2, "val_loss": 0.5}, final={"epoch": 4, "val_loss": 0.7})
    strategy = tf.distribute.get_strategy()
    assert restore_best(model, paths, strategy, record) == {
        "epoch": 4,
        "weights": "checkpoints/last.weights.h5",
        "reason": "checkpoints/best.weights.h5 was never written (no epoch was saved as the best by val_loss)",
    }
    best = [np.full(w.shape, 0.25, w.dtype) for w in model.get_weights()]
    model.set_weights(best)
    model.save_weights(str(paths.best_weights))
    model.set_weights([np.zeros_like(w) for w in best])
    assert restore_best(model, paths, strategy, record) == {
        "epoch": 2,
        "weights": "checkpoints/best.weights.h5",
        "reason": None,
    }
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), best, strict=True))


RESUMED = re.compile(r"resumed from \S+ (\(saved at epoch \d+, step \d+\)|at epoch \d+, step \d+)")


def checkpoint_step(prefix: Path, loop: str) -> str:
    """How a loop's "resumed from" line says the step that the checkpoint at `prefix` was saved at."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(prefix))
    names = ("ckpt_saved_epoch", "ckpt_saved_batch") if loop == "fit" else ("epoch", "step")
    epoch, step = (int(reader.get_tensor(f"{name}/.ATTRIBUTES/VARIABLE_VALUE")) for name in names)
    return f"(saved at epoch {epoch + 1}, step {step + 1})" if loop == "fit" else f"at epoch {epoch + 1}, step {step}"


def prefixes(directory: Path) -> list[Path]:
    """Checkpoint prefixes in `directory`, oldest first."""
    return [p.with_suffix("") for p in sorted(directory.glob("ckpt-*.index"), key=lambda p: int(p.stem.split("-")[1]))]


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_a_signal_to_one_worker_stops_the_cluster_at_one_step_and_it_resumes_there_or_past_a_damaged_checkpoint(
    tmp_path, loop
):
    """SIGTERM to the non-chief only: TensorFlow's PreemptionCheckpointHandler passes it on, both workers save after
    the same step and stop. One stopped cluster, started again twice: a copy as it was (both continue from that
    step), and the cluster itself after the non-chief's newest checkpoint is cut in half (both resume from the
    previous checkpoint, the newest both can read: one step on both). Each run completes."""
    from cluster_workers import start_the_cluster_again, stop_a_cluster_after_one_epoch

    codes, (args, environments), (chief_dir, worker_dir) = stop_a_cluster_after_one_epoch(tmp_path, loop)
    stderr = [(tmp_path / f"worker{i}.1.stderr").read_text() for i in range(2)]
    assert codes == [143, 143], [e[-1500:] for e in stderr]
    assert "with every worker of the cluster" in last_line(stderr[0]) and "Traceback" not in stderr[0] + stderr[1]
    record = read_run_record(chief_dir)
    assert record["status"] == "interrupted" and "with every worker of the cluster" in record["error"]
    chief_state = chief_dir / "checkpoints" / "state" / ("chief" if loop == "fit" else "")
    worker_state = worker_dir / "checkpoints" / "state" / "worker_1"
    chief_saved, worker_saved = prefixes(chief_state), prefixes(worker_state)
    assert [p.name for p in chief_saved] == [p.name for p in worker_saved] and len(chief_saved) == 2
    newest, expected = checkpoint_step(chief_saved[1], loop), checkpoint_step(chief_saved[0], loop)
    assert checkpoint_step(worker_saved[1], loop) == newest != expected  # the signal's step, saved by both

    intact = tmp_path / "intact"  # the stopped cluster as it was, started again in its own directories
    for directory in (chief_dir, worker_dir):
        shutil.copytree(directory, intact / directory.name, symlinks=True)
    assert_resumed_and_completed(start_the_cluster_again(intact, args, environments), intact, loop, newest)
    assert not (intact / worker_dir.name / "checkpoints").exists()
    assert not (intact / chief_dir.name / "checkpoints" / "state").exists()

    damaged = worker_saved[-1]
    data = next(damaged.parent.glob(f"{damaged.name}.data-*"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # the non-chief's only
    logs = assert_resumed_and_completed(start_the_cluster_again(tmp_path, args, environments), tmp_path, loop, expected)
    assert f"checkpoint {damaged} is damaged" in logs[1]
    assert (
        f"resuming from checkpoint {chief_saved[0]}, the newest that every worker can read back (newest "
        f"readable: worker 0 step {chief_saved[1].name.split('-')[1]}, worker 1 step "
        f"{chief_saved[0].name.split('-')[1]})"
    ) in logs[0]


def assert_resumed_and_completed(codes: list[int], cluster: Path, loop: str, step: str) -> list[str]:
    """The cluster in `cluster`/worker<i> started again: both workers resumed from `step` (as the loop's "resumed
    from" line says it) and the chief's record says the 3 epochs completed; the workers' train.log."""
    stderr = [(cluster / f"worker{i}.2.stderr").read_text() for i in range(2)]
    assert codes == [0, 0], [e[-1500:] for e in stderr]
    logs = [(cluster / f"worker{i}" / "train.log").read_text() for i in range(2)]
    assert [RESUMED.findall(log)[-1] for log in logs] == [step, step]  # one step on both
    record = read_run_record(cluster / "worker0")
    assert record["status"] == "completed" and record["epochs_run"] == 3 == len(record["history"])
    return logs
