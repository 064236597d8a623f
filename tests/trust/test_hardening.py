"""Issue 14: nothing a run directory, data file or cache names is executed; poisoned data and silent nonsense
are refused; faults met on resume end in one line or fall back to what still holds the state."""

import json
import pickle
import re
from pathlib import Path

import data_files
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from conftest import ROOT, last_line, read_run_record, run_cli

import tfhydra
from tfhydra.config.errors import ConfigError

MARKER = "code_from_a_file_ran"


class RunsCode:
    """Unpickling this calls os.system: what a crafted cache file would do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


# ---- nothing named by a file is executed --------------------------------------------------------------------


def test_a_crafted_cifar_cache_runs_no_code(tmp_path, compose_cfg):
    from tfhydra.data.pipeline import build_datasets

    data_files.write_keras_cache(tmp_path / "keras", "cifar10")
    batch = tmp_path / "keras" / "datasets" / "cifar-10-batches-py" / "data_batch_2"
    batch.write_bytes(pickle.dumps({b"labels": [0, 1], b"data": RunsCode(tmp_path / MARKER)}, protocol=2))
    cfg = compose_cfg(["data=cifar10", f"data.cache_dir={tmp_path / 'keras'}"])
    with pytest.raises(ConfigError) as raised:
        build_datasets(cfg.data, 0)
    assert str(raised.value).startswith(f"{batch}: cannot read it (it names posix.system") or str(
        raised.value
    ).startswith(f"{batch}: cannot read it (it names os.system"), str(raised.value)
    assert "refused without importing it" in str(raised.value)
    assert not (tmp_path / MARKER).exists()


def test_a_genuine_cifar_cache_still_reads(tmp_path, compose_cfg):
    from tfhydra.data.pipeline import build_datasets

    data_files.write_keras_cache(tmp_path / "keras", "cifar10", n_train=50, n_test=20)
    datasets = build_datasets(compose_cfg(["data=cifar10", f"data.cache_dir={tmp_path / 'keras'}"]).data, 0)
    assert datasets.spec.input_shape == (32, 32, 3) and datasets.spec.num_classes == 10
    # issue 34: the test batch is the test split, validation 0.2 of the training batches
    assert (datasets.spec.train_size, datasets.spec.val_size, datasets.spec.test_size) == (40, 10, 20)


UNSAFE = {
    r"\bpickle\.loads?\(": "pickle.load",
    r"\beval\(": "eval",
    r"\bexec\(": "exec",
    r"\byaml\.load\(": "yaml.load (not safe_load)",
    r"unsafe_load": "yaml.unsafe_load",
    r"safe_mode\s*=\s*False": "safe_mode=False",
    r"allow_pickle\s*=\s*True": "allow_pickle=True",
    r"\bmarshal\.loads?\(": "marshal",
    r"\bshelve\b": "shelve",
    r"\bdill\b": "dill",
}


def test_tfhydra_uses_no_unsafe_loader():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {what}"
        for path in (ROOT / "tfhydra").rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        for pattern, what in UNSAFE.items()
        if re.search(pattern, line) and not line.lstrip().startswith("#")
    ]
    assert found == []


@pytest.fixture(scope="module")
def run_with_user_loss(tmp_path_factory):
    """A completed run whose overrides name a `_target_` (a loss class, harmless: it is tf_keras')."""
    run = tmp_path_factory.mktemp("run")
    tfhydra.run(
        tfhydra.compose(
            [
                "model=mlp",
                "trainer.epochs=1",
                "logging.histogram_freq=0",
                "trainer.loss={_target_:tf_keras.losses.SparseCategoricalCrossentropy}",
            ]
        ),
        run_dir=run,
    )
    return run


def test_evaluate_refuses_a_target_named_by_the_run_unless_trusted(run_with_user_loss, capsys):
    from tfhydra.evaluate import main

    assert main([str(run_with_user_loss)]) == 1
    message = last_line(capsys.readouterr().err)
    assert message.startswith(
        f"Error: {run_with_user_loss}/.hydra/overrides.yaml: it holds trainer.loss={{_target_:"
        "tf_keras.losses.SparseCategoricalCrossentropy}, which names code to import and call "
        "(the key _target_)"
    ), message
    assert "--trust-run" in message
    assert main(["--trust-run", "--json", str(run_with_user_loss)]) == 0
    captured = capsys.readouterr()
    assert f"Warning: --trust-run: {run_with_user_loss} is trusted" in captured.err
    figures = json.loads(captured.out.strip().splitlines()[-1])
    assert figures["trusted"] is True
    recorded = read_run_record(run_with_user_loss)["test"]["metrics"]["accuracy"]  # evaluate measures test
    assert figures["split"] == "test" and figures["metrics"]["accuracy"] == pytest.approx(recorded, abs=1e-6)


@pytest.mark.parametrize(
    "line,problem",
    [
        (
            "hydra.searchpath=[pkg://evilpkg]",
            "it holds hydra.searchpath=[pkg://evilpkg], a hydra setting, which tfhydra "
            "takes only from your own command line, never from a file",
        ),
        (
            "hydra/launcher=basic",
            "it holds hydra/launcher=basic, a hydra setting, which tfhydra takes only from your own "
            "command line, never from a file",
        ),
        (
            "+trainer.callbacks=[{_target_:os.system}]",
            "it holds +trainer.callbacks=[{_target_:os.system}], which names "
            "code to import and call (the key _target_)",
        ),
        ("data.name=${oc.env:HOME}", "it holds data.name=${oc.env:HOME}, whose interpolation would run"),
    ],
)
def test_evaluate_refuses_overrides_that_would_import_code(run_with_user_loss, tmp_path, line, problem, capsys):
    import shutil

    from tfhydra.evaluate import main

    run = tmp_path / "copy"
    shutil.copytree(run_with_user_loss, run)
    (run / ".hydra" / "overrides.yaml").write_text(f"- model=mlp\n- '{line}'\n")
    assert main([str(run)]) == 1
    message = last_line(capsys.readouterr().err)
    assert message.startswith(f"Error: {run}/.hydra/overrides.yaml: {problem}"), message


# ---- poisoned data and silent nonsense ----------------------------------------------------------------------


def npz_with(path: Path, **changes) -> Path:
    x_train, y_train = data_files.class_images(64, (12, 12), 4, seed=1)
    x_test, y_test = data_files.class_images(16, (12, 12), 4, seed=2)
    arrays = {
        "x_train": x_train.astype(np.float32) / 255,
        "y_train": y_train,
        "x_test": x_test.astype(np.float32) / 255,
        "y_test": y_test,
    }
    arrays.update(changes)
    np.savez(path, **arrays)
    return path


def build(compose_cfg, path: Path, *overrides: str):
    from tfhydra.data.pipeline import build_datasets

    return build_datasets(compose_cfg(["data=npz", f"data.path={path}", *overrides]).data, 0)


def test_a_nan_pixel_is_refused_at_load_with_its_index(tmp_path, compose_cfg):
    x_train = data_files.class_images(64, (12, 12), 4, seed=1)[0].astype(np.float32) / 255
    x_train[5, 3, 7] = np.nan
    path = npz_with(tmp_path / "d.npz", x_train=x_train)
    with pytest.raises(
        ConfigError,
        match=re.escape(
            f"{path}[x_train]: 1 non-finite value(s), the first at index [5, 3, 7] (nan); accepted: finite numbers"
        ),
    ):
        build(compose_cfg, path)


def test_one_hot_labels_are_class_indices(tmp_path, compose_cfg):
    y_train = data_files.class_images(64, (12, 12), 4, seed=1)[1]
    y_test = data_files.class_images(16, (12, 12), 4, seed=2)[1]
    path = npz_with(tmp_path / "d.npz", y_train=np.eye(4, dtype=np.float32)[y_train], y_test=np.eye(4)[y_test])
    datasets = build(compose_cfg, path)
    assert datasets.spec.num_classes == 4
    labels = np.concatenate([y.numpy() for _, y in datasets.test])  # x_test/y_test: the test split
    assert list(labels) == list(y_test)


@pytest.mark.parametrize(
    "changes,fragment",
    [
        ({"y_train": np.full((64, 4), 0.25)}, "[y_train]: labels of shape (64, 4) that are not one-hot rows"),
        ({"y_train": np.zeros((64, 2, 2))}, "[y_train]: labels of shape (64, 2, 2)"),
        ({"x_train": np.zeros((0, 12, 12), np.float32), "y_train": np.zeros(0, np.int64)}, "x_train holds no example"),
        (
            {"x_test": np.zeros((16, 10, 10), np.float32)},
            "x_train examples have shape (12, 12), x_test examples (10, 10)",
        ),
        (
            {"y_train": np.zeros(64, np.int64), "y_test": np.zeros(16, np.int64)},
            "the training split holds 1 class(es): 0",
        ),
    ],
)
def test_unusable_arrays_are_one_line(tmp_path, compose_cfg, changes, fragment):
    path = npz_with(tmp_path / "d.npz", **changes)
    with pytest.raises(ConfigError) as raised:
        build(compose_cfg, path)
    assert fragment in str(raised.value) and "\n" not in str(raised.value), str(raised.value)


def test_an_empty_label_cell_names_its_line(tmp_path, compose_cfg):
    from tfhydra.data.pipeline import build_datasets

    path = data_files.write_csv(tmp_path / "t.csv", n=24)
    lines = path.read_text().splitlines()
    cells = lines[7].split(",")
    lines[7] = ",".join([*cells[:-1], ""])
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        ConfigError,
        match=re.escape(f"{path}:8: the label cell is empty; accepted: a label in every row of column label"),
    ):
        build_datasets(compose_cfg(["data=csv", f"data.path={path}", "model=mlp"]).data, 0)


