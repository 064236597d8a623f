"""TensorFlow's lines that say nothing to the user are held back for the whole process and kept in train.log
(tfhydra/platform/quiet.py): the filter driven directly, then the commands the first hour runs."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import ROOT, TESTS, run_cli

# TensorFlow's C++ logger writes `I0000 00:00:... file.cc:N] ...` (also W, E, F)
CPP_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:[\d.]+ +\d+ [\w.]+:\d+\]", re.M)

FILTERED = r"""
import logging, os, sys
from pathlib import Path
from tfhydra.platform import quiet
quiet.QUIET.start()
os.write(2, b"I0000 00:00:1.0  1 port.cc:153] oneDNN custom operations are on. You may see ...\n")
os.write(2, b"E0000 00:00:2.0  1 util.cc:131] oneDNN supports DT_HALF only on platforms with AVX-512. Falling back\n")
os.write(2, b"a C++ line about the run\n")
print("python's own line", file=sys.stderr)
late = logging.getLogger("made_during_the_call")  # as TensorFlow's logger makes its handler on its first line
late.addHandler(logging.StreamHandler(sys.stderr))
late.propagate = False
logging.getLogger("tensorflow").warning("From x.py:1: colocate_with (from ops) is deprecated and will be removed "
                                        "in a future version.\nInstructions for updating:\nColocations handled")
quiet.keep_in(Path(sys.argv[1]))
os.write(2, b"E0000 00:00:3.0  1 util.cc:131] oneDNN supports DT_INT64 only on platforms with AVX-512.\n")
quiet.QUIET.release()
late.warning("a handler made during the call, after release")  # not `--- Logging error ---` (a closed stream)
os.write(2, b"after release\n")
"""


@pytest.mark.parametrize("switch", [{}, {"TFHYDRA_QUIET": "0"}, {"TFHYDRA_QUIET_START": "0"}])
def test_the_filter_holds_tensorflows_lines_back_for_the_whole_process_and_keeps_them(tmp_path, switch):
    log = tmp_path / "train.log"
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("TFHYDRA_QUIET")}
    result = subprocess.run(
        [sys.executable, "-c", FILTERED, str(log)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "PYTHONPATH": str(ROOT), **switch},
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    if switch:  # shown as they come, nothing kept
        assert len(CPP_LINE.findall(result.stderr)) == 3 and not log.exists()
        return
    assert "a C++ line about the run" in lines and "python's own line" in lines and lines[-1] == "after release"
    assert "a handler made during the call, after release" in lines and "Logging error" not in result.stderr
    assert not CPP_LINE.findall(result.stderr) and "deprecated" not in result.stderr, result.stderr
    kept = log.read_text().splitlines()
    assert [line.split("] ", 1)[0] for line in kept] == ["[held back from the console"] * 4
    # the Python logger's line is kept at once, the C++ lines as the filter thread reads them: order within may vary
    assert sorted(next(m for m in ("port.cc", "DT_HALF", "deprecated", "DT_INT64") if m in k) for k in kept) == sorted(
        ["port.cc", "DT_HALF", "deprecated", "DT_INT64"]
    )


def _noise(text: str) -> list[str]:
    return CPP_LINE.findall(text) + [line for line in text.splitlines() if "deprecated" in line]


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [
        ["keras=3"],
        [
            "precision=mixed",
            "model=keras_app",
            "model.arch=MobileNetV2",
            "+model.arch_args.alpha=0.35",
            "data=synthetic",
            "data.shape=[32,32,3]",
            "data.num_classes=3",
        ],
    ],
    ids=["keras3", "keras_app_mixed"],
)
def test_the_first_hours_commands_print_no_tensorflow_line(tmp_path, overrides):
    # a process of its own (an environment variable the fork server does not pass on): TensorFlow's start-up too.
    # Mixed precision (tf_keras' compatibility-check lines) rides with the Keras application (its own start-up
    # lines) in one process, which prints every line either prints alone, for one TensorFlow import.
    run_dir = tmp_path / "run"
    result = run_cli(*overrides, "debug=fast", f"hydra.run.dir={run_dir}", env={"TFHYDRA_QUIET": "1"})
    assert result.returncode == 0, result.stderr
    assert _noise(result.stdout + result.stderr) == [], result.stdout + result.stderr
    assert "[held back from the console]" in (run_dir / "train.log").read_text()


@pytest.mark.slow
def test_a_sweep_from_python_prints_no_tensorflow_line(tmp_path):
    script = (
        "import tfhydra; tfhydra.multirun(['model=mlp', 'debug=fast', 'optimizer.lr=1e-3,1e-2'], "
        f"sweep_dir={str(tmp_path / 'sweep')!r})"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": str(TESTS)},
    )
    assert result.returncode == 0, result.stderr
    assert "best job:" in result.stdout and _noise(result.stdout + result.stderr) == [], result.stdout + result.stderr


def test_a_terminal_gets_short_lines_and_a_pipe_the_whole_format(tmp_path):
    import logging
    import os

    from tfhydra.platform.terminal import shorten_console_lines

    leader, follower = os.openpty()
    logger = logging.getLogger("tfhydra-test-terminal")
    with open(follower, "w") as tty, open(tmp_path / "pipe.log", "w") as piped:
        whole = logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
        handlers = [logging.StreamHandler(tty), logging.StreamHandler(piped)]
        for handler in handlers:
            handler.setFormatter(whole)
            logger.addHandler(handler)
        shorten_console_lines(logger)
        record = logging.LogRecord("tfhydra", logging.INFO, "x.py", 1, "epoch 1/2 loss=0.5", None, None)
        warning = logging.LogRecord("tfhydra", logging.WARNING, "x.py", 1, "float16 on a CPU", None, None)
        short, full = (h.formatter.format(record) for h in handlers)
        assert re.fullmatch(r"\d\d:\d\d:\d\d epoch 1/2 loss=0.5", short), short
        assert full.endswith("][tfhydra][INFO] - epoch 1/2 loss=0.5"), full
        assert re.fullmatch(r"\d\d:\d\d:\d\d warning: float16 on a CPU", handlers[0].formatter.format(warning))
        for handler in handlers:
            logger.removeHandler(handler)
    os.close(leader)
