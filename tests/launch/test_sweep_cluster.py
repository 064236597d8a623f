"""Sweeps on a cluster, as users run them: Hydra's submitit launcher in its local mode (the SLURM
launcher's code, with local processes for SLURM jobs) and Hydra's Ray launcher on a Ray cluster
started on 127.0.0.1. Named job directories, the summary, a failed job recorded and the exit code,
threads from what the launcher reserves per job, and the swept keys carried in each job's config
(a Ray worker inherits neither the launching shell's environment nor its directory)."""

import csv
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, TESTS, read_run_record, run_cli
from ray_head import SWEPT_KEYS_ENV, ray_cluster  # noqa: F401  (a fixture: a Ray head on 127.0.0.1)
from run_processes import wait_for
from submitit_sweep import COMPLETED, FAILED, JOBS, KILLED, submitit_sweep  # noqa: F401  (a fixture)

QUICK = ["model=mlp", "debug=fast"]


def job_dirs(sweep: Path) -> list[str]:
    return sorted(p.name for p in sweep.iterdir() if p.is_dir())


def handed_over_keys(job_dir: Path) -> str:
    """The swept keys as the job's own config holds them (.hydra/hydra.yaml)."""
    return yaml.safe_load((job_dir / ".hydra" / "hydra.yaml").read_text())["hydra"]["job"]["env_set"][SWEPT_KEYS_ENV]


@pytest.mark.slow
def test_a_submitit_sweep_names_its_jobs_records_the_failure_and_exits_1(
    submitit_sweep,  # noqa: F811  (pytest passes the fixture imported from submitit_sweep)
):
    result, sweep, submitit = submitit_sweep
    assert result.returncode == 1, result.stderr[-3000:]
    assert job_dirs(sweep) == JOBS
    completed, failed = read_run_record(sweep / COMPLETED), read_run_record(sweep / FAILED)
    assert completed["status"] == "completed" and completed["epochs_run"] == 1
    assert failed["status"] == "failed" and failed["error"] == "RuntimeError: injected failure at lr=0.0005"
    # the killed job's part of the line is asserted in tests/logger/test_broken_trackers_and_sweeps.py
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: 2 of 3 jobs did not complete: {KILLED} lost by the launcher (") and last.endswith(
        f"; {FAILED} (failed)"
    ), last
    assert len(list(submitit.glob("*/*_log.out"))) == 3  # submitit's own logs of each job, outside the sweep
    rows = list(csv.DictReader((sweep / "summary.csv").open()))
    assert [(r["rank"], r["job"], r["status"], r["optimizer.lr"], r["directory"]) for r in rows] == [
        ("1", "2", "completed", "0.0001", COMPLETED),
        ("", "0", "failed", "0.001", KILLED),
        ("", "1", "failed", "0.0005", FAILED),
    ]
    assert f"best job: {COMPLETED} (val_accuracy=" in result.stdout
    assert f"| 1 | [{COMPLETED}]" in (sweep / "summary.md").read_text()


@pytest.mark.slow
def test_each_submitit_job_uses_its_cpus_per_task_as_threads_and_gets_the_swept_keys_in_its_config(
    submitit_sweep,  # noqa: F811  (pytest passes the fixture imported from submitit_sweep)
):
    _, sweep, _ = submitit_sweep
    for job in (FAILED, COMPLETED):  # the killed job's record is the launcher's: it never said its threads
        assert read_run_record(sweep / job)["threads"] == 2, job  # hydra.launcher.cpus_per_task
    for job in JOBS:
        assert handed_over_keys(sweep / job) == '["optimizer.lr"]'


