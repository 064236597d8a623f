"""A SavedModel's graph is read before TensorFlow loads it (tfhydra/trust/saved_model_ops.py): real SavedModels,
saved here by tf.saved_model.save, each with one thing a model never needs in a function its caller reaches."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfhydra.config.errors import ConfigError
from tfhydra.evaluate import load_served_model
from tfhydra.trust import saved_model_ops
from tfhydra.trust.saved_model_ops import check_saved_model

SPEC = tf.TensorSpec([None, 2], tf.float32)


class Model(tf.Module):
    """A Dense layer's worth of variables, so the saver's own SaveV2/RestoreV2 functions are in the file."""

    def __init__(self, extra=None):
        super().__init__()
        self.kernel = tf.Variable([[1.0], [2.0]])
        self.extra = extra

    @tf.function(input_signature=[SPEC])
    def serve(self, x):
        if self.extra is not None:
            self.extra()
        return tf.matmul(x, self.kernel)


EXTRAS = {
    "WriteFile": lambda: tf.io.write_file("/tmp/tfhydra-never-written", "x"),
    "ReadFile": lambda: tf.print(tf.io.read_file("/etc/hostname")),
    "EagerPyFunc": lambda: tf.py_function(lambda: 0.0, [], tf.float32),
    "SaveV2": lambda: tf.raw_ops.SaveV2(
        prefix="/tmp/tfhydra-never-saved", tensor_names=["k"], shape_and_slices=[""], tensors=[tf.constant(1.0)]
    ),
}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("saved_models")
    paths = {}
    for name, extra in [("plain", None), *EXTRAS.items()]:
        model = Model(extra)
        tf.saved_model.save(model, str(root / name), signatures={"serve": model.serve})
        paths[name] = root / name
    return paths


def test_a_model_with_its_saver_passes_and_loads(saved):
    check_saved_model(saved["plain"], "a SavedModel")  # its SaveV2/RestoreV2 live in the saver's functions only
    assert tf.saved_model.load(str(saved["plain"])).serve(tf.ones([1, 2])).numpy().tolist() == [[3.0]]


@pytest.mark.parametrize("op", sorted(EXTRAS))
def test_an_op_outside_the_model_is_one_line_naming_it(saved, op):
    with pytest.raises(ConfigError) as caught:
        check_saved_model(saved[op], "a SavedModel tfhydra exported")
    message = str(caught.value)
    assert message.startswith(f"{saved[op]}: its graph holds the ") and f"op {op} " in message and "\n" not in message
    assert message.endswith("tfhydra does not load it; accepted: a SavedModel tfhydra exported")


def test_evaluate_and_predict_refuse_it_before_loading(saved, tmp_path):
    """tfhydra-evaluate's and tfhydra-predict's loader (`load_served_model`), on a run directory whose export was
    swapped: the refusal as it is, nothing written."""
    run = tmp_path / "run"
    (run / "export").mkdir(parents=True)
    (run / "export" / "saved_model").symlink_to(saved["WriteFile"], target_is_directory=True)
    with pytest.raises(ConfigError, match="op WriteFile"):
        load_served_model(run)
    assert not (tmp_path / "tfhydra-never-written").exists()


def test_a_file_too_large_is_one_line_and_one_not_a_saved_model_is_left_to_tensorflow(saved, tmp_path, monkeypatch):
    (tmp_path / "saved_model.pb").write_bytes(b"\xff" * 64)
    check_saved_model(tmp_path, "a SavedModel")  # TensorFlow's loader says it (tests/trust/test_safety.py's line)
    monkeypatch.setattr(saved_model_ops, "MAX_BYTES", 100)
    with pytest.raises(ConfigError, match="bytes, over 100"):
        check_saved_model(saved["plain"], "a SavedModel")
