"""tfhydra's launcher (issue 28), the default of `-m`: placement (worker count, threads, GPUs) as pure functions of
an injected machine (no GPU here), Hydra's config of it, and real sweeps through it: jobs run concurrently in
reused workers, each record says which worker, threads and devices it had; Ctrl-C leaves them resumable."""

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import FAST, ROOT, TESTS, read_run_record, run_cli

from tfhydra.config.errors import ConfigError
from tfhydra.launch.placement import (
    WORKER_THREADS_ENV,
    cpu_only,
    launcher_gpus,
    plan_workers,
    split_threads,
    visible_gpus,
    worker_count,
)

TINY = [*FAST, "debug=fast", "model=mlp", "logging.write_graph=false"]


# ---- placement: pure functions --------------------------------------------------------------------------------


def test_no_gpu_means_cpu_workers_whose_threads_add_up_to_the_cores():
    plans = plan_workers(3, 2, [])
    assert [p.threads for p in plans] == [1, 1, 1]  # 3 jobs on 2 cores: 3 one-thread workers (measured faster)
    assert all("CUDA_VISIBLE_DEVICES" not in p.env and "TF_FORCE_GPU_ALLOW_GROWTH" not in p.env for p in plans)
    assert [p.env[WORKER_THREADS_ENV] for p in plans] == ["1", "1", "1"]
    assert [p.threads for p in plan_workers(2, 8, [])] == [4, 4]
    assert [p.threads for p in plan_workers(3, 8, [])] == [3, 3, 2]  # sums to 8, not 3 x 8
    assert sum(p.threads for p in plan_workers(40, 16, [])) == 24  # 24 workers, 1 thread each: never below 1


def test_one_job_or_one_worker_leaves_the_threads_to_tensorflow():
    assert [p.threads for p in plan_workers(1, 2, [])] == [0]
    assert [p.threads for p in plan_workers(5, 2, [], workers=1)] == [0]


def test_thread_split_options():
    assert split_threads(2, 3) == [1, 1, 1]
    assert split_threads(7, 3) == [3, 2, 2]
    assert split_threads(16, 4, threads=2) == [2, 2, 2, 2]  # a number is given to every worker
    with pytest.raises(ConfigError, match="hydra.launcher.threads"):
        split_threads(2, 2, threads="many")


def test_worker_count_from_the_machine_and_the_jobs():
    assert worker_count(3, 2, []) == 3 and worker_count(10, 2, []) == 3 and worker_count(2, 2, []) == 2
    assert worker_count(1, 16, []) == 1 and worker_count(10, 1, []) == 2
    assert worker_count(10, 2, [], workers=2) == 2 and worker_count(1, 2, [], workers=4) == 1
    for bad in (0, -1, "two", True):
        with pytest.raises(ConfigError, match="hydra.launcher.workers"):
            worker_count(3, 2, [], workers=bad)


@pytest.mark.parametrize(
    "gpus, jobs, seen, growth",
    [
        (["0"], 1, ["0"], [False]),
        (["0"], 3, ["0", "0"], [True, True]),  # more jobs than GPUs: two workers share it, with memory growth
        (["0", "1"], 2, ["0", "1"], [False, False]),
        (["0", "1"], 3, ["0", "1", "0"], [True, False, True]),  # only the shared GPU's workers grow
        (["0", "1", "2", "3"], 3, ["0", "1", "2"], [False] * 3),
        (["0", "1", "2", "3"], 10, ["0", "1", "2", "3"] * 2, [True] * 8),
        (["2", "5"], 4, ["2", "5", "2", "5"], [True] * 4),  # the ids as CUDA_VISIBLE_DEVICES named them
    ],
)
def test_gpus_round_robin_and_memory_growth_where_shared(gpus, jobs, seen, growth):
    plans = plan_workers(jobs, 16, gpus)
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in plans] == seen and [p.gpus for p in plans] == [(g,) for g in seen]
    assert [p.env.get("TF_FORCE_GPU_ALLOW_GROWTH") == "true" for p in plans] == growth


def test_a_per_job_gpu_memory_limit_replaces_memory_growth():
    plans = plan_workers(4, 16, ["0"], gpu_memory_mb=20000)
    assert all(p.env["TFHYDRA_GPU_MEMORY_MB"] == "20000" and "TF_FORCE_GPU_ALLOW_GROWTH" not in p.env for p in plans)


