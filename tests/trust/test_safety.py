"""Integrity and safety: records replaced whole (temporary file, then rename), and a run directory used by
`python -m tfhydra.evaluate` or `compression.from_run` checked before use, without running code from it."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import ROOT, TESTS, last_line, run_cli, run_module
from shared_runs import DIGITS_MLP, trained_run

# ---- atomic writes -----------------------------------------------------------------------------


def test_write_atomically_replaces_the_file_and_leaves_no_temporary(tmp_path):
    from tfhydra.record.report import write_atomically, write_json

    target = tmp_path / "summary.csv"
    target.write_text("old\n")
    write_atomically(target, "new,table\n")
    assert target.read_text() == "new,table\n"
    write_atomically(tmp_path / "plot.png", b"\x89PNG bytes")
    assert (tmp_path / "plot.png").read_bytes() == b"\x89PNG bytes"
    write_json(tmp_path / "metrics.json", {"status": "completed", "loss": float("nan")})
    assert json.loads((tmp_path / "metrics.json").read_text()) == {"status": "completed", "loss": None}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json", "plot.png", "summary.csv"]


def test_a_writer_that_raises_leaves_the_old_file_intact_and_no_temporary(tmp_path):
    from tfhydra.record.report import atomic_path, write_json

    target = tmp_path / "summary.png"
    target.write_bytes(b"old plot")
    with pytest.raises(RuntimeError, match="renderer crashed"):
        with atomic_path(target) as temporary:
            assert temporary.parent == tmp_path and temporary.name.startswith(".summary.png.")
            temporary.write_bytes(b"half a pl")  # what a crashing savefig leaves
            assert target.read_bytes() == b"old plot"  # a reader still sees the complete old file
            raise RuntimeError("renderer crashed")
    assert target.read_bytes() == b"old plot"
    assert [p.name for p in tmp_path.iterdir()] == ["summary.png"]

    (tmp_path / "metrics.json").write_text('{"status": "completed"}\n')
    with pytest.raises(TypeError):
        write_json(tmp_path / "metrics.json", {"status": "failed", "error": object()})  # not JSON
    assert json.loads((tmp_path / "metrics.json").read_text()) == {"status": "completed"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json", "summary.png"]


def test_a_writer_killed_mid_write_leaves_the_complete_old_file(tmp_path):
    """SIGKILL while the new content is half written: the file under its real name is the old one, whole."""
    target = tmp_path / "summary.md"
    target.write_text("old summary\n" * 1000)
    script = textwrap.dedent(f"""
        import time
        from tfhydra.record.report import atomic_path
        with atomic_path({str(target)!r}) as temporary:
            with open(temporary, "w") as out:
                out.write("new summ")
                out.flush()
                time.sleep(60)
                out.write("ary\\n")
    """)
    writer = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".summary.md.*.partial")) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert writer.poll() is None, "the writer ended before it was killed"
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=30)
    assert target.read_text() == "old summary\n" * 1000
    (partial,) = tmp_path.glob(".summary.md.*.partial")  # hidden, and never taken for the summary
    assert partial.read_text() == "new summ"


# ---- run directories checked before use --------------------------------------------------------

EVALUATE_ACCEPTED = (
    "accepted: the directory of a completed run with .hydra/ and export/saved_model or export/tflite/model.tflite"
)
FROM_RUN_ACCEPTED = (
    "accepted: the directory of a completed run (metrics.json with status completed, "
    ".hydra/config.yaml, checkpoints/last.weights.h5)"
)
MLP = ["model=mlp", "logging.histogram_freq=0", "logging.write_graph=false"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A real completed run: metrics.json, .hydra/, checkpoints/ and export/saved_model (the session's shared MLP run,
    tests/shared_runs.py: the tests break copies of it, never the run)."""
    return trained_run(tmp_path_factory, *DIGITS_MLP)


def evaluate(run_dir):
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "PYTHONPATH": f"{ROOT}:{TESTS}"}
    return run_module("tfhydra.evaluate", str(run_dir), env=env)


def broken_copy(finished_run, tmp_path, breaks):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    breaks(run)
    return run


def set_status(status):
    def breaks(run):
        record = json.loads((run / "metrics.json").read_text())
        (run / "metrics.json").write_text(json.dumps({**record, "status": status}))

    return breaks


def truncate(name, keep=40):
    def breaks(run):
        data = (run / name).read_bytes()
        (run / name).write_bytes(data[:keep])

    return breaks


