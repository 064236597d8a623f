"""The example notebook (examples/quickstart.ipynb), executed cell by cell by a real Jupyter kernel as a user runs
it: a typo answered in one line, two trainings in one kernel with a `sys.path` change between them, Results with
a history and a loadable model, a 2-job sweep from Python (issue 33, items 3c and 4; docs/notebook.md).

The kernel is this interpreter (`sys.executable`), through a kernelspec written to a temporary JUPYTER_PATH, so the
test runs inside any virtualenv; the notebook's working directory is a temporary one, where its runs go.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from pathlib import Path

import nbformat
import pytest
import yaml
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"
KERNEL = "tfhydra-test-python"

# Appended to the notebook in memory (the file stays a user's example): what the cells left in the kernel.
CHECK = """
import json
import tf_keras
from hydra.core.global_hydra import GlobalHydra

print(json.dumps({
    "first": [str(first.status), len(first.history), str(first.run_dir), first.best_epoch, first.metrics],
    "second": [str(second.status), len(second.history), str(second.run_dir), second.record.model],
    "history_keys": sorted(second.history[-1]),
    "shape": list(probabilities.shape), "row_sums": probabilities.sum(axis=1).tolist(),
    "jobs": [[job.run_dir.name, str(job.status), len(job.history)] for job in jobs],
    "policy": tf_keras.mixed_precision.global_policy().name,
    "hydra_initialized": GlobalHydra.instance().is_initialized(),
    "path_head": sys.path[0],
}))
"""


def kernelspec(folder: Path) -> Path:
    """A kernelspec that starts this interpreter: JUPYTER_PATH=<folder> makes it `KERNEL`."""
    spec = folder / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "tfhydra test (this interpreter)",
                "language": "python",
            }
        )
    )
    return folder


def streams(cell, name: str) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == name)


def source_cell(nb, start: str):
    return next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith(start))


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The notebook after a real kernel ran every cell (and the check cell), and its working directory."""
    tmp = tmp_path_factory.mktemp("notebook")
    work = tmp / "work"
    work.mkdir()
    saved = {k: os.environ.get(k) for k in ("JUPYTER_PATH", "HYDRA_FULL_ERROR")}
    os.environ["JUPYTER_PATH"] = str(kernelspec(tmp / "jupyter"))
    os.environ.pop("HYDRA_FULL_ERROR", None)
    try:
        nb = nbformat.read(NOTEBOOK, as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell(CHECK, metadata={"tags": ["test-check"]}))
        # timeout: a hang guard for one cell (two trainings and a sweep on a loaded machine), not a measurement
        NotebookClient(nb, timeout=1800, kernel_name=KERNEL, resources={"metadata": {"path": str(work)}}).execute()
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
    return nb, work


@pytest.mark.slow
def test_the_typo_cell_shows_one_line_naming_the_key(executed):
    nb, work = executed
    cell = source_cell(nb, 'tfhydra.train(["model=mlp", "trainer.epochz=1"])')
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "ConfigError", cell.outputs
    assert len(errors[0].traceback) == 1 and "\n" not in errors[0].traceback[0], errors[0].traceback
    line = errors[0].traceback[0]
    assert line.startswith("ConfigError: trainer.epochz=1: unknown key") and "did you mean epochs?" in line, line
    assert not streams(cell, "stdout") and not streams(cell, "stderr"), cell.outputs  # nothing but the line


