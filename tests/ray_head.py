"""A one-node Ray cluster on 127.0.0.1 as a pytest fixture, shared by tests/launch/test_sweep_cluster.py and
tests/logger/test_broken_trackers_and_sweeps.py."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import TESTS
from tb_server import free_port

SWEPT_KEYS_ENV = "TFHYDRA_SWEPT_KEYS"


class HeadAddress(str):
    """The head's host:port, which also knows the process group of the head's processes (its GCS, raylet and
    the workers they start): tests/launch/test_sweep_cluster.py stops and continues it."""

    process_group: int


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """A one-node Ray cluster on 127.0.0.1, started like a user starts one (`ray start --head`), in a directory
    of its own and from an environment without the sweep's variables; stopped with its process group."""
    home = tmp_path_factory.mktemp("ray")
    # Ray's socket paths must fit AF_UNIX's 107 bytes: its session folder lives under a short /tmp folder, not
    # under pytest's (an xdist worker's tmp_path, .../popen-gw1/ray0/t/session_.../sockets/plasma_store, is too long)
    sessions = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != SWEPT_KEYS_ENV}
    # RAY_AUTH_MODE=disabled on both sides: a token file some other Ray command left in ~/.ray (`ray get-auth-token
    # --generate`) makes the head demand it while the sweep's client does not send it (AuthenticationError)
    env.update(PYTHONPATH=str(TESTS), RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    log = (home / "head.log").open("w")
    head = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("ray")),
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            f"--ray-client-server-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--temp-dir={sessions}",
        ],
        cwd=home,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while "Ray runtime started" not in (home / "head.log").read_text():
            assert head.poll() is None and time.monotonic() < deadline, (home / "head.log").read_text()[-3000:]
            time.sleep(0.5)
        address = HeadAddress(f"127.0.0.1:{port}")
        address.process_group = head.pid  # start_new_session: the group is the head's pid
        yield address
    finally:
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops the cluster's processes when it ends
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        log.close()
        shutil.rmtree(sessions, ignore_errors=True)