def test_gpus_found_without_tensorflow():
    smi = "GPU 0: NVIDIA H200 (UUID: GPU-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)\n"
    assert visible_gpus({}, smi) == ["0", "1"]
    assert visible_gpus({}, "") == []  # no nvidia-smi: CPU only
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "3,1"}, smi) == ["3", "1"]  # what the user gave wins
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, smi) == [] == visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}, smi)
    assert launcher_gpus([0, 2]) == ["0", "2"] and launcher_gpus("1,3") == ["1", "3"]
    assert launcher_gpus("none") == [] == launcher_gpus([])
    assert launcher_gpus("auto", {"CUDA_VISIBLE_DEVICES": "7"}) == ["7"]
    assert [cpu_only(o) for o in ("none", [], "auto", None, [0], "0")] == [True, True, False, False, False, False]


def test_a_worker_gets_its_share_of_threads_through_the_runtime(monkeypatch):
    from tfhydra.platform import runtime
    from tfhydra.sweep.kind import auto_threads

    monkeypatch.setenv(WORKER_THREADS_ENV, "3")
    assert runtime.worker_threads() == 3 and auto_threads() == 3 and runtime.data_threads() == 3
    monkeypatch.delenv(WORKER_THREADS_ENV)
    assert runtime.worker_threads() is None and runtime.data_threads() == runtime.available_cores()


# ---- Hydra's config ------------------------------------------------------------------------------------------


def test_tfhydra_is_the_default_launcher_and_basic_stays_available(tmp_path):
    import tfhydra

    launcher = tfhydra.compose().hydra.launcher
    assert launcher._target_.endswith("TfhydraLauncher")
    assert (
        launcher.workers,
        launcher.threads,
        launcher.gpus,
        launcher.gpu_memory_mb,
        launcher.max_jobs_per_worker,
    ) == ("auto", "auto", "auto", None, None)
    assert tfhydra.compose(["hydra/launcher=basic"]).hydra.launcher._target_.endswith("BasicLauncher")

    project = tmp_path / "conf"
    project.mkdir()
    (project / "config.yaml").write_text("defaults: [tfhydra, _self_]\ntrainer:\n  epochs: 3\n")
    cfg = tfhydra.compose(config_dir=project)
    assert cfg.trainer.epochs == 3 and cfg.hydra.launcher._target_.endswith("TfhydraLauncher")


# ---- real sweeps ---------------------------------------------------------------------------------------------


def records(sweep):
    jobs = sorted(d for d in sweep.iterdir() if d.is_dir())
    return {d.name: read_run_record(d) for d in jobs}