@pytest.mark.slow
def test_two_trainings_in_one_kernel_give_results_with_history_and_a_model(executed):
    nb, work = executed
    check = json.loads(streams(nb.cells[-1], "stdout"))
    status, epochs, first_dir, best_epoch, metrics = check["first"]
    assert (status, epochs, best_epoch) == ("completed", 1, 1)
    assert 0.0 <= metrics["val_accuracy"] <= 1.0 and "val_loss" in metrics and "epoch" not in metrics
    status, epochs, second_dir, model_name = check["second"]
    assert (status, epochs, model_name) == ("completed", 2, "my_tiny")  # the user's own builder, from sys.path
    assert check["path_head"] == str(work / "my_project")
    assert {"loss", "accuracy", "val_loss", "val_accuracy"} <= set(check["history_keys"])
    assert check["shape"] == [4, 10] and all(abs(s - 1) < 1e-4 for s in check["row_sums"])
    # each call gave back what it changed: Hydra's global state, the global policy
    assert check["policy"] == "float32" and check["hydra_initialized"] is False
    for run_dir, overrides in (
        (first_dir, ["model=mlp", "trainer.epochs=1", "logging.histogram_freq=0"]),
        (second_dir, ["model=tiny", "trainer.epochs=2", "optimizer.lr=3e-3", "logging.histogram_freq=0"]),
    ):
        run_dir = Path(run_dir)  # chosen as the command chooses: outputs/<date>/<time.micro>/ below the cwd
        assert (
            run_dir.parent == work / "outputs" / datetime.now().strftime("%Y-%m-%d")
            or run_dir.parent.parent == work / "outputs"
        ), run_dir
        assert datetime.strptime(run_dir.name, "%H-%M-%S.%f")
        assert yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text()) == overrides
        hydra = yaml.safe_load((run_dir / ".hydra" / "hydra.yaml").read_text())["hydra"]
        assert hydra["runtime"]["output_dir"] == str(run_dir)
        assert (run_dir / ".hydra" / "config.yaml").is_file() and "epoch 1/" in (run_dir / "train.log").read_text()
    assert first_dir != second_dir


@pytest.mark.slow
def test_training_shows_a_live_bar_and_the_epoch_lines_and_no_tensorflow_start_up(executed):
    nb, work = executed
    cell = source_cell(nb, "first = tfhydra.train(")
    out, err = streams(cell, "stdout"), streams(cell, "stderr")
    assert "epoch 1/1 loss=" in out and "completed: best val_accuracy=" in out, out
    widgets = [o for o in cell.outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert widgets or ("epoch 1/1" in err and "steps" in err), cell.outputs  # tqdm.auto's bar: a widget, or text
    for noise in ("oneDNN custom operations", "cuInit", "cudart_stub", "absl::InitializeLog"):
        assert noise not in out + err, (noise, err)
    second = source_cell(nb, "second = tfhydra.train(")
    lines = streams(second, "stdout").splitlines()  # its two epochs, each once (no handler left from the first)
    epochs = [line.split(" ", 1)[1].split(" loss=")[0] for line in lines if " loss=" in line and " epoch " in line]
    assert epochs == ["epoch 1/2", "epoch 2/2"]


@pytest.mark.slow
def test_the_sweep_from_python_returns_a_result_per_job(executed):
    nb, work = executed
    jobs = json.loads(streams(nb.cells[-1], "stdout"))["jobs"]
    assert jobs == [["0_optimizer.lr=0.001", "completed", 1], ["1_optimizer.lr=0.003", "completed", 1]], jobs
    cell = source_cell(nb, "jobs = tfhydra.multirun(")
    assert "2 jobs (2 completed)" in streams(cell, "stdout"), cell.outputs


@pytest.mark.slow
def test_a_kernel_that_changes_sys_path_before_its_first_compose_still_composes(tmp_path):
    """The order the example does not take: the code folder goes on sys.path first, then tfhydra composes."""
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "import sys, tfhydra\nsys.path.insert(0, '.')\n"
                "print(tfhydra.compose(['model=mlp']).hydra.launcher._target_)"
            )
        ]
    )
    saved = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(kernelspec(tmp_path / "jupyter"))
    try:
        NotebookClient(
            nb, timeout=600, kernel_name=KERNEL, allow_errors=True, resources={"metadata": {"path": str(tmp_path)}}
        ).execute()
    finally:
        os.environ.pop("JUPYTER_PATH") if saved is None else os.environ.__setitem__("JUPYTER_PATH", saved)
    outputs = nb.cells[0].outputs
    assert not [o for o in outputs if o.output_type == "error"], [o.get("traceback") for o in outputs]
    assert "tfhydra" in streams(nb.cells[0], "stdout").lower()
