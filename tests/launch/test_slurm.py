"""Sweeps on a real SLURM cluster (tests/slurm_cluster.py: munge, slurmctld and slurmd on 127.0.0.1), as a user
runs them on a login node: `hydra/launcher=submitit_slurm`, each job a task of one SLURM job array submitted by
real `sbatch`. The array and its threads, where each job ran in its record and the summary, a job cancelled
mid-run, and a job warned of its time limit or pre-emption (SIGUSR2, `scancel --signal=USR2`) saved, requeued and
resumed to completion with tfhydra's default launcher settings (no `max_num_timeout` on the command line)."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, TESTS, read_run_record, run_cli
from slurm_cluster import running_cluster, squeue

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

QUICK = ["model=mlp", "debug=fast"]
# two steps an epoch, about a third of a second each: signalled after its second or third epoch, a job has about
# seven seconds of training left (60 epochs, until 2026-12-07, trained 40 more after each resume for no assertion)
EPOCHS = 24
LONG = ["model=mlp", "debug=fast", f"trainer.epochs={EPOCHS}"]
REQUEUE_GUARD_S = 2  # a requeued job is started this long after it shows as pending (release_requeued)


@pytest.fixture(scope="module")
def slurm_cluster():
    """The environment under which `sbatch`, `squeue`, `scancel` and submitit's launcher use the module's cluster
    (`SLURM_CONF`), and under which its jobs import this checkout's tfhydra and the tests' user code."""
    with running_cluster() as env:
        yield {"SLURM_CONF": env["SLURM_CONF"], "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT)])}


def slurm_sweep(root: Path, *overrides: str) -> list[str]:
    """The sweep's command line: the launcher, its folders under `root`, one CPU per job."""
    return [
        "-m",
        "hydra/launcher=submitit_slurm",
        "hydra.launcher.cpus_per_task=1",
        # 10 minutes: submitit counts any SIGUSR2 as the time limit (its guaranteed time, min(0.8 x, x - 10 min),
        # is 0), so a signalled job is requeued only because tfhydra's launcher config allows it (max_num_timeout 3)
        "hydra.launcher.timeout_min=10",
        f"hydra.launcher.submitit_folder={root / 'submitit' / '%j'}",
        f"hydra.sweep.dir={root / 'sweep'}",
        *overrides,
    ]


def start_sweep(root: Path, env: dict, *overrides: str) -> subprocess.Popen:
    """The sweep's launching command in the background, as a user leaves it running in a terminal."""
    return subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), *slurm_sweep(root, *overrides)],
        cwd=root,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def epochs_recorded(job: Path) -> int:
    """The epochs a running job has saved (checkpoints/history.json: its record's history is written at the end)."""
    try:
        return len(json.loads((job / "checkpoints" / "history.json").read_text())["epochs"])
    except (OSError, ValueError, KeyError):
        return 0


def status(job: Path) -> str | None:
    try:
        return json.loads((job / "metrics.json").read_text()).get("status")
    except (OSError, ValueError):
        return None


def wait_for(done, sweep: subprocess.Popen, seconds: float = 400) -> None:
    """Until `done()`, while the sweep's launching command runs."""
    deadline = time.monotonic() + seconds
    while not done():
        assert sweep.poll() is None, sweep.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"not done after {seconds} s"
        time.sleep(0.1)


def wait_for_epochs(job: Path, epochs: int, sweep: subprocess.Popen) -> None:
    wait_for(lambda: epochs_recorded(job) >= epochs, sweep)


def array_task(env: dict, index: int) -> str:
    """The SLURM id (`<array job>_<index>`) of the array's running task `index`."""
    running = [j for j in squeue(env) if j["array_task"] == str(index) and j["state"] == "RUNNING"]
    assert len(running) == 1, squeue(env)
    return f"{running[0]['array_job']}_{index}"


def release_requeued(env: dict, task: str, seconds: float = 120) -> None:
    """SLURM holds a requeued job for two minutes (its reason: BeginTime); the test starts it sooner, as an
    administrator may (`scontrol update StartTime=now`), to keep the test's time down. Not in the second its
    earlier instance was killed: slurmd refuses a job whose credential is no newer than that kill, in whole
    seconds (slurmd.log: "Job 6 already killed, do not launch batch job"; slurmctld.log: "Killing non-startable
    batch JobId=6: Job credential revoked"), and the job leaves the queue failed. The hold is SLURM's guard
    against that; the kill came before the job showed as pending, so a start one second later is past it."""
    deadline = time.monotonic() + seconds
    while not any(f"{j['array_job']}_{j['array_task']}" == task and j["state"] == "PENDING" for j in squeue(env)):
        assert time.monotonic() < deadline, f"{task} was not requeued: {squeue(env)}"
        time.sleep(0.5)
    time.sleep(REQUEUE_GUARD_S)
    subprocess.run(["scontrol", "update", f"JobId={task}", "StartTime=now"], env=env, check=True)


