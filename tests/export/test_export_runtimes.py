"""The runtimes that run the exported artefacts (issue 18, items 3 and 4): LiteRT for TFLite files (tf.lite.Interpreter
where LiteRT is missing), onnxruntime for the ONNX file, and the text models' TFLite files.

Every figure of the record is checked against predictions made here from the exported files: the Keras file
(`export/keras`) is the reference the TFLite and ONNX files must agree with on the validation split.
"""

import importlib.metadata
import sys

import numpy as np
import onnx
import onnxruntime
import pytest
import tensorflow as tf
import tf_keras as keras
from ai_edge_litert.interpreter import Interpreter
from conftest import FAST, compose_config, read_run_record, run_cli
from data_files import write_text_csv
from omegaconf import OmegaConf

import tfhydra
from tfhydra.config.errors import ConfigError
from tfhydra.export import measure, tflite
from tfhydra.runner.plan import plan_run

LITERT = f"ai-edge-litert {importlib.metadata.version('ai-edge-litert')}"
ONNXRUNTIME = f"onnxruntime {onnxruntime.__version__}"
ONE_EXAMPLE = 1 / 360  # digits' validation split has 360 examples


def compose(overrides):
    return compose_config([*FAST, *overrides])


def trained(run_dir, overrides):
    """(run directory, its record, its validation split as arrays, the exported Keras model's predictions)."""
    from tfhydra.data.pipeline import build_datasets

    cfg = compose([*overrides, "logging.write_graph=false"])  # the exports are the subject, not TensorBoard's graph
    tfhydra.run(cfg, run_dir=run_dir)
    batches = list(build_datasets(cfg.data, cfg.trainer.seed).validation)
    x = np.concatenate([np.asarray(b[0]) for b in batches])
    y = np.concatenate([np.asarray(b[1]) for b in batches])
    model = keras.models.load_model(str(run_dir / "export" / "keras" / "model.keras"), compile=False)
    return run_dir, read_run_record(run_dir), (x, y), model.predict(x, verbose=0)


def litert_predictions(path, x):
    """One example per call, as a device runs it (and as a recurrent model's batch-of-one file must be run)."""
    interpreter = Interpreter(model_path=str(path))
    interpreter.allocate_tensors()
    source, target = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    rows = []
    for row in x:
        interpreter.set_tensor(source["index"], row[None].astype(source["dtype"]))
        interpreter.invoke()
        rows.append(interpreter.get_tensor(target["index"])[0])
    return np.stack(rows)


def onnx_predictions(path, x):
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def accuracy_of(predictions, labels):
    return float(np.mean(predictions.argmax(axis=-1) == labels))


def assert_agree(predictions, reference, tolerance=1e-4):
    """The same class for >= 99.9% of the examples, and probabilities within `tolerance`."""
    assert np.mean(predictions.argmax(axis=-1) == reference.argmax(axis=-1)) >= 0.999
    np.testing.assert_allclose(predictions, reference, atol=tolerance)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    """The default float32 CNN on digits, exported to every format whose file is measured."""
    return trained(tmp_path_factory.mktemp("cnn"), ["export.formats=[keras,tflite,onnx]"])


@pytest.fixture(scope="module")
def reviews(tmp_path_factory):
    return write_text_csv(tmp_path_factory.mktemp("text") / "reviews.csv", n=200)


def text_run(tmp_path, reviews, model, *overrides):
    return trained(
        tmp_path,
        [
            f"model={model}",
            "data=text_csv",
            f"data.path={reviews}",
            "trainer.epochs=3",
            "export.formats=[keras,tflite,onnx]",
            *overrides,
        ],
    )


# ------------------------------------------------------------------------------------------------ LiteRT


