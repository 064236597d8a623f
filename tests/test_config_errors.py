"""Bad input on the command line: one line naming key, value and what is accepted; no run made."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT, TESTS, last_line, run_cli

# (command-line arguments, fragments the one-line message must contain)
BAD_INPUTS = [
    (["model=cnnn"], ["model=cnnn", "no such model option", "cnn, keras_app, lstm, mlp, resnet, transformer"]),
    (["model=keras_app", "model.weights=/no/such/weights.h5"], ["model.weights=/no/such/weights.h5", "no such file"]),
    (["modle=cnn"], ["modle=cnn", "no such group or key", "model", "optimizer"]),
    (["optimizer.lrr=0.1"], ["optimizer.lrr=0.1", "unknown key", "lr", "beta_1"]),
    (["optimizer.lr=abc"], ["optimizer.lr=abc", "not a number", "a number > 0"]),
    (["optimizer.lr=-1"], ["optimizer.lr=-1", "out of range", "a number > 0"]),
    (["data.batch_size=0"], ["data.batch_size=0", "out of range", "an integer >= 1"]),
    (["data=npz", "data.path=/no/such/mnist.npz"], ["data.path=/no/such/mnist.npz", "no such file or directory"]),
    (["data.fraction=0"], ["data.fraction=0", "out of range", "a number in (0, 1]"]),
    (["trainer.epochs=-2"], ["trainer.epochs=-2", "out of range", "an integer >= 1"]),
    (["model.activation=3"], ["model.activation=3", "wrong type", "a string"]),
    (["trainer.loop=foo"], ["trainer.loop=foo", "one of fit, custom"]),
    (["trainer.clip_norm=0"], ["trainer.clip_norm=0", "out of range", "null or a number > 0"]),
    (["trainer.clip_global_norm=-1"], ["trainer.clip_global_norm=-1", "out of range"]),
    (["optimizer.schedule.name=linear"], ["optimizer.schedule.name=linear", "constant, cosine, exponential"]),
    (["trainer.save_every=0"], ["trainer.save_every=0", "'epoch' or an integer >= 1"]),
    (["+model._target_=no_such_pkg.build"], ["model._target_=no_such_pkg.build", "cannot import", "importable dotted path"]),
    (["optimizer.lr=[1"], ["optimizer.lr=[1", "cannot parse"]),
    (["-m", "optimizer.lr=1e-3,-5"], ["optimizer.lr=-5", "out of range"]),
    (["compression=prune", "compression.target_sparsity=1.0"], ["compression.target_sparsity=1.0", "a number in [0, 1)"]),
    (["compression=cluster", "compression.number_of_clusters=1"], ["compression.number_of_clusters=1", "an integer >= 2"]),
    (["compression.from_run=/no/such/run"], ["compression.from_run=/no/such/run", "no such directory"]),
    (["export.formats=[onnx]"], ["export.formats=['onnx']", "saved_model, keras, tflite"]),
    (["export.tflite.quantization=int4"], ["export.tflite.quantization=int4", "none, dynamic, float16, int8"]),
]


@pytest.mark.parametrize("args,fragments", BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_override_is_one_line_and_creates_no_run(tmp_path, args, fragments):
    run_dir = tmp_path / "run"
    result = run_cli(*args, f"hydra.run.dir={run_dir}", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert result.returncode != 0
    message = last_line(result.stderr)
    assert message.startswith("Error: "), result.stderr
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert "Traceback" not in result.stderr
    assert not run_dir.exists() and not (tmp_path / "sweep").exists()


def test_full_error_env_shows_the_traceback(tmp_path):
    result = run_cli("optimizer.lr=-1", f"hydra.run.dir={tmp_path / 'run'}", env={"HYDRA_FULL_ERROR": "1"})
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "optimizer.lr=-1: out of range" in result.stderr


def test_errors_found_inside_the_job_are_one_line_too(tmp_path):
    """A mistake only the builder can see (a loss name) still ends in one line, without a model export."""
    run_dir = tmp_path / "run"
    result = run_cli("trainer.loss=no_such_loss", f"hydra.run.dir={run_dir}")
    assert result.returncode == 1
    assert last_line(result.stderr) == ("Error: trainer.loss=no_such_loss: unknown loss; accepted: a Keras loss name such as "
                                        "sparse_categorical_crossentropy, or a node with _target_")
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


@pytest.mark.parametrize("flag", [["--help"], ["--cfg", "job"]])
def test_help_and_cfg_do_not_import_tensorflow(flag):
    probe = ("import runpy, sys\n"
             f"sys.argv = ['train.py', *{flag!r}]\n"
             "try:\n    runpy.run_path('train.py', run_name='__main__')\n"
             "except SystemExit as e:\n    assert not e.code, e.code\n"
             "print('TF_IMPORTED' if 'tensorflow' in sys.modules else 'TF_NOT_IMPORTED')\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("TF_NOT_IMPORTED")
    if flag[0] == "--cfg":
        assert "optimizer:" in result.stdout and "lr: 0.001" in result.stdout


def test_check_overrides_in_process_lists_models():
    """The same checks without a subprocess, as a sweeper or notebook would call them."""
    from conftest import CONFIG_DIR
    from tfhydra.cli import check_overrides
    from tfhydra.errors import ConfigError

    check_overrides(CONFIG_DIR, "config", ["model=mlp", "optimizer=sgd", "optimizer.lr=0.05"])
    with pytest.raises(ConfigError, match="accepted: one of cnn, keras_app, lstm, mlp, resnet, transformer"):
        check_overrides(CONFIG_DIR, "config", ["model=cnnn"])
