"""Two loopback workers of a `strategy=multi_worker` cluster as real `python train.py` processes, stopped and
started again: shared by tests/strategy/test_distribute.py and tests/contract/test_faults_while_training.py."""

import json
import os
import signal
import socket

from conftest import ROOT, TESTS, start_cli
from run_processes import epochs_recorded, kill, wait_for


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def start_workers(tmp_path, args, environments, attempt):
    """Worker processes of a cluster, each in tmp_path/worker<i>; stderr into tmp_path/worker<i>.<attempt>.stderr.
    Forked from the test server as `start_cli` does: TF_CONFIG and SLURM's variables are read when the strategy is
    built, not when TensorFlow is imported, so a forked worker is the same as a fresh process (one TensorFlow import
    fewer per worker: about 9 s of CPU each on the 2-core machine)."""
    processes = []
    for index, environment in enumerate(environments):
        env = {**os.environ, "PYTHONPATH": str(TESTS), **environment}
        env.pop("HYDRA_FULL_ERROR", None)
        stderr = tmp_path / f"worker{index}.{attempt}.stderr"
        processes.append(
            start_cli(*args, f"hydra.run.dir={tmp_path / f'worker{index}'}", cwd=ROOT, env=env, stderr=stderr)
        )
    return processes


def stop_a_cluster_after_one_epoch(tmp_path, loop: str):
    """Two loopback workers training 3 epochs; once the chief recorded an epoch, SIGTERM to the non-chief only.
    Returns the workers' exit codes, (args, environments) to start them again, and their run directories."""
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    environments = [
        {"TF_CONFIG": json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}})}
        for i in range(2)
    ]
    args = [
        "model=mlp",
        "data.batch_size=8",
        "logging.histogram_freq=0",
        "trainer.epochs=3",
        "strategy=multi_worker",
        f"trainer.loop={loop}",
    ]
    processes = start_workers(tmp_path, args, environments, attempt=1)
    try:
        assert wait_for(processes[0], lambda: epochs_recorded(tmp_path / "worker0") >= 1), "the cluster ended early"
        processes[1].send_signal(signal.SIGTERM)
        codes = [p.wait(timeout=180) for p in processes]
    finally:
        for p in processes:
            kill(p)
    return codes, (args, environments), (tmp_path / "worker0", tmp_path / "worker1")


def start_the_cluster_again(tmp_path, args, environments) -> list[int]:
    """The same two workers started again (attempt 2); their exit codes."""
    processes = start_workers(tmp_path, args, environments, attempt=2)
    try:
        return [p.wait(timeout=300) for p in processes]
    finally:
        for p in processes:
            kill(p)