def test_tflite_accuracy_is_measured_by_litert_and_equals_keras(cnn):
    run_dir, record, (x, y), reference = cnn
    figures = record["compression"]
    entry = figures["artefacts"]["export/tflite/model.tflite"]
    assert entry["runtime"] == LITERT and entry["quantization"] == "none" and entry["input_type"] == "float32"
    assert entry["val_accuracy"] == pytest.approx(figures["keras_val_accuracy"], abs=ONE_EXAMPLE)
    assert figures["keras_val_accuracy"] == pytest.approx(accuracy_of(reference, y))
    predictions = litert_predictions(run_dir / "export" / "tflite" / "model.tflite", x)
    assert_agree(predictions, reference)
    assert entry["val_accuracy"] == pytest.approx(accuracy_of(predictions, y))


def test_without_litert_tf_lite_interpreter_measures_the_same_accuracy(cnn, monkeypatch, caplog):
    run_dir, record, _, _ = cnn
    from tfhydra.data.pipeline import build_datasets

    cfg = compose([])
    validation = build_datasets(cfg.data, cfg.trainer.seed).validation
    monkeypatch.setitem(sys.modules, "ai_edge_litert.interpreter", None)  # `from ai_edge_litert...` raises ImportError
    tflite.tflite_runtime.cache_clear()
    try:
        interpreter = tflite.tflite_interpreter(run_dir / "export" / "tflite" / "model.tflite")
        runtime = tflite.tflite_runtime()[1]
        measured = measure.accuracy(tflite.tflite_predict(interpreter), validation)
    finally:
        tflite.tflite_runtime.cache_clear()
    assert isinstance(interpreter, tf.lite.Interpreter)
    assert runtime == f"tf.lite.Interpreter (TensorFlow {tf.__version__})"
    assert "ai-edge-litert is not installed: TFLite accuracy is measured with tf.lite.Interpreter" in caplog.text
    assert measured == record["compression"]["artefacts"]["export/tflite/model.tflite"]["val_accuracy"]


# -------------------------------------------------------------------------------------------------- ONNX


def test_onnx_export_predicts_as_keras_and_onnxruntime_measures_it(cnn):
    run_dir, record, (x, y), reference = cnn
    path = run_dir / "export" / "onnx" / "model.onnx"
    assert sorted(p.name for p in (run_dir / "export").iterdir()) == [
        "README.md",
        "keras",
        "onnx",
        "tflite",
    ]  # no partials
    entry = record["compression"]["artefacts"]["export/onnx/model.onnx"]
    assert entry["runtime"] == ONNXRUNTIME and entry["bytes"] == path.stat().st_size
    predictions = onnx_predictions(path, x)
    assert_agree(predictions, reference)
    assert entry["val_accuracy"] == pytest.approx(accuracy_of(predictions, y))
    assert entry["val_accuracy"] == pytest.approx(record["compression"]["keras_val_accuracy"], abs=ONE_EXAMPLE)
    graph = onnx.load(str(path))
    assert [i.name for i in graph.graph.input] == ["inputs"] and graph.opset_import[0].version == 15
    assert graph.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 0  # a free batch dimension


# ----------------------------------------------------------------------------------------- text models


@pytest.mark.slow
def test_lstm_tflite_converts_with_builtins_at_batch_one_and_is_measured(tmp_path, reviews):
    run_dir, record, (x, y), reference = text_run(tmp_path, reviews, "lstm")
    artefacts = record["compression"]["artefacts"]
    tflite = run_dir / "export" / "tflite" / "model.tflite"
    details = Interpreter(model_path=str(tflite)).get_input_details()[0]
    assert list(details["shape_signature"]) == [1, x.shape[1]] and details["dtype"] == np.int64
    predictions = litert_predictions(tflite, x)
    assert_agree(predictions, reference)
    assert artefacts["export/tflite/model.tflite"]["val_accuracy"] == pytest.approx(accuracy_of(predictions, y))
    assert artefacts["export/tflite/model.tflite"]["runtime"] == LITERT
    assert_agree(onnx_predictions(run_dir / "export" / "onnx" / "model.onnx", x), reference)
    assert artefacts["export/onnx/model.onnx"]["val_accuracy"] == pytest.approx(accuracy_of(reference, y))


