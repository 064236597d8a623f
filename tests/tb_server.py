"""The real TensorBoard server over a log directory, queried through its HTTP data API.

Bounded in time and always stopped: the server runs in its own process group on a free
loopback port, and the group is terminated (then killed) when the `with` block ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class TensorBoard:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def get(self, path: str):
        with urllib.request.urlopen(self.base_url + path, timeout=20) as response:
            return json.loads(response.read())

    def post(self, path: str, body: dict):
        request = urllib.request.Request(
            self.base_url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=20) as response:
            return json.loads(response.read())

    def runs(self) -> list[str]:
        return self.get("/data/runs")

    def scalar_tags(self) -> dict[str, list[str]]:
        return {run: sorted(tags) for run, tags in self.get("/data/plugin/scalars/tags").items()}

    def experiment(self) -> dict:
        return self.post("/data/plugin/hparams/experiment", {})

    def session_groups(self) -> list[dict]:
        experiment = self.experiment()
        columns = [{"hparam": h["name"]} for h in experiment.get("hparamInfos", [])]
        columns += [{"metric": m["name"]} for m in experiment.get("metricInfos", [])]
        body = {
            "startIndex": 0,
            "sliceSize": 1000,
            "colParams": columns,
            "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
        }
        return self.post("/data/plugin/hparams/session_groups", body).get("sessionGroups", [])

    def wait_until(self, ready: Callable[[TensorBoard], bool], timeout: float) -> None:
        """TensorBoard loads event files in the background: poll until `ready` holds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if ready(self):
                    return
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"TensorBoard at {self.base_url} was not ready within {timeout:.0f} s")
            time.sleep(0.5)


@contextlib.contextmanager
def tensorboard_server(logdir: Path, log_file: Path, timeout: float = 90) -> Iterator[TensorBoard]:
    port = free_port()
    with open(log_file, "w") as output:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tensorboard.main",
                "--logdir",
                str(logdir),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--reload_interval",
                "1",
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        board = TensorBoard(f"http://127.0.0.1:{port}")
        board.wait_until(lambda b: server.poll() is None and isinstance(b.runs(), list), timeout)
        yield board
    finally:
        _stop(server)


def _stop(server: subprocess.Popen) -> None:
    """Terminate the server, then kill whatever is left of its process group (TensorBoard's data server)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        server.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGKILL)
    server.wait(timeout=10)