@pytest.mark.slow
def test_a_ray_sweep_on_a_running_cluster_names_its_jobs_and_writes_the_summary(
    ray_cluster,  # noqa: F811  (pytest passes the fixture imported from ray_head)
    tmp_path,
):
    """The default, relative hydra.sweep.dir: Ray's workers run in the cluster's directory, not this one."""
    result = run_cli(
        "-m",
        "hydra/launcher=ray",
        f"hydra.launcher.ray.init.address={ray_cluster}",
        "optimizer.lr=1e-3,5e-4",
        *QUICK,
        cwd=tmp_path,
        timeout=400,
        env={"RAY_AUTH_MODE": "disabled"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (sweep,) = (tmp_path / "outputs" / "multirun").glob("*/*")
    assert job_dirs(sweep) == ["0_optimizer.lr=0.001", "1_optimizer.lr=0.0005"]
    for job in job_dirs(sweep):
        record = read_run_record(sweep / job)
        assert record["status"] == "completed" and record["threads"] == 1, record  # Ray reserves 1 CPU per task
        assert handed_over_keys(sweep / job) == '["optimizer.lr"]'
        place = record["scheduler"]  # the Ray task that ran it, and the command the user typed
        assert place["kind"] == "ray" and place["node_ip"] and place["job_id"] and place["node_id"]  # Ray's own IP
        assert "-m hydra/launcher=ray" in record["command"] and "ray/_private" not in record["command"]
    rows = list(csv.DictReader((sweep / "summary.csv").open()))
    assert [(r["job"], r["status"], r["optimizer.lr"]) for r in rows] in (
        [("0", "completed", "0.001"), ("1", "completed", "0.0005")],
        [("1", "completed", "0.0005"), ("0", "completed", "0.001")],
    )
    assert [r["rank"] for r in rows] == ["1", "2"] and "sweep outputs/multirun/" in result.stdout
    ips = {read_run_record(sweep / job)["scheduler"]["node_ip"] for job in job_dirs(sweep)}
    assert {r["where"].rsplit(" on ", 1)[1] for r in rows} == ips and len(ips) == 1  # one node


def test_the_slurm_launcher_off_a_slurm_cluster_is_one_line_before_any_job(tmp_path):
    result = run_cli(
        "-m",
        "hydra/launcher=submitit_slurm",
        "hydra.launcher.partition=gpu",
        "optimizer.lr=1e-3,5e-4",
        *QUICK,
        cwd=tmp_path,
        env={"PATH": str(Path(sys.executable).parent)},
    )  # no srun on PATH
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: hydra/launcher=submitit_slurm: SLURM's srun is not on PATH; accepted: a machine of a SLURM cluster "
        "(its login node), or hydra/launcher=submitit_local to run the same jobs here"
    )
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("overrides,requeues", [([], 3), (["hydra.launcher.max_num_timeout=0"], 0)])
def test_the_slurm_launcher_requeues_at_the_time_limit_unless_told_not_to(tmp_path, overrides, requeues):
    """tfhydra's `hydra/launcher=submitit_slurm` (hydra_plugins/tfhydra_launcher/slurm_schema.py): Hydra's own
    says 0, which loses a job that reaches its time limit; the types of Hydra's schema still hold."""
    printed = ("--cfg", "hydra", "-p", "hydra.launcher")
    result = run_cli("hydra/launcher=submitit_slurm", *overrides, *printed, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    launcher = yaml.safe_load(result.stdout)
    assert (launcher["max_num_timeout"], launcher["signal_delay_s"]) == (requeues, 120)
    assert launcher["_target_"] == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"


def test_the_slurm_launchers_requeue_count_is_typed_by_hydras_schema(tmp_path):
    """A requeue count that is no number is refused in one line by the type of Hydra's schema (asked once, not in
    each case of the test above: the same command both times)."""
    printed = ("--cfg", "hydra", "-p", "hydra.launcher")
    refused = run_cli("hydra/launcher=submitit_slurm", "hydra.launcher.max_num_timeout=many", *printed, cwd=tmp_path)
    assert refused.returncode == 1 and "max_num_timeout" in refused.stderr.strip().splitlines()[-1]


def start_sweep(root: Path, *overrides: str) -> subprocess.Popen:
    """A sweep in a process of its own (the test signals the cluster and the process while it waits)."""
    env = {**os.environ, "PYTHONPATH": str(TESTS), "RAY_AUTH_MODE": "disabled"}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), "-m", *overrides, f"hydra.sweep.dir={root / 'sweep'}", *QUICK],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(root / "stderr").open("w"),
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["silence", "sigterm"])
def test_a_ray_head_stopped_mid_sweep_ends_it_in_one_line_within_its_deadline_or_at_sigterm(
    ray_cluster,  # noqa: F811  (pytest passes the fixture imported from ray_head)
    tmp_path,
    ending,
):
    """The head's processes (its GCS, raylet and the jobs' workers) SIGSTOPped once the jobs started, as a hung
    machine: its port still accepts connections, and `ray.get` in the launching command waits for good. With
    sweep.cluster_timeout=6 the sweep ends on its own; with the default 300, SIGTERM 1 s after the stop ends it."""
    timeout = ["sweep.cluster_timeout=6"] if ending == "silence" else []
    lrs = "optimizer.lr=1e-3,5e-4" if ending == "silence" else "optimizer.lr=1e-3"
    address = f"hydra.launcher.ray.init.address={ray_cluster}"
    # Longer than the test on any machine: the jobs must still be training when the head stops (with 50 epochs of
    # debug=fast's two steps, a fast machine finished job 0 before the deadline and the line said "1 of 2")
    sweep = start_sweep(tmp_path, "hydra/launcher=ray", address, lrs, *timeout, "trainer.epochs=5000")
    try:
        started = wait_for(sweep, lambda: any(p.is_dir() for p in (tmp_path / "sweep").glob("*_optimizer.lr=*")))
        assert started, (tmp_path / "stderr").read_text()[-3000:]
        os.killpg(ray_cluster.process_group, signal.SIGSTOP)
        stopped = time.monotonic()
        if ending == "sigterm":
            time.sleep(1)
            sweep.send_signal(signal.SIGTERM)
            stopped = time.monotonic()
        code = sweep.wait(timeout=60)
        elapsed = time.monotonic() - stopped
        print(f"{ending}: exit {code} {elapsed:.1f} s after the {'stop' if ending == 'silence' else 'SIGTERM'}")
    finally:
        os.killpg(ray_cluster.process_group, signal.SIGCONT)
        sweep.kill() if sweep.poll() is None else None
    stderr = (tmp_path / "stderr").read_text()
    said = [line for line in stderr.splitlines() if line.startswith(("Error:", "Stopped:"))]
    assert "Traceback" not in stderr and len(said) == 1 and said[0] == stderr.strip().splitlines()[-1], stderr[-3000:]
    dirs = sorted((tmp_path / "sweep").glob("*_optimizer.lr=*"))
    records = [read_run_record(d) for d in dirs]
    if ending == "silence":
        assert code == 1 and elapsed < 6 + 10, (code, elapsed)  # the deadline, a probe's cycle, the summary
        started = [d.name for d in dirs]
        unstarted = "".join(f"; {n} (not started)" for n in "01" if not any(d.startswith(n) for d in started))
        assert re.fullmatch(
            re.escape(f"Error: 2 of 2 jobs did not complete: {', '.join(started) or 'a job'} lost by the launcher (")
            + re.escape(f"the Ray head at {address} has not answered for ")
            + r"\d+"
            + re.escape(
                f" s (something listens on {ray_cluster} but it does not answer as a Ray head (no HTTP/2 answer "
                f"within 3 s)); sweep.cluster_timeout=6; "
                f"the state each job saved last is kept: the same command continues the sweep){unstarted}"
            ),
            said[0],
        ), said
        assert records and all(r["status"] == "failed" and "sweep.cluster_timeout=6" in r["error"] for r in records)
        # A job Ray had not yet started when its head stopped has no directory: the summary counts it as not started.
        counts = "2 failed" if len(dirs) == 2 else f"{len(dirs)} failed, {2 - len(dirs)} not started"
        assert f"2 jobs: {counts}." in (tmp_path / "sweep" / "summary.md").read_text()
    else:
        assert code == 128 + signal.SIGTERM and elapsed < 10, (code, elapsed)
        assert said == [
            "Stopped: SIGTERM: the sweep's running jobs were stopped with it; resume with: "
            f"tfhydra-sweep resume {tmp_path / 'sweep'}"
        ]
        assert [r["status"] for r in records] == ["interrupted"], records