MARKER = "code_from_the_run_ran"
# Problems with the run as a whole read "Error: <run>: ...; accepted: EVALUATE_ACCEPTED"; problems with one of its
# files, found by the trust boundary (tfhydra/trust), read "Error: <run>/<file>: ...".
BROKEN = {  # name: (what is done to a copy of the finished run, what follows the run's path in the message)
    "no saved config": (lambda run: (run / ".hydra" / "config.yaml").unlink(), ": it has no .hydra/config.yaml"),
    "corrupt saved config": (
        lambda run: (run / ".hydra" / "config.yaml").write_text("model: {name: mlp\n  units: [\n"),
        "/.hydra/config.yaml: it is not readable YAML (line 2: ",
    ),
    "code in the saved config": (
        lambda run: (run / ".hydra" / "config.yaml").write_text(
            f"!!python/object/apply:os.system ['touch {MARKER}']\n"
        ),
        "/.hydra/config.yaml: it is not readable YAML (",
    ),
    "saved config not a run's": (
        lambda run: (run / ".hydra" / "config.yaml").write_text("- a\n- b\n"),
        "/.hydra/config.yaml: it is not a YAML mapping",
    ),
    "interpolation in the saved config": (
        lambda run: (run / ".hydra" / "config.yaml").write_text(
            (run / ".hydra" / "config.yaml").read_text().replace("name: mlp", "name: ${oc.env:HOME}", 1)
        ),
        "/.hydra/config.yaml: it holds model.name: ${oc.env:HOME}, which your own configs do not",
    ),
    "failed run": (set_status("failed"), ": not a completed run (status: failed)"),
    "still running": (set_status("running"), ": not a completed run (status: running)"),
    "no metrics.json": (lambda run: (run / "metrics.json").unlink(), ": not a completed run (status: None)"),
    "corrupt metrics.json": (truncate("metrics.json"), ": not a completed run (its metrics.json cannot be read)"),
    "no export": (lambda run: shutil.rmtree(run / "export"), ": it has no export/saved_model/saved_model.pb"),
    "corrupt overrides": (
        lambda run: (run / ".hydra" / "overrides.yaml").write_text("[model=mlp\n"),
        "/.hydra/overrides.yaml: it is not readable YAML (",
    ),
    "overrides not a list": (
        lambda run: (run / ".hydra" / "overrides.yaml").write_text("model: mlp\n"),
        "/.hydra/overrides.yaml: it is not a list of overrides",
    ),
    "no overrides": (lambda run: (run / ".hydra" / "overrides.yaml").unlink(), ": it has no .hydra/overrides.yaml"),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_evaluate_refuses_a_broken_run_directory_in_one_line(finished_run, tmp_path, name):
    breaks, problem = BROKEN[name]
    run = broken_copy(finished_run, tmp_path, breaks)
    result = evaluate(run)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    message = last_line(result.stderr)
    assert message.startswith(f"Error: {run}{problem}"), message
    if problem.startswith(":"):
        assert message.endswith(EVALUATE_ACCEPTED), message
    assert not (ROOT / MARKER).exists() and not list(run.glob("evaluations/*"))


def test_evaluate_refuses_a_corrupt_saved_model_in_one_line(finished_run, tmp_path):
    run = broken_copy(finished_run, tmp_path, truncate("export/saved_model/saved_model.pb", keep=100))
    result = evaluate(run)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    message = last_line(result.stderr)
    assert message.startswith(f"Error: {run}: its export/saved_model cannot be loaded ("), message
    assert message.endswith(EVALUATE_ACCEPTED)


def saved_config_with(compression):
    def breaks(run):
        from omegaconf import OmegaConf

        saved = OmegaConf.load(run / ".hydra" / "config.yaml")
        saved.compression = compression
        OmegaConf.save(saved, run / ".hydra" / "config.yaml")

    return breaks


FROM_RUN = {
    "failed run": (set_status("failed"), f"not a completed run (status: failed); {FROM_RUN_ACCEPTED}"),
    "corrupt saved config": (
        BROKEN["corrupt saved config"][0],
        "/.hydra/config.yaml: it is not readable YAML (line 2: ",
    ),
    "no weights": (lambda run: shutil.rmtree(run / "checkpoints"), "it has no checkpoints/last.weights.h5"),
    "code named by the saved config": (
        saved_config_with({"_target_": "os.system", "_args_": [f"touch {MARKER}"], "start_epoch": 0, "from_run": None}),
        "/.hydra/config.yaml: it holds compression._target_: os.system, which your own configs do not name",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FROM_RUN))
def test_compression_from_a_broken_run_is_refused_in_one_line(finished_run, tmp_path, name):
    breaks, problem = FROM_RUN[name]
    run = broken_copy(finished_run, tmp_path, breaks)
    result = run_cli(
        "trainer.epochs=1",
        *MLP,
        "compression=prune",
        f"compression.from_run={run}",
        f"hydra.run.dir={tmp_path / 'new'}",
        cwd=tmp_path,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    message = last_line(result.stderr)
    expected = f"Error: {run}{problem}" if problem.startswith("/") else f"Error: compression.from_run={run}: {problem}"
    assert message.startswith(expected), message
    assert not (tmp_path / MARKER).exists() and not (ROOT / MARKER).exists()
    assert not (tmp_path / "new" / "metrics.json").exists()
