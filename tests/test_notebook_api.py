"""tfhydra.train / tfhydra.run from Python, in this process (docs/notebook.md): a mistake as one line and nothing
written, the run directory chosen as the command chooses it, quiet, and the process state given back after a
call. The notebook itself, in a real kernel: tests/journeys/test_notebook.py."""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

import tfhydra
from tfhydra.runner.hydra_files import chosen_run_dir

FAST = ["model=mlp", "trainer.epochs=1", "logging.histogram_freq=0"]


def test_a_mistake_raises_one_line_and_leaves_nothing_behind(tmp_path, monkeypatch):
    from hydra.core.global_hydra import GlobalHydra

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    handlers = list(logging.getLogger("tfhydra").handlers)
    with pytest.raises(tfhydra.ConfigError) as caught:
        tfhydra.train(["model=mlp", "trainer.epochz=1"])
    assert caught.value.key == "trainer.epochz"
    assert caught.value._render_traceback_() == [f"ConfigError: {caught.value}"]  # what IPython shows: one line
    assert "\n" not in str(caught.value) and "did you mean epochs?" in str(caught.value)
    assert list(tmp_path.iterdir()) == []  # no outputs/, no train.log
    assert not GlobalHydra.instance().is_initialized() and logging.getLogger("tfhydra").handlers == handlers
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    assert not hasattr(caught.value, "_render_traceback_")  # IPython falls back to the full traceback


def test_the_python_api_is_named_and_tfhydra_sweep_stays_the_sweep_package():
    import types

    assert isinstance(tfhydra.sweep, types.ModuleType)  # Hydra locates tfhydra.sweep.callback.SweepCallback
    assert {"train", "multirun", "Result", "load_result", "compose", "run", "ConfigError"} <= set(tfhydra.__all__)
    constants = {"CONFIG_DIR"}  # tfhydra's own conf/ (a Path), for a project that composes from it
    assert all(callable(getattr(tfhydra, name)) for name in set(tfhydra.__all__) - constants)
    assert (tfhydra.CONFIG_DIR / "tfhydra.yaml").is_file()


def test_the_run_directory_is_chosen_as_the_command_chooses_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    today = datetime.now().strftime("%Y-%m-%d")
    composed = tfhydra.compose(["model=mlp"])
    chosen = chosen_run_dir(composed)
    assert chosen.parent == tmp_path / "outputs" / today and datetime.strptime(chosen.name, "%H-%M-%S.%f")
    assert chosen_run_dir(composed) == chosen  # Hydra's `now` is read once per config
    bare = OmegaConf.create({"model": {"name": "mlp"}})  # composed without its hydra node: tfhydra's own rule
    assert chosen_run_dir(bare).parent == tmp_path / "outputs" / today
    assert chosen_run_dir(bare, key="hydra.sweep.dir").parent == tmp_path / "outputs" / "multirun" / today
    assert chosen_run_dir(tfhydra.compose(["model=mlp", "hydra.run.dir=elsewhere/run"])) == tmp_path / "elsewhere/run"


@pytest.mark.slow
def test_run_without_run_dir_and_a_quiet_mixed_train_give_back_the_process(tmp_path, monkeypatch, capfd):
    import tf_keras as keras

    monkeypatch.chdir(tmp_path)
    best = tfhydra.run(tfhydra.compose(FAST))  # was: ValueError: HydraConfig was not set
    (run_dir,) = (tmp_path / "outputs").glob("*/*")
    assert 0.0 < best <= 1.0 and tfhydra.load_result(run_dir).monitored == best
    assert yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text()) == FAST
    assert yaml.safe_load((run_dir / ".hydra" / "hydra.yaml").read_text())["hydra"]["runtime"]["output_dir"] == str(
        run_dir
    )
    capfd.readouterr()

    result = tfhydra.train([*FAST, "precision=mixed"], run_dir=tmp_path / "mixed", quiet=True)
    out, err = capfd.readouterr()
    assert "epoch" not in out + err and "run directory" not in out + err, (out, err)  # quiet: nothing shown ...
    assert "epoch 1/1 loss=" in (tmp_path / "mixed" / "train.log").read_text()  # ... and everything kept
    assert result.status == "completed" and result.record.policy == "mixed_float16"
    assert (
        len(result.history) == 1
        and result.best_epoch == 1
        and result.metrics == {k: v for k, v in result.history[0].items()}
    )
    assert keras.mixed_precision.global_policy().name == "float32"  # the policy given back
    with pytest.raises(
        tfhydra.ConfigError,
        match=r"^format=keras: not exported by the run .* accepted: one of "
        r"saved_model$",
    ):
        result.load_model("keras")
    served = result.load_model().serve(keras.backend.constant(0.0, shape=[3, 28, 28, 1]))
    assert tuple(served.shape) == (3, 10)
    assert Path(result.run_dir) == tmp_path / "mixed"