def test_the_recorder_calls_a_model_with_nan_weights_diverged_though_the_loss_is_finite():
    """Keras' own callback tests call the hooks with fake logs; so does this one, in milliseconds."""
    from tfhydra.trainer.callbacks import RunRecorder

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="dense")])
    kernel = model.layers[0].kernel
    kernel.assign(tf.tensor_scatter_nd_update(kernel, [[0, 0]], [float("nan")]))
    recorder = RunRecorder()
    recorder.set_model(model)
    recorder.set_params({"epochs": 2, "steps": 4})
    recorder.on_train_begin()
    recorder.on_epoch_begin(0)
    recorder.on_epoch_end(0, {"loss": 0.5, "accuracy": 0.9})
    assert recorder.diverged == {"epoch": 1, "step": 0, "loss": None, "weights": "dense/kernel:0"}
    assert model.stop_training


@pytest.mark.slow
def test_a_nan_pixel_the_loader_cannot_see_ends_diverged_not_completed(tmp_path):
    """Raw float32 TFRecords are decoded in the graph, after the load: the weights check ends the run."""
    images, labels = data_files.class_images(64, (12, 12, 1), 4)
    images = images.astype(np.float32) / 255
    images[::2, 5, 5, 0] = np.nan  # every other image: some are training examples whatever the hold-outs draw
    with tf.io.TFRecordWriter(str(tmp_path / "train-0.tfrecord")) as writer:
        for record in data_files.serialized_examples(images, labels, encoding="raw"):
            writer.write(record)
    run_dir = tmp_path / "run"
    result = run_cli(
        "data=tfrecord",
        f"data.train={tmp_path}/train-*.tfrecord",
        "data.encoding=raw",
        "data.raw_shape=[12,12,1]",
        "data.raw_dtype=float32",
        "data.cache=false",
        "model.filters=[8]",
        "trainer.epochs=2",
        "logging.histogram_freq=0",
        f"hydra.run.dir={run_dir}",
    )
    record = read_run_record(run_dir)
    assert record["status"] == "diverged", (record["status"], result.stderr[-1500:])
    assert not (run_dir / "export").exists()