def finish(sweep: subprocess.Popen, seconds: float = 600) -> tuple[int, str, str]:
    out, err = sweep.communicate(timeout=seconds)
    return sweep.returncode, out, err


def what_happened(root: Path, out: str, err: str) -> str:
    """A failure's evidence: the launching command's output (its log lines are on stdout), each job's status and
    error, and the end of each job's own submitit logs (what the job printed on the node, run by run)."""
    said = [f"stdout: {out[-2000:]}", f"stderr: {err[-2000:]}"]
    for job in sorted((root / "sweep").glob("[0-9]*")):
        found = json.loads((job / "metrics.json").read_text()) if (job / "metrics.json").exists() else {}
        said.append(f"{job.name}: {found.get('status')} {found.get('error')}")
    for log in sorted((root / "submitit").glob("*/*_log.*")):
        said.append(f"{log.name}: " + "\n".join(log.read_text(errors="replace").splitlines()[-25:]))
    return "\n".join(said)


def test_a_slurm_sweep_is_one_job_array_whose_records_and_summary_say_where_each_job_ran(slurm_cluster, tmp_path):
    result = run_cli(*slurm_sweep(tmp_path, "optimizer.lr=1e-3,5e-4", *QUICK), cwd=tmp_path, env=slurm_cluster)
    assert result.returncode == 0, result.stderr[-3000:]
    sweep = tmp_path / "sweep"
    records = [read_run_record(sweep / name) for name in ("0_optimizer.lr=0.001", "1_optimizer.lr=0.0005")]
    assert [r["status"] for r in records] == ["completed", "completed"]
    places = [r["scheduler"] for r in records]
    assert {p["kind"] for p in places} == {"slurm"} and [p["array_task_id"] for p in places] == ["0", "1"]
    assert places[0]["array_job_id"] == places[1]["array_job_id"] and places[0]["job_id"] != places[1]["job_id"]
    assert [(p["node_list"], p["restarts"], p["partition"]) for p in places] == [("localhost", 0, "debug")] * 2
    assert [r["threads"] for r in records] == [1, 1]  # hydra.launcher.cpus_per_task
    for record in records:  # the command the user typed, not submitit's `_submit.py` on the node
        assert "_submit" not in record["command"] and "train.py -m hydra/launcher=submitit_slurm" in record["command"]
        assert "optimizer.lr=1e-3,5e-4" in record["command"]
    rows = list(csv.DictReader((sweep / "summary.csv").open()))
    array = places[0]["array_job_id"]
    assert sorted(r["where"] for r in rows) == [f"slurm {array}_0 on localhost", f"slurm {array}_1 on localhost"]
    assert f"| slurm {array}_0 on localhost |" in (sweep / "summary.md").read_text()


def test_a_job_signalled_at_its_time_limit_saves_its_state_is_requeued_and_resumes_by_default(slurm_cluster, tmp_path):
    sweep = start_sweep(tmp_path, slurm_cluster, "optimizer.lr=1e-3,5e-4", *LONG)
    job = tmp_path / "sweep" / "0_optimizer.lr=0.001"
    wait_for_epochs(job, 3, sweep)
    task = array_task(slurm_cluster, 0)
    subprocess.run(["scancel", "--signal=USR2", task], env=slurm_cluster, check=True)
    release_requeued(slurm_cluster, task)
    code, out, err = finish(sweep)
    assert code == 0, what_happened(tmp_path, out, err)
    record = read_run_record(job)
    assert record["status"] == "completed" and record["epochs_run"] == EPOCHS
    assert record["scheduler"]["restarts"] == 1  # the same SLURM job, requeued once (SLURM_RESTART_COUNT)
    assert record["resumed"]["kind"] == "saved_state" and 3 <= record["resumed"]["epoch"] < EPOCHS
    assert len(record["history"]) == EPOCHS  # no epoch lost or trained twice
    other = read_run_record(tmp_path / "sweep" / "1_optimizer.lr=0.0005")
    assert other["status"] == "completed" and other["scheduler"]["restarts"] == 0
    assert "2 jobs (2 completed)" in out


