"""The terminal (tfhydra/platform/terminal.py, EpochProgress in tfhydra/trainer/progress.py), driven as a
person sees it.

A real terminal is tmux's: the command runs in a detached tmux session and the test reads the screen with
`capture-pane` while the epoch trains. Without a terminal (pipes, as in CI) the output is the log's lines only.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid

import pytest
from conftest import ROOT, run_cli

NOISE = ("oneDNN", "cuInit", "absl::InitializeLog", "cuda_platform", "cudart_stub", "cpu_feature_guard")
BAR = re.compile(r"epoch 1/2\s+\d+%\|.*\|\s*(\d+)/(\d+) steps")


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30, check=True).stdout


@pytest.fixture
def terminal():
    """A detached tmux session of 150x40 characters; yields (run, screen), kills it at the end."""
    assert shutil.which("tmux"), "tmux is needed (.ci/run installs it with apt-get)"
    name = f"tfhydra-{uuid.uuid4().hex[:8]}"

    def run(command: str) -> None:
        env = f"TERM=xterm-256color PYTHONPATH={shlex.quote(str(ROOT / 'tests'))}"
        tmux(
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "150",
            "-y",
            "40",
            f"cd {shlex.quote(str(ROOT))} && env {env} {command}; echo EXIT=$?; sleep 600",
        )

    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", name)

    yield run, screen
    subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, timeout=30)


@pytest.mark.slow
def test_a_terminal_shows_a_live_bar_and_no_start_up_noise(terminal, tmp_path):
    run, screen = terminal
    run_dir = tmp_path / "run"
    run(
        f"{shlex.quote(sys.executable)} train.py model=mlp data=synthetic data.shape=[8,8,1] data.num_classes=4 "
        "data.train_size=40000 data.val_size=64 data.batch_size=8 trainer.epochs=2 "
        f"logging.histogram_freq=0 hydra.run.dir={run_dir}"
    )
    seen, totals, first_screen = [], set(), None
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        text = screen()
        if first_screen is None and "run directory" in text:
            first_screen = text
        bars = BAR.findall(text)
        assert len(bars) <= 1, text  # one bar, redrawn in place: never a trail of them
        if bars:
            seen.append(int(bars[0][0]))
            totals.add(int(bars[0][1]))
        if "EXIT=" in text or len(set(seen)) >= 3:
            break
        time.sleep(0.3)
    assert first_screen is not None, screen()
    assert not [n for n in NOISE if n in first_screen], first_screen  # no C++ start-up lines
    assert len(set(seen)) >= 3 and seen == sorted(seen), (seen, screen())  # redrawn in place, counting up
    assert totals == {5000}  # of the epoch's 40000 / 8 steps

    while time.monotonic() < deadline and "EXIT=" not in screen():
        time.sleep(0.5)
    final = screen()
    assert "EXIT=0" in final, final
    assert "look further: tensorboard --logdir" in final  # the end summary
    log = (run_dir / "train.log").read_text()
    assert len(re.findall(r"\] - epoch \d/2 ", log)) == 2  # one line per epoch ...
    assert "\r" not in log and "%|" not in log and "█" not in log  # ... and never a bar


def test_without_a_terminal_the_output_is_the_logs_lines(tmp_path):
    result = run_cli("model=mlp", "trainer.epochs=2", "logging.histogram_freq=0", f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 0, result.stderr[-2000:]
    messages = [line.split("] - ", 1)[1] for line in result.stdout.splitlines()]
    assert [m.split(" ", 2)[:2] for m in messages] == [
        ["run", "directory"],
        ["start:", "fresh"],  # how the run starts, decided once (tfhydra/record/resume.py)
        ["devices:", "['/device:CPU:0']"],
        ["data.cache=auto:", "train"],
        ["model=mlp:", "52650"],
        ["epoch", "1/2"],
        ["epoch", "2/2"],
        ["test", "(360"],  # the kept weights, measured once on the test split
        ["completed:", "best"],
        ["exported", "(in"],
        ["look", "further:"],
    ]
    assert (
        messages[0] == f"run directory {tmp_path / 'run'}; overrides: model=mlp trainer.epochs=2 "
        "logging.histogram_freq=0"
    )
    assert "\r" not in result.stderr and "%|" not in result.stderr  # no bar on a pipe
    assert not [n for n in NOISE if n in result.stderr], result.stderr  # nor TensorFlow's start-up lines
