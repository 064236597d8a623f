"""`model.weights` (tfhydra/model/weights.py): a local HDF5 weights file fills the built model, for every model kind
(built-in, keras_app's no-top files, a user's `_target_`); a missing, foreign or ill-fitting file is one line."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CONFIG_DIR, last_line, run_cli

import tfhydra
from tfhydra.cli.preflight import check_overrides
from tfhydra.config.contracts import DataSpec
from tfhydra.config.errors import ConfigError

IMAGES = DataSpec((8, 8, 1), 4, tuple("abcd"), 1, 1)
TINY_RUN = [
    "model=mlp",
    "model.units=[16]",
    "data=synthetic",
    "data.shape=[8,8,1]",
    "data.num_classes=4",
    "data.train_size=128",
    "data.val_size=32",
    "data.test_size=0",
    "trainer.epochs=1",
    "logging.histogram_freq=0",
]
MODELS = {
    "cnn": ["model=cnn", "model.filters=[4]", "model.dense_units=8"],
    "mlp": ["model=mlp", "model.units=[8,8]"],
    "resnet": ["model=resnet", "model.depth=8", "model.width=4"],
    "target": ["~model", "+model._target_=user_code.build_tiny_model", "+model.units=6"],
}


def build(compose_cfg, overrides, spec=IMAGES):
    from tfhydra.model.build import build_model

    return build_model(compose_cfg(overrides).model, spec)


def examples(spec=IMAGES, n=8):
    return np.random.default_rng(1).random((n, *spec.input_shape), dtype=np.float32)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_weights_saved_from_a_model_fill_a_fresh_build(compose_cfg, tmp_path, name):
    saved = build(compose_cfg, MODELS[name])
    path = tmp_path / "saved.weights.h5"
    saved.save_weights(str(path))
    fresh = build(compose_cfg, MODELS[name])
    x = examples()
    assert not np.allclose(fresh.predict(x, verbose=0), saved.predict(x, verbose=0))  # seeds differ: can fail
    loaded = build(compose_cfg, [*MODELS[name], f"{'+' if name == 'target' else ''}model.weights={path}"])
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), saved.predict(x, verbose=0))


def test_a_runs_best_weights_start_a_new_model_that_predicts_as_the_export(compose_cfg, tmp_path):
    """The file a run keeps (checkpoints/best.weights.h5) as `model.weights`: the fresh build predicts what the
    run's exported .keras model predicts, bit for bit."""
    import tf_keras as keras

    tfhydra.run(compose_cfg([*TINY_RUN, "export.formats=[keras]"]), run_dir=tmp_path / "run")
    best = tmp_path / "run" / "checkpoints" / "best.weights.h5"
    exported = keras.models.load_model(next((tmp_path / "run" / "export").rglob("*.keras")))
    spec = DataSpec((8, 8, 1), 4, tuple("0123"), 1, 1)
    fresh = build(compose_cfg, [*TINY_RUN, f"model.weights={best}"], spec)
    x = examples(spec)
    np.testing.assert_array_equal(fresh.predict(x, verbose=0), exported.predict(x, verbose=0))


def test_keras_app_takes_a_no_top_file_of_its_application_into_the_base(compose_cfg, tmp_path):
    """Keras' own `*_notop.h5` layout (legacy .h5 of the application without its top): the base is filled, the
    head starts fresh; and a file of the whole keras_app model fills all of it."""
    import tf_keras as keras

    spec = DataSpec((32, 32, 3), 3, tuple("abc"), 1, 1)
    app = ["model=keras_app", "model.arch=MobileNetV2", "+model.arch_args.alpha=0.35"]
    base = keras.applications.MobileNetV2(
        include_top=False, weights=None, input_shape=(32, 32, 3), pooling="avg", alpha=0.35
    )
    notop = tmp_path / "mobilenet_v2_0.35_notop.h5"
    base.save_weights(str(notop))
    model = build(compose_cfg, [*app, f"model.weights={notop}"], spec)
    inner = next(layer for layer in model.layers if isinstance(layer, keras.Model))
    assert len(inner.weights) == len(base.weights) > 100
    assert all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(inner.weights, base.weights, strict=True))
    whole = tmp_path / "whole.weights.h5"
    model.save_weights(str(whole))
    again = build(compose_cfg, [*app, f"model.weights={whole}"], spec)
    x = examples(spec, 4)
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))


def refusal(overrides) -> str:
    with pytest.raises(ConfigError) as caught:
        check_overrides(CONFIG_DIR, "config", overrides)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_missing_foreign_or_checkpoint_file_is_refused_before_tensorflow(tmp_path):
    (tmp_path / "notes.h5").write_text("not weights")
    (tmp_path / "ckpt.index").write_bytes(b"\0")
    accepted = "accepted: null (random initialisation), imagenet (keras_app only"
    missing = refusal(["model=mlp", f"model.weights={tmp_path}/nope.h5"])
    assert missing.startswith(f"model.weights={tmp_path}/nope.h5: no such file; {accepted}")
    assert "not an HDF5 weights file" in refusal(["model=resnet", f"model.weights={tmp_path}/notes.h5"])
    assert "a TensorFlow checkpoint prefix" in refusal(["model=cnn", f"model.weights={tmp_path}/ckpt"])
    assert "ImageNet weights are keras_app's" in refusal(["model=mlp", "model.weights=imagenet"])
    target = ["~model", "+model._target_=user_code.build_tiny_model", f"+model.weights={tmp_path}/nope.h5"]
    assert refusal(target).startswith(f"model.weights={tmp_path}/nope.h5: no such file")  # the key is tfhydra's


def test_weights_that_do_not_fit_the_model_are_one_line(compose_cfg, tmp_path):
    other = build(compose_cfg, ["model=mlp", "model.units=[8,8]"])
    path = tmp_path / "other.weights.h5"
    other.save_weights(str(path))
    with pytest.raises(ConfigError) as caught:
        build(compose_cfg, ["model=mlp", "model.units=[8,9]", f"model.weights={path}"])
    message = str(caught.value)
    assert message.startswith(f"model.weights={path}: its weights do not fit model mlp (") and "\n" not in message
    assert "accepted: null (random initialisation)" in message
    with pytest.raises(ConfigError, match=r"fit model mlp \(dataset layers/dense_1/vars/0: shape \(8, 8\), which no"):
        build(compose_cfg, ["model=mlp", "model.units=[8]", f"model.weights={path}"])  # found before it is read


def test_the_command_line_says_a_misfit_in_one_line(compose_cfg, tmp_path):
    path = tmp_path / "small.weights.h5"
    small = build(compose_cfg, ["model=mlp", "model.units=[8]"], DataSpec((8, 8, 1), 10, tuple("0123456789"), 1, 1))
    small.save_weights(str(path))
    done = run_cli("model=mlp", "trainer.epochs=1", f"model.weights={path}", f"hydra.run.dir={tmp_path}/r")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert last_line(done.stderr).startswith(f"Error: model.weights={path}: its weights do not fit model mlp (")