def test_a_job_cancelled_mid_run_keeps_its_state_and_the_sweep_resumed_on_slurm_completes_it(slurm_cluster, tmp_path):
    """`scancel` sends SIGTERM (then SIGKILL after KillWait): the job saves its state and records `interrupted`.
    submitit learns of a cancelled job from SLURM's accounting (`sacct`), which this one-node cluster has not (no
    slurmdbd), and waits for it for good: tfhydra's watch sees every job ended (their records) and gone from
    `squeue`, and ends the sweep with its summary and one line 10 s later (tfhydra/launch/cluster_watch.py:
    LEFT_GRACE_S); `tfhydra-sweep resume` on the cluster continues the cancelled job from its saved state."""
    sweep = start_sweep(tmp_path, slurm_cluster, "optimizer.lr=1e-3,5e-4", *LONG)
    job, other = tmp_path / "sweep" / "1_optimizer.lr=0.0005", tmp_path / "sweep" / "0_optimizer.lr=0.001"
    wait_for_epochs(job, 2, sweep)
    subprocess.run(["scancel", array_task(slurm_cluster, 1)], env=slurm_cluster, check=True)
    wait_for(lambda: status(job) == "interrupted", sweep)
    cancelled = read_run_record(job)
    assert 2 <= cancelled["epochs_run"] < EPOCHS and "interrupted by SIGTERM: state saved" in cancelled["error"]
    wait_for(lambda: status(other) == "completed", sweep, seconds=600)
    ended = time.monotonic()
    code, _, err = finish(sweep, seconds=120)
    print(f"the sweep ended {time.monotonic() - ended:.1f} s after its last job")
    assert code == 1, err[-3000:]
    assert err.strip().splitlines()[-1] == "Error: 1 of 2 jobs did not complete: 1_optimizer.lr=0.0005 (interrupted)"
    completed = read_run_record(other)
    resumed = subprocess.run(
        [sys.executable, "-m", "tfhydra.sweep", "resume", str(tmp_path / "sweep"), "hydra/launcher=submitit_slurm"],
        cwd=tmp_path,
        env={**os.environ, **slurm_cluster},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    record = read_run_record(job)
    assert record["status"] == "completed" and len(record["history"]) == EPOCHS
    assert record["resumed"]["kind"] == "saved_state" and record["resumed"]["epoch"] == cancelled["epochs_run"]
    assert read_run_record(other) == completed  # the completed job is kept, not trained again
    assert "2 jobs (2 completed)" in resumed.stdout


def test_a_slurm_controller_that_stops_answering_ends_the_sweep_in_one_line_within_its_deadline(
    slurm_cluster, tmp_path
):
    """slurmctld SIGSTOPped while a job trains (a hung controller: submitit's `squeue`/`sacct` wait on it for
    good): with sweep.cluster_timeout=6 the launching command records the job lost and ends in one line. The job
    itself runs on under slurmd; it is cancelled once the controller continues."""
    longer = ["model=mlp", "debug=fast", "trainer.epochs=400"]  # still training when the command ends
    sweep = start_sweep(tmp_path, slurm_cluster, "optimizer.lr=1e-3", "sweep.cluster_timeout=6", *longer)
    controller = int((Path(slurm_cluster["SLURM_CONF"]).parent / "slurmctld.pid").read_text())
    try:
        wait_for(lambda: any((tmp_path / "sweep").glob("0_*")), sweep)
        (job,) = (tmp_path / "sweep").glob("0_*")  # one job: named after all its overrides (nothing is swept)
        wait_for_epochs(job, 1, sweep)
        os.kill(controller, signal.SIGSTOP)
        stopped = time.monotonic()
        code, _, err = finish(sweep, seconds=60)
        elapsed = time.monotonic() - stopped
        record = read_run_record(job)
    finally:
        os.kill(controller, signal.SIGCONT)
        subprocess.run(["scancel", "--full", "--user=root"], env=slurm_cluster, capture_output=True, timeout=30)
    print(f"exit {code} {elapsed:.1f} s after the stop")
    assert code == 1 and elapsed < 6 + 10, (code, elapsed, err[-3000:])
    assert "Traceback" not in err and [line for line in err.splitlines() if line.startswith("Error:")] == [
        f"Error: 1 of 1 jobs did not complete: {job.name} lost by the launcher (the SLURM controller "
        f"(scontrol ping) has not answered for {err.split('has not answered for ')[1].split(' ')[0]} s (scontrol "
        "ping gave no answer within 3 s); sweep.cluster_timeout=6; its jobs may still run on their nodes (squeue "
        "shows them once it answers): the same command continues the sweep once they have ended)"
    ], err[-3000:]
    assert err.strip().splitlines()[-1].startswith("Error: 1 of 1 jobs")
    assert record["status"] == "failed" and "the SLURM controller (scontrol ping) has not answered" in record["error"]