def test_three_jobs_on_two_workers_run_concurrently_and_a_worker_is_reused(tmp_path):
    sweep = tmp_path / "sweep"
    result = run_cli(
        "-m", "optimizer.lr=1e-3,5e-4,1e-4", *TINY, "hydra.launcher.workers=2", f"hydra.sweep.dir={sweep}", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = records(sweep)
    assert len(found) == 3 and {r["status"] for r in found.values()} == {"completed"}
    workers = [r["worker"] for r in found.values()]
    assert len({w["pid"] for w in workers}) == 2 and {w["index"] for w in workers} == {0, 1}
    assert sorted(w["job"] for w in workers) == [1, 1, 2]  # one worker ran two jobs: TensorFlow imported once
    assert [w["tensorflow_preloaded"] for w in workers] == [True] * 3  # forked from the server that imported it
    cores = len(os.sched_getaffinity(0))
    share = {0: (cores + 1) // 2, 1: max(1, cores // 2)}
    for w in workers:  # the cores split between the two workers, for TensorFlow's pools and tf.data's
        assert w["threads"] == {"intra_op": share[w["index"]], "inter_op": share[w["index"]], "data": share[w["index"]]}
    assert all(r["threads"] == r["worker"]["threads"]["intra_op"] for r in found.values())
    assert {r["worker"]["pid"] for r in found.values()} != {os.getpid()}
    assert "tfhydra launcher: 2 worker(s) for 3 job(s)" in result.stdout + result.stderr
    assert (sweep / "summary.csv").is_file() and "3 jobs (3 completed)" in result.stdout


@pytest.mark.slow
def test_the_basic_launcher_still_runs_jobs_one_after_another_in_its_own_process(tmp_path):
    sweep = tmp_path / "sweep"
    result = run_cli(
        "-m", "hydra/launcher=basic", "optimizer.lr=1e-3,5e-4", *TINY, f"hydra.sweep.dir={sweep}", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    workers = [r["worker"] for r in records(sweep).values()]
    assert len(workers) == 2 and len({w["pid"] for w in workers}) == 1
    assert {(w["index"], w["job"], w["tensorflow_preloaded"]) for w in workers} == {(None, None, None)}
    assert {w["threads"]["data"] for w in workers} == {len(os.sched_getaffinity(0))}


@pytest.mark.slow
def test_a_failing_job_does_not_take_down_the_others(tmp_path):
    sweep = tmp_path / "sweep"
    result = run_cli(
        "-m", "optimizer.lr=1e-3,1e4", *TINY, "trainer.steps_per_epoch=20", f"hydra.sweep.dir={sweep}", cwd=tmp_path
    )
    assert result.returncode == 1  # the diverged job says so at the end
    statuses = {name: r["status"] for name, r in records(sweep).items()}
    assert statuses == {"0_optimizer.lr=0.001": "completed", "1_optimizer.lr=10000.0": "diverged"}, statuses


@pytest.mark.slow
def test_ctrl_c_stops_the_workers_and_the_sweep_resumes(tmp_path):
    """SIGINT to the launching process alone (as `kill -INT`): each running job saves its state and records
    `interrupted`, the sweep exits non-zero, and running it again completes every job."""
    sweep = tmp_path / "sweep"
    argv = [
        "-m",
        "optimizer.lr=1e-3,5e-4,1e-4",  # two jobs running on the two workers and one not started yet
        "model=mlp",
        "trainer.epochs=6",  # stopped after the first epoch of two jobs; resumed, the three train the rest
        "logging.histogram_freq=0",
        "logging.write_graph=false",
        "export.formats=[]",
        "hydra.launcher.workers=2",
        f"hydra.sweep.dir={sweep}",
    ]
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.pop("HYDRA_FULL_ERROR", None)
    with (tmp_path / "stderr").open("w") as err:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "train.py"), *argv],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and len(list(sweep.glob("*/checkpoints/history.json"))) < 2:
            assert process.poll() is None, (tmp_path / "stderr").read_text()[-3000:]
            time.sleep(0.1)
        os.kill(process.pid, signal.SIGINT)
        assert process.wait(timeout=180) == 128 + signal.SIGINT
    stderr = (tmp_path / "stderr").read_text()
    assert "Traceback" not in stderr and f"tfhydra-sweep resume {sweep}" in stderr
    statuses = {name: r["status"] for name, r in records(sweep).items() if (sweep / name / "metrics.json").exists()}
    assert "interrupted" in statuses.values(), statuses
    assert set(statuses.values()) <= {"completed", "interrupted"}
    time.sleep(1)
    assert not [pid for pid in {r["worker"]["pid"] for r in records(sweep).values() if r} if _alive(pid)]  # none left
    again = run_cli(*argv, cwd=tmp_path, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert [r["status"] for r in records(sweep).values()] == ["completed"] * 3
    resumed = [name for name, status in statuses.items() if status == "interrupted"]
    assert all("resuming from the saved state" in (sweep / name / "train.log").read_text() for name in resumed)


@pytest.mark.slow
def test_workers_and_their_fork_server_end_when_the_launching_process_is_killed_alone(tmp_path):
    """SIGKILL to the launching process only (not its group): the fork server outlives it while a worker holds
    the server's pipe, so each worker watches the launching process itself and goes at once; then the server."""
    sweep = tmp_path / "sweep"
    env = {**os.environ}
    env.pop("HYDRA_FULL_ERROR", None)
    process = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "train.py"),
            "-m",
            "optimizer.lr=1e-3,5e-4",
            "model=mlp",
            "trainer.epochs=30",
            "logging.histogram_freq=0",
            "export.formats=[]",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and len(list(sweep.glob("*/checkpoints/history.json"))) < 2:
            assert process.poll() is None, "the sweep ended before it could be killed"
            time.sleep(0.1)
        servers = _children(process.pid, "forkserver")
        workers = [pid for server in servers for pid in _children(server)]
        assert len(servers) == 1 and len(workers) == 2, (servers, workers)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(pid) for pid in workers + servers):
            time.sleep(0.1)
        assert not [pid for pid in workers + servers if _alive(pid)]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def _children(parent, marker=""):
    """The pids whose parent is `parent` (and whose command line holds `marker`), from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{entry}/stat").read()
            command = open(f"/proc/{entry}/cmdline", "rb").read().decode(errors="replace")
        except (OSError, ValueError):
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and marker in command:
            found.append(int(entry))
    return found


def _alive(pid):
    """Running: a zombie (ended, not yet reaped by its parent) is not."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_a_worker_is_replaced_after_max_jobs_per_worker(tmp_path):
    sweep = tmp_path / "sweep"
    result = run_cli(
        "-m",
        "trainer.seed=1,2,3",
        *TINY,
        "hydra.launcher.workers=1",
        "hydra.launcher.max_jobs_per_worker=2",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    workers = [r["worker"] for r in records(sweep).values()]
    assert [r["status"] for r in records(sweep).values()] == ["completed"] * 3
    assert [w["job"] for w in workers] == [1, 2, 1] and len({w["pid"] for w in workers}) == 2
    assert "ended (exit code" not in result.stdout + result.stderr  # a planned replacement, not a lost worker
