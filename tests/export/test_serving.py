"""The deployed model takes the data as the source stores them (tfhydra/export/, docs/deploy.md).

For a uint8 image .npz, a CSV of raw feature columns and a text CSV, a real run's SavedModel is fed the stored
validation examples (`serve_raw`, the `serving_default` signature) and must predict what the trained Keras model
predicts on the training pipeline's inputs; TensorFlow's own client, `saved_model_cli`, runs the TF Serving
layout (`export/serving/1`) on an .npy of raw inputs.
"""

from __future__ import annotations

import re
import subprocess
import sys

import data_files
import numpy as np
import pytest
import tensorflow as tf
from conftest import FAST
from shared_runs import DIGITS_MLP, trained_run

import tfhydra

# TensorFlow's `saved_model_cli` command, through the entry point its console script calls: a venv used
# without activating it (`.venv/bin/python -m pytest`) has no bin/ on PATH.
SAVED_MODEL_CLI = [sys.executable, "-m", "tensorflow.python.tools.saved_model_cli"]


def served_run(tmp_path, data: list[str]):
    """(the composed config, the run directory) of a short real run on `data` that exports a SavedModel and
    the tf_keras file."""
    cfg = tfhydra.compose(
        [
            "model=mlp",
            "trainer.epochs=2",
            "data.batch_size=16",
            "export.formats=[saved_model,keras]",
            *FAST[1:],
            "logging.write_graph=false",
            *data,
        ]
    )
    tfhydra.run(cfg, run_dir=tmp_path / "run")
    return cfg, tmp_path / "run"


def predictions_agree(cfg, run_dir) -> tuple[float, np.ndarray, np.ndarray]:
    """(share of validation examples where the served model on raw data and the trained Keras model on the
    pipeline's inputs predict the same class, the raw validation examples, the Keras model's classes)."""
    import tf_keras as keras

    from tfhydra.data.pipeline import build_datasets

    datasets = build_datasets(cfg.data, cfg.trainer.seed)
    trained = keras.models.load_model(str(run_dir / "export" / "keras" / "model.keras"), safe_mode=True)
    keras_classes = np.concatenate([trained(x, training=False).numpy().argmax(-1) for x, _ in datasets.validation])
    served = tf.saved_model.load(str(run_dir / "export" / "serving" / "1"))
    raw, labels = datasets.serving.raw_validation
    served_classes = served.signatures["serving_default"](inputs=tf.constant(raw))["output_0"].numpy().argmax(-1)
    assert len(served_classes) == len(keras_classes) == len(labels) == datasets.spec.val_size
    return float(np.mean(served_classes == keras_classes)), raw, keras_classes


def saved_model_cli_classes(run_dir, raw: np.ndarray, tmp_path) -> np.ndarray:
    """`saved_model_cli run` on an .npy of raw inputs, as a user would check a TF Serving directory."""
    np.save(tmp_path / "raw.npy", raw)
    result = subprocess.run(
        [
            *SAVED_MODEL_CLI,
            "run",
            "--dir",
            str(run_dir / "export" / "serving" / "1"),
            "--tag_set",
            "serve",
            "--signature_def",
            "serving_default",
            "--inputs",
            f"inputs={tmp_path / 'raw.npy'}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    printed = result.stdout.split("Result for output key output_0:", 1)[1]
    values = np.array(
        [float(v) for v in re.findall(r"[-+]?\d*\.\d+(?:[eE][-+]?\d+)?|[-+]?\d+(?:[eE][-+]?\d+)?", printed)]
    )
    return values.reshape(len(raw), -1).argmax(-1)


def test_uint8_images_are_served_as_stored(tmp_path):
    path = data_files.write_npz(tmp_path / "images.npz", n_train=160, n_test=80, shape=(28, 28))
    cfg, run_dir = served_run(tmp_path, ["data=npz", f"data.path={path}", "data.x_val=x_test", "data.y_val=y_test"])
    agree, raw, keras_classes = predictions_agree(cfg, run_dir)
    assert raw.dtype == np.uint8 and raw.shape == (80, 28, 28)  # what the .npz holds, no scaling by the client
    assert agree >= 0.999
    assert (saved_model_cli_classes(run_dir, raw, tmp_path) == keras_classes).mean() >= 0.999


def test_csv_feature_columns_are_served_raw_and_standardised_in_the_graph(tmp_path):
    path = data_files.write_csv(tmp_path / "iris.csv", n=120)
    cfg, run_dir = served_run(tmp_path, ["data=csv", f"data.path={path}"])
    agree, raw, keras_classes = predictions_agree(cfg, run_dir)
    assert raw.dtype == np.float32 and np.abs(raw.mean(axis=0)).max() > 1.0  # the columns as written, unscaled
    assert agree >= 0.999
    assert (saved_model_cli_classes(run_dir, raw, tmp_path) == keras_classes).mean() >= 0.999


def test_text_is_served_as_strings_with_the_vocabulary_inside_the_model(tmp_path):
    path = data_files.write_text_csv(tmp_path / "reviews.csv", n=120)
    cfg, run_dir = served_run(
        tmp_path,
        [
            "data=text_csv",
            f"data.path={path}",
            "data.sequence_length=16",
            "data.vocab_size=200",
            "model=lstm",
            "model.units=[8]",
            "model.embedding_dim=8",
        ],
    )
    agree, raw, _ = predictions_agree(cfg, run_dir)
    assert raw.dtype.kind == "U" and all(isinstance(t, str) for t in raw[:3])  # the CSV's text cells
    assert agree >= 0.999


@pytest.fixture(scope="session")
def digits_mlp(tmp_path_factory):
    """The seed MLP on digits with the default export (a SavedModel), shared with the other rooms that read it."""
    return trained_run(tmp_path_factory, *DIGITS_MLP)


def test_the_serving_layout_and_its_signatures(digits_mlp):
    version = digits_mlp / "export" / "serving" / "1"
    assert version.is_symlink() and version.resolve() == (digits_mlp / "export" / "saved_model").resolve()
    shown = subprocess.run(
        [*SAVED_MODEL_CLI, "show", "--dir", str(version), "--all"],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    ).stdout
    blocks = {block.split("'", 1)[0]: block for block in shown.split("signature_def['")[1:]}
    shapes = {
        name: re.search(r"inputs\['inputs'\].*?shape: \(([^)]*)\)", block, flags=re.S).group(1)
        for name, block in blocks.items()
        if name != "__saved_model_init_op"
    }
    assert shapes["serving_default"] == shapes["serve_raw"] == "-1, 8, 8"  # digits as scikit-learn stores them
    assert shapes["serve"] == "-1, 28, 28, 1"  # what the pipeline feeds the model (data.image_size=28)
    assert set(shapes) == {"serve", "serve_raw", "serving_default"}
