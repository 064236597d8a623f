"""A real sweep killed mid-way (SIGKILL to its process group, or Ctrl-C): the jobs that completed keep
their results, and `python -m tfhydra.sweep summary <sweep dir>` lists every job of the sweep as
completed, interrupted or not started."""

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, TESTS, read_run_record, run_module
from shared_runs import copy_run, made_once

LRS = ["0.001", "0.0005", "0.0002", "0.0001"]
# Long enough per job (several seconds) that job 1 is still training when the test sees it start.
# One job after another (Hydra's basic launcher): the kill finds exactly one job training and two not started.
# The concurrent default launcher's interruption is tested in tests/launch/test_launcher.py.
SWEEP = [
    "-m",
    "hydra/launcher=basic",
    f"optimizer.lr={','.join(LRS)}",
    "model=mlp",
    "trainer.epochs=15",
    "logging.histogram_freq=0",
    "logging.write_graph=false",
    "export.formats=[]",
]
JOBS = [f"{n}_optimizer.lr={lr}" for n, lr in enumerate(LRS)]


def start_sweep(cwd):
    """`python train.py -m ...` in its own process group, as a terminal would run it."""
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.pop("HYDRA_FULL_ERROR", None)
    out, err = (cwd / "sweep.stdout").open("w"), (cwd / "sweep.stderr").open("w")
    return subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), *SWEEP],
        cwd=cwd,
        env=env,
        stdout=out,
        stderr=err,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_for(process, cwd, condition, timeout=240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        if process.poll() is not None:
            stderr = (cwd / "sweep.stderr").read_text()[-3000:]
            pytest.fail(f"the sweep ended ({process.returncode}) too early:\n{stderr}")
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    pytest.fail(f"timed out:\n{(cwd / 'sweep.stderr').read_text()[-3000:]}")


def status_of(job_dir):
    try:
        return read_run_record(job_dir).get("status")
    except (OSError, ValueError):
        return None


def interrupt_after_first_job(tmp_path, sig):
    """Start the sweep, wait until job 0 completed and job 1 recorded an epoch, then send `sig`."""
    process = start_sweep(tmp_path)
    sweeps = lambda: list((tmp_path / "outputs" / "multirun").glob("*/*"))  # noqa: E731
    (sweep,) = wait_for(process, tmp_path, sweeps)
    wait_for(process, tmp_path, lambda: status_of(sweep / JOBS[0]) == "completed")
    kept = (sweep / JOBS[0] / "metrics.json").read_bytes()
    wait_for(process, tmp_path, lambda: (sweep / JOBS[1] / "checkpoints" / "history.json").is_file())
    assert process.poll() is None and status_of(sweep / JOBS[1]) is None  # job 1 is training
    if sig == signal.SIGKILL:
        os.killpg(process.pid, sig)  # the whole group: nothing gets a chance to clean up
    else:
        os.kill(process.pid, sig)  # Ctrl-C
    process.wait(timeout=120)
    return process, sweep, kept


@pytest.fixture(scope="session")
def killed_sweep(tmp_path_factory):
    """One sweep SIGKILLed (its process group) once job 0 completed and job 1 recorded an epoch, shared by the
    tests that read it or continue it (each on its own copy: `copy_killed`): the home folder the sweep ran in
    (its outputs/multirun/... is relative to it), the sweep's path in it, job 0's record and the exit code."""

    def make(home):
        home.mkdir(parents=True)
        process, sweep, kept = interrupt_after_first_job(home, signal.SIGKILL)
        (home / "killed.json").write_text(
            json.dumps({"sweep": str(sweep.relative_to(home)), "returncode": process.returncode})
        )
        (home / "kept.json").write_bytes(kept)

    return made_once(tmp_path_factory, "trainer-killed-sweep", make)


def copy_killed(home, to):
    """A private copy of the killed sweep's home: (sweep, job 0's record at the kill, the sweep's exit code)."""
    copy_run(home, to)
    killed = json.loads((to / "killed.json").read_text())
    return to / killed["sweep"], (to / "kept.json").read_bytes(), killed["returncode"]


def summarize(sweep):
    return run_module(  # forked from the test server: the tool's answers, not its start-up
        "tfhydra.sweep", "summary", str(sweep), cwd=ROOT, env=dict(os.environ), timeout=120
    )


def check_summary(sweep, kept, result):
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert (sweep / JOBS[0] / "metrics.json").read_bytes() == kept  # the completed job's record is untouched
    rows = list(csv.DictReader((sweep / "summary.csv").open()))
    assert len(rows) == len(LRS)  # every job of the grid, started or not
    assert [(r["rank"], r["job"], r["status"], r["directory"]) for r in rows] == [
        ("1", "0", "completed", JOBS[0]),
        ("", "1", "interrupted", JOBS[1]),
        ("", "2", "not started", ""),
        ("", "3", "not started", ""),
    ]
    assert rows[0]["epochs"] == "15" and float(rows[0]["best_val_accuracy"]) == pytest.approx(
        json.loads(kept)["best"]["val_accuracy"]
    )
    assert int(rows[1]["epochs"]) >= 1  # what the interrupted job recorded before the interruption
    assert [r["overrides"] for r in rows[2:]] == ["optimizer.lr=0.0002", "optimizer.lr=0.0001"]
    assert "4 jobs (1 completed, 1 interrupted, 2 not started)" in result.stdout
    assert f"best job: {JOBS[0]}" in result.stdout
    markdown = (sweep / "summary.md").read_text()
    assert "4 jobs: 1 completed, 1 interrupted, 2 not started." in markdown
    assert f"| [{JOBS[1]}](<{JOBS[1]}/>) | `optimizer.lr=0.0005` | interrupted |" in markdown
    assert markdown.count("| not started |") == 2
    assert (sweep / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(sweep.glob(".*.partial"))


def test_a_killed_sweep_keeps_its_completed_jobs_and_its_summary_lists_every_job(killed_sweep, tmp_path):
    sweep, kept, returncode = copy_killed(killed_sweep, tmp_path / "home")
    assert returncode == -signal.SIGKILL
    assert not (sweep / "summary.csv").exists()  # the sweep never got to its end
    assert status_of(sweep / JOBS[1]) in (None, "running", "interrupted")
    assert not (sweep / JOBS[2]).exists()
    check_summary(sweep, kept, summarize(sweep))


@pytest.mark.slow
def test_ctrl_c_ends_the_sweep_and_the_interrupted_job_says_so(tmp_path):
    process, sweep, kept = interrupt_after_first_job(tmp_path, signal.SIGINT)
    assert process.returncode != 0
    assert status_of(sweep / JOBS[1]) == "interrupted"  # recorded by the job on KeyboardInterrupt
    stderr = (tmp_path / "sweep.stderr").read_text()
    assert f"python -m tfhydra.sweep summary {sweep.relative_to(tmp_path)}" in stderr
    assert not (sweep / JOBS[2]).exists()
    check_summary(sweep, kept, summarize(sweep))
