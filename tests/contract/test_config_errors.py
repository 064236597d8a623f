"""How configuration errors are reported: the traceback on request, mistakes found inside the job, completed
runs never overwritten, and the TF-free flags. The table of bad inputs itself is tests/contract/test_bad_inputs.py."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT, TESTS, last_line, run_cli


def test_full_error_env_shows_the_traceback(tmp_path):
    result = run_cli("optimizer.lr=-1", f"hydra.run.dir={tmp_path / 'run'}", env={"HYDRA_FULL_ERROR": "1"})
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "optimizer.lr=-1: out of range" in result.stderr


def test_errors_found_inside_the_job_are_one_line_too(tmp_path):
    """A mistake only the builder can see (a loss name) still ends in one line, without a model export."""
    run_dir = tmp_path / "run"
    result = run_cli("trainer.loss=no_such_loss", f"hydra.run.dir={run_dir}")
    assert result.returncode == 1
    assert last_line(result.stderr) == (
        "Error: trainer.loss=no_such_loss: unknown loss; accepted: a Keras loss name such as "
        "sparse_categorical_crossentropy, or a node with _target_"
    )
    assert "Traceback" not in result.stderr
    assert not (run_dir / "export").exists() and not (run_dir / "metrics.json").exists()


def test_a_completed_run_is_never_overwritten(tmp_path):
    run_dir = tmp_path / "done"
    run_dir.mkdir()
    (run_dir / "metrics.json").write_text(json.dumps({"status": "completed"}))
    result = run_cli(f"hydra.run.dir={run_dir}")
    assert result.returncode == 1
    assert "holds a completed run, which is never overwritten" in last_line(result.stderr)
    assert not (run_dir / ".hydra").exists()


def run_tensorflow_probe(probe: str) -> subprocess.CompletedProcess:
    """Run `probe` in a fresh interpreter at the checkout and check that it left TensorFlow unimported."""
    result = subprocess.run(
        [sys.executable, "-c", probe + "print('TF_IMPORTED' if 'tensorflow' in sys.modules else 'TF_NOT_IMPORTED')\n"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": f"{ROOT}:{TESTS}", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("TF_NOT_IMPORTED")
    return result


@pytest.mark.parametrize("flag", [["--help"], ["--cfg", "job"]])
def test_help_and_cfg_do_not_import_tensorflow(flag):
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['train.py', *{flag!r}]\n"
        "try:\n    runpy.run_path('train.py', run_name='__main__')\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
    )
    result = run_tensorflow_probe(probe)
    if flag[0] == "--cfg":
        assert "optimizer:" in result.stdout and "lr: 0.001" in result.stdout


@pytest.mark.parametrize("task", sorted(p.stem for p in (ROOT / "conf" / "task").glob("*.yaml")))
def test_the_preflight_of_every_task_leaves_tensorflow_to_the_preload(task):
    """The tasks' metrics are tf_keras `_target_`s: the pre-flight checks that tf_keras is installed without
    importing it (seconds that would come before a config error's line and outside the preload, issue 44 item 6),
    and the job's own plan, after TensorFlow's import, still refuses a wrong path in one line."""
    from tfhydra.config.errors import ConfigError
    from tfhydra.config.registry import check_target_installed

    probe = (
        "import sys\n"
        "from tfhydra.cli.preflight import check_overrides\n"
        f"check_overrides('conf', 'config', ['task={task}', 'data=synthetic'])\n"
    )
    run_tensorflow_probe(probe)
    import tf_keras  # noqa: F401  (imported: the job's check reads the whole path)
    from omegaconf import OmegaConf

    with pytest.raises(ConfigError, match=r"trainer.metrics\[0\]._target_=tf_keras.metrics.AUCC: cannot import it"):
        check_target_installed(OmegaConf.create({"_target_": "tf_keras.metrics.AUCC"}), "trainer.metrics[0]")


def test_check_overrides_in_process_lists_models():
    """The same checks without a subprocess, as a sweeper or notebook would call them."""
    from conftest import CONFIG_DIR

    from tfhydra.cli.preflight import check_overrides
    from tfhydra.config.errors import ConfigError

    check_overrides(CONFIG_DIR, "config", ["model=mlp", "optimizer=sgd", "optimizer.lr=0.05"])
    models = "auto, cnn, keras_app, keras_hub, lstm, mlp, resnet, transformer"
    with pytest.raises(ConfigError, match=f"accepted: one of {models}"):
        check_overrides(CONFIG_DIR, "config", ["model=cnnn"])
