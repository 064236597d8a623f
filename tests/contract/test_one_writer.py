"""One writer per directory (issue 35, item 6; docs/reliability.md): a run directory and a sweep directory are locked
while a tfhydra process writes them (tfhydra/trust/locks.py); a second writer is refused in one line before it touches
anything; a lock left by a killed process is taken over; a sweep run again keeps a completed job only with its config.
Real processes, real locks: the lock holder is another process in every test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, TESTS, ForkedProcess, last_line, read_run_record, run_cli, start_cli

from tfhydra.config.errors import ConfigError
from tfhydra.record.rundir import LOCK_FILE
from tfhydra.trust.locks import check_free, check_sweep_free, hold, probe, release, take

HOLDER = """
import sys
from tfhydra.trust.locks import hold
hold(sys.argv[1], sys.argv[2])
print("held", flush=True)
sys.stdin.read()  # until the test closes the pipe (or kills this process)
"""


def holder(directory: Path, kind: str = "run") -> subprocess.Popen:
    """Another process holding `directory`'s lock until its stdin is closed."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory), kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout.readline().strip() == "held"
    return process


def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under `directory`: (size, modification time in ns)."""
    return {
        p.relative_to(directory).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in [directory, *sorted(directory.rglob("*"))]
    }


# ---- the lock itself (tfhydra/trust/locks.py), against another process --------------------------------------------


def test_a_directory_another_process_holds_is_refused_in_one_line(tmp_path):
    run = tmp_path / "run"
    process = holder(run)
    try:
        assert probe(run) == (process.pid, "run")
        with pytest.raises(ConfigError) as refused:
            take(run, "run")
        line = str(refused.value)
        assert line.startswith(
            f"{run}: another tfhydra process (pid {process.pid}) is writing this run directory; "
            "accepted: one writer at a time: wait for"
        ), line
        assert "hydra.run.dir" in line and "\n" not in line
        with pytest.raises(
            ConfigError,
            match=f"{run}: another tfhydra process \\(pid {process.pid}\\) is writing "
            f"this run directory \\({run / 'phases'} is in it\\)",
        ):
            check_free(run / "phases", inner=run / "phases")  # a directory below a held one is held too
    finally:
        process.stdin.close()
        process.wait()
    assert probe(run) == (None, None)  # ended: nothing holds it
    assert take(run, "run") is True
    release(run)


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path):
    run = tmp_path / "run"
    process = holder(run)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert (run / LOCK_FILE).read_text().split() == [str(process.pid), "run"]  # the file is still there ...
    assert probe(run) == (None, None)  # ... and holds nothing: the kernel let go with the process
    assert hold(run, "run") is True
    try:
        assert (run / LOCK_FILE).read_text().split() == [str(os.getpid()), "run"]
        assert hold(run, "run") is False  # this process holds it already: taking it again is a no-op
    finally:
        release(run)


def test_asking_creates_nothing_and_a_sweeps_jobs_are_asked_too(tmp_path):
    check_free(tmp_path / "new" / "run")
    check_sweep_free(tmp_path / "new")
    assert not (tmp_path / "new").exists()
    sweep = tmp_path / "sweep"
    process = holder(sweep / "screen" / "0_optimizer.lr=0.1")  # a single run someone started in a job's directory
    try:
        with pytest.raises(ConfigError, match=f"pid {process.pid}\\) is writing this run directory"):
            check_sweep_free(sweep)
    finally:
        process.stdin.close()
        process.wait()
    check_sweep_free(sweep)


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_a_lock_file_that_is_a_link_is_refused_and_its_target_untouched(tmp_path, link):
    target, run = tmp_path / "precious.txt", tmp_path / "run"
    target.write_text("keep me")
    run.mkdir()
    (os.symlink if link == "symbolic" else os.link)(target, run / LOCK_FILE)
    with pytest.raises(ConfigError, match=f"{run / LOCK_FILE}: "):
        hold(run, "run")
    assert target.read_text() == "keep me"


# ---- two runs into one directory ------------------------------------------------------------------------------------


def started_and_waiting(argv: list[str], marks: Path) -> ForkedProcess | subprocess.Popen:
    """`python train.py ARGV` (forked from the test server as `start_cli` does, stderr in marks/first.stderr), once
    its WaitForFile callback says training started: it then waits until `marks/go` exists."""
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    process = start_cli(*argv, cwd=ROOT, env=env, stderr=marks / "first.stderr")
    while not (marks / "started").exists():
        assert process.poll() is None, (marks / "first.stderr").read_text()[-2000:]
        time.sleep(0.1)
    return process


def waiting_run(run_dir: Path, marks: Path, *extra: str) -> tuple[ForkedProcess | subprocess.Popen, list[str]]:
    """`python train.py` into `run_dir`, held at the start of training until `marks/go` exists."""
    argv = [
        "model=mlp",
        "trainer.epochs=1",
        "logging.histogram_freq=0",
        f"trainer.callbacks=[{{_target_:user_code.WaitForFile,started:'{marks / 'started'}',go:'{marks / 'go'}'}}]",
        *extra,
        f"hydra.run.dir={run_dir}",
    ]
    return started_and_waiting(argv, marks), argv


@pytest.mark.slow
def test_two_runs_into_one_directory_the_second_is_refused_the_first_intact(tmp_path, compose_cfg):
    import tfhydra

    run = tmp_path / "run"
    first, argv = waiting_run(run, tmp_path)
    try:
        before = snapshot(run)
        second = run_cli("model=mlp", "trainer.epochs=2", f"hydra.run.dir={run}")  # another config, same directory
        assert second.returncode == 1 and "Traceback" not in second.stderr, second.stderr[-2000:]
        assert second.stderr.strip() == (
            f"Error: {run}: another tfhydra process (pid {first.pid}) is writing this run directory; accepted: one "
            f"writer at a time: wait for pid {first.pid} to end (the same command then continues the run, unless it "
            "completed), or another hydra.run.dir"
        )
        with pytest.raises(ConfigError, match=f"pid {first.pid}"):  # from Python too
            tfhydra.run(compose_cfg(["model=mlp", "trainer.epochs=2"]), run_dir=run)
        assert snapshot(run) == before  # not even .hydra/ or train.log was touched
    finally:
        (tmp_path / "go").touch()
        first.wait(timeout=600)
    assert first.returncode == 0, (tmp_path / "first.stderr").read_text()[-2000:]
    record = read_run_record(run)
    assert record["status"] == "completed" and record["epochs_run"] == 1 and record["worker"]["pid"] == first.pid
    assert record["overrides"] == argv[:-1]  # the first's, not the second's
    assert "trainer.epochs=1" in (run / ".hydra" / "overrides.yaml").read_text()
    import numpy as np
    import tensorflow as tf

    served = tf.saved_model.load(str(run / "export" / "saved_model"))
    probabilities = served.serve(tf.random.uniform([2, *record["data"]["input_shape"]])).numpy()
    assert np.allclose(probabilities.sum(axis=1), 1, atol=1e-4)


@pytest.mark.slow
def test_a_run_killed_while_training_leaves_a_lock_the_same_command_takes_over(tmp_path):
    run = tmp_path / "run"
    first, argv = waiting_run(run, tmp_path)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    assert (run / LOCK_FILE).read_text().split() == [str(first.pid), "run"]
    (tmp_path / "go").touch()
    again = run_cli(*argv)
    assert again.returncode == 0, again.stderr[-2000:]
    record = read_run_record(run)
    assert record["status"] == "completed" and record["worker"]["pid"] != first.pid


def outside_jobs(found: dict) -> dict:
    return {k: v for k, v in found.items() if k and not k.startswith(("0_", "1_"))}


# ---- sweeps ----------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_second_sweep_or_a_run_into_a_running_sweep_is_refused(tmp_path):
    sweep, marks = tmp_path / "sweep", tmp_path
    wait = f"trainer.callbacks=[{{_target_:user_code.WaitForFile,started:'{marks / 'started'}',go:'{marks / 'go'}'}}]"
    argv = [
        "-m",
        "model=mlp",
        "trainer.epochs=1",
        "optimizer.lr=0.001,0.002",
        "logging.histogram_freq=0",
        "export.formats=[]",
        wait,
        f"hydra.sweep.dir={sweep}",
    ]
    first = started_and_waiting(argv, marks)
    try:
        before = snapshot(sweep)
        second = run_cli("-m", "model=mlp", "trainer.epochs=2", "optimizer.lr=0.001,0.002", f"hydra.sweep.dir={sweep}")
        assert second.returncode == 1 and second.stderr.strip() == (
            f"Error: {sweep}: another tfhydra process (pid {first.pid}) is writing this sweep directory; accepted: one "
            f"writer at a time: wait for pid {first.pid} to end (tfhydra-sweep resume {sweep} then continues the "
            "sweep), or another hydra.sweep.dir"
        ), second.stderr[-2000:]
        job = sweep / "0_optimizer.lr=0.001"
        single = run_cli("model=mlp", "optimizer.lr=0.001", f"hydra.run.dir='{job}'")  # resume_command's advice
        assert single.returncode == 1 and single.stderr.strip().startswith(
            f"Error: {sweep}: another tfhydra process (pid {first.pid}) is writing this sweep directory ({job} is in "
            "it)"
        ), single.stderr[-2000:]
        assert outside_jobs(snapshot(sweep)) == outside_jobs(before)  # (the first sweep's jobs go on meanwhile)
    finally:
        (marks / "go").touch()
        first.wait(timeout=900)
    assert first.returncode == 0, (marks / "first.stderr").read_text()[-2000:]
    for name in ("0_optimizer.lr=0.001", "1_optimizer.lr=0.002"):
        record = read_run_record(sweep / name)
        assert record["status"] == "completed" and record["epochs_run"] == 1


@pytest.mark.slow
def test_a_sweep_run_again_with_another_config_keeps_no_job_and_rewrites_nothing(tmp_path):
    """glob() is not expanded by the pre-flight: the sweeper asks before Hydra writes anything
    (tfhydra/sweep/rerun.py)."""
    sweep = tmp_path / "sweep"
    argv = ["-m", "model=glob(mlp)", "debug=fast", f"hydra.sweep.dir={sweep}"]
    done = run_cli(*argv)
    assert done.returncode == 0, done.stderr[-2000:]
    job = sweep / "0_model=mlp"
    kept = {p: p.read_bytes() for p in (job / ".hydra" / "config.yaml", job / "metrics.json", sweep / "multirun.yaml")}
    jobs_before = snapshot(job)

    other = run_cli(*argv[:-1], "trainer.seed=7", argv[-1])
    assert other.returncode == 1 and "Traceback" not in other.stderr, other.stderr[-2000:]
    assert last_line(other.stderr) == (
        f"Error: hydra.sweep.dir={sweep}: its job 0_model=mlp was run with another config: it differs in trainer.seed; "
        "accepted: the command line that made that sweep (tfhydra-sweep resume <sweep dir> repeats it), or a new "
        "hydra.sweep.dir"
    )
    assert {p: p.read_bytes() for p in kept} == kept and snapshot(job) == jobs_before
    assert read_run_record(job)["status"] == "completed"

    same = run_cli(*argv)  # the same command: the completed job is kept as it is
    assert same.returncode == 0 and "kept: 0_model=mlp" in same.stdout, same.stderr[-2000:]
    assert (job / "metrics.json").read_bytes() == kept[job / "metrics.json"]