@pytest.mark.slow
def test_transformer_tflite_and_onnx_convert_and_agree_with_keras(tmp_path, reviews):
    run_dir, record, (x, y), reference = text_run(tmp_path, reviews, "transformer")
    artefacts = record["compression"]["artefacts"]
    tflite = run_dir / "export" / "tflite" / "model.tflite"
    assert list(Interpreter(model_path=str(tflite)).get_input_details()[0]["shape_signature"]) == [-1, x.shape[1]]
    assert_agree(litert_predictions(tflite, x), reference)
    onnx_file = run_dir / "export" / "onnx" / "model.onnx"
    assert_agree(onnx_predictions(onnx_file, x), reference)  # GELU's Erfc, rewritten as 1 - Erf
    assert {"Erf"} <= {node.op_type for node in onnx.load(str(onnx_file)).graph.node}
    for name in ("export/tflite/model.tflite", "export/onnx/model.onnx"):
        assert artefacts[name]["val_accuracy"] == pytest.approx(accuracy_of(reference, y))


# -------------------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "overrides", [[], ["model.cell=gru"], ["model.mask_zero=false"]], ids=["masked_lstm", "gru", "unmasked_lstm"]
)
def test_int8_tflite_of_a_recurrent_model_is_refused_before_training(tmp_path, reviews, overrides):
    """Calibration kills the process on GRU and masked LSTM layers; an unmasked LSTM's int8 file is constant."""
    done = run_cli(
        "model=lstm",
        "data=text_csv",
        f"data.path={reviews}",
        "export.formats=[tflite]",
        "export.tflite.quantization=int8",
        *overrides,
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    cell = "gru" if overrides == ["model.cell=gru"] else "lstm"
    assert done.returncode == 1 and done.stderr.strip() == (
        "Error: export.tflite.quantization=int8: TensorFlow's TFLite converter has no working int8 for recurrent "
        f"layers (model.cell={cell}); accepted: none, dynamic or float16 with model=lstm"
    ), done.stderr
    assert not (tmp_path / "run").exists()


def test_int8_conversion_of_your_own_recurrent_model_is_refused_not_crashed():
    inputs = keras.Input((6,), dtype="int64")
    x = keras.layers.Bidirectional(keras.layers.GRU(4, name="gru"))(keras.layers.Embedding(10, 4)(inputs))
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(x))
    with pytest.raises(ConfigError) as raised:
        tflite.convert(model, "int8", calibration=lambda: iter([[np.zeros((1, 6), np.int64)]]))
    assert str(raised.value) == (
        "export.tflite.quantization=int8: TensorFlow's TFLite converter has no working int8 "
        f"for recurrent layers (GRU layer {tflite.recurrent_layers(model)[0].name}; "
        "docs/compression.md); accepted: none, dynamic or float16 for this model"
    )


def test_onnx_without_its_packages_is_refused_in_one_line(monkeypatch):
    cfg = compose(["export.formats=[saved_model,onnx]"])
    plan_run(cfg)  # installed (the dev extra): planned
    monkeypatch.setitem(sys.modules, "tf2onnx", None)  # importlib.util.find_spec then answers None
    with pytest.raises(ConfigError) as raised:
        plan_run(cfg)
    assert str(raised.value) == (
        "export.formats=onnx: the ONNX export needs tf2onnx, which is not installed; "
        'accepted: pip install "tfhydra[onnx]", or export.formats without onnx'
    )


def test_onnx_is_an_accepted_export_format():
    from tfhydra.export.base import EXPORT_FORMATS  # its first lookup imports every writer

    assert "onnx" in EXPORT_FORMATS.names()
    assert OmegaConf.select(compose(["export.formats=[onnx]"]), "export.formats") == ["onnx"]