# ---- faults met on resume -----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("damaged", ["checkpoints/history.json", "checkpoints/last.weights.h5"])
def test_a_damaged_file_met_on_resume_falls_back_to_the_state(tmp_path, damaged):
    """Killed after its last epoch (state and history kept, export not written), a run whose history.json or
    last.weights.h5 was then damaged still finishes with the same command."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "export").write_text("a file where the export directory goes: the export fails after training\n")
    argv = ["model=mlp", "trainer.epochs=2", "logging.histogram_freq=0", f"hydra.run.dir={run_dir}"]
    first = run_cli(*argv)
    assert first.returncode == 1 and read_run_record(run_dir)["status"] == "failed", first.stderr[-1500:]
    assert (run_dir / damaged).is_file() and (run_dir / "checkpoints" / "state").is_dir()
    (run_dir / "export").unlink()
    data_files.damage_file(run_dir / damaged, "truncate")
    finished = run_cli(*argv)
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert "Traceback" not in finished.stderr
    record = read_run_record(run_dir)
    assert record["status"] == "completed" and (run_dir / "export" / "saved_model" / "saved_model.pb").is_file()
    assert f"{run_dir / damaged} cannot be read" in (run_dir / "train.log").read_text()
    if damaged.endswith(".h5"):  # the history still says what was trained
        assert record["epochs_run"] == 2
