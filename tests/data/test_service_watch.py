"""The tf.data service watchdog (tfhydra/data/service_watch.py) on its own, without TensorFlow: a process whose
main thread is busy (as if inside TensorFlow's C++) is ended in one line with the record written first. Each case
runs a small script in a real process, since the watchdog ends its process with os._exit."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from conftest import ROOT, last_line

SCRIPT = """
import collections, signal, sys, time, types
from omegaconf import OmegaConf
from tfhydra.data.service_watch import watch_service

port, timeout, progress_timeout, record, mode = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), *sys.argv[4:]
stop = types.SimpleNamespace(training=True, last_step=None, handled=collections.Counter(), signum=None)

def take(signum, frame):  # StopOnSignal's handler: counted, acted on at the next step boundary
    stop.handled[signum] += 1
    stop.signum = signum

# "ignore": a handler that never counts the signal, as if the main thread could not run it (inside C++)
signal.signal(signal.SIGTERM, take if mode == "take" else lambda *a: None)
cfg = OmegaConf.create({"address": f"grpc://127.0.0.1:{port}", "timeout": timeout,
                        "progress_timeout": progress_timeout})

def end(error, interrupted):
    open(record, "w").write(f"{'interrupted' if interrupted else 'failed'}: {error}")

with watch_service(cfg, stop, end):
    print("watching", flush=True)
    for _ in range(600):
        time.sleep(0.1)
        if mode == "take" and stop.signum:  # a long validation, then the step boundary acts on it
            time.sleep(8)
            print("acted on it", flush=True)
            sys.exit(143)
print("not ended", flush=True)
"""


class FakeDispatcher:
    """Answers every connection with an HTTP/2 SETTINGS frame, as a gRPC server does, and nothing else."""

    def __init__(self):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen()
        self.port = self.socket.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            connection.sendall(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
            connection.close()


def watched(
    tmp_path,
    port: int,
    timeout: float,
    progress_timeout: float,
    signal_after: float | None = None,
    mode: str = "ignore",
):
    record = tmp_path / "record.txt"
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(SCRIPT),
            str(port),
            str(timeout),
            str(progress_timeout),
            str(record),
            mode,
        ],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout.readline().strip() == "watching"
    if signal_after is not None:
        time.sleep(signal_after)
        process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    return process.returncode, last_line(stderr), record.read_text() if record.is_file() else None, stdout


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dispatcher_that_does_not_answer_ends_the_process_failed_after_the_timeout(tmp_path):
    port = closed_port()
    code, line, record, stdout = watched(tmp_path, port, timeout=1, progress_timeout=300)
    assert code == 1 and "not ended" not in stdout
    assert (
        line.startswith(f"Error: data.service.address=grpc://127.0.0.1:{port}: the dispatcher has not answered for ")
        and f"(cannot connect to 127.0.0.1:{port} within 1 s (Connection refused)); "
        "data.service.timeout=1; the state saved last is kept: the same command resumes"
        in line
    ), line
    assert record == f"failed: {line.removeprefix('Error: ')}"


def test_a_dispatcher_that_answers_but_no_step_ends_is_the_progress_deadline(tmp_path):
    dispatcher = FakeDispatcher()
    code, line, record, _ = watched(tmp_path, dispatcher.port, timeout=1, progress_timeout=2)
    assert code == 1
    assert (
        "no training step ended for 2 s (the dispatcher answers; are its workers running?); "
        "data.service.progress_timeout=2" in line
    ), line
    assert record == f"failed: {line.removeprefix('Error: ')}"


@pytest.mark.slow  # the signal's 5 s grace
def test_a_signal_the_main_thread_never_takes_ends_the_process_interrupted(tmp_path):
    dispatcher = FakeDispatcher()
    code, line, record, _ = watched(tmp_path, dispatcher.port, timeout=60, progress_timeout=300, signal_after=0.5)
    assert code == 128 + signal.SIGTERM
    assert line.startswith("Stopped: interrupted by SIGTERM while training waited inside TensorFlow"), line
    assert record.startswith("interrupted: interrupted by SIGTERM")


@pytest.mark.slow  # waits out the grace
def test_a_signal_the_main_thread_takes_is_left_to_it_while_the_dispatcher_answers(tmp_path):
    """A long validation between two step boundaries is not a stuck thread: the loop saves and stops itself."""
    dispatcher = FakeDispatcher()
    code, _, record, stdout = watched(
        tmp_path, dispatcher.port, timeout=60, progress_timeout=300, signal_after=0.5, mode="take"
    )
    assert code == 143 and "acted on it" in stdout and record is None
