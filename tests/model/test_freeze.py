"""`model.freeze` (tfhydra/model/freeze.py): a frozen layer's weights are bit-identical after training, its
BatchNorm statistics too; the record says what trained; a pattern that matches nothing is one line."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from conftest import ROOT, read_run_record, run_cli

KERAS_APP = [
    "model=keras_app",
    "model.arch=MobileNetV2",
    "+model.arch_args.alpha=0.35",
    "data=synthetic",
    "data.shape=[32,32,3]",
    "data.train_size=64",
    "data.val_size=32",
    "data.test_size=0",
    "data.batch_size=16",
    "trainer.epochs=2",
    "export.formats=[]",
    "logging.histogram_freq=0",
    "logging.images_freq=0",
    "logging.write_graph=false",
]


def layer_weights(path) -> dict[str, np.ndarray]:
    found: dict[str, np.ndarray] = {}
    with h5py.File(path) as weights:
        weights["layers"].visititems(lambda n, i: found.update({n: np.array(i)}) if hasattr(i, "shape") else None)
    return found


@pytest.mark.slow
def test_a_frozen_base_keeps_every_weight_and_statistic_and_the_head_trains(tmp_path):
    """keras_app's MobileNetV2 (BatchNorm throughout) with model.freeze=base: after 2 epochs every base weight,
    moving statistics included, is bit-identical to what it was before the first batch; the head moved."""
    run_dir, start = tmp_path / "run", tmp_path / "start.npz"
    done = run_cli(
        *KERAS_APP,
        "model.freeze=base",
        f"trainer.callbacks=[{{_target_:user_code.WeightsAtStart,path:'{start}'}}]",
        f"hydra.run.dir={run_dir}",
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    layers = read_run_record(run_dir)["layers"]
    assert layers["freeze"] == "base" and layers["frozen"] == ["mobilenetv2_0.35_32"]
    assert 0 < layers["trainable_params"] < layers["frozen_params"]
    before = dict(np.load(start))
    kept = layer_weights(run_dir / "checkpoints" / "last.weights.h5")
    assert len(kept) == len(before)
    # the .h5 names layers by their class (the head is the one top-level `dense`), Keras names them by layer
    head = {k: v for k, v in kept.items() if k.startswith("dense/")}
    base = {k: v for k, v in kept.items() if not k.startswith("dense/")}
    before_head = [v for k, v in before.items() if k.startswith("logits")]
    before_base = sorted((v for k, v in before.items() if not k.startswith("logits")), key=lambda a: (a.shape, a.sum()))
    after_base = sorted(base.values(), key=lambda a: (a.shape, a.sum()))
    assert len(before_base) == len(after_base) > 100
    assert all(np.array_equal(a, b) for a, b in zip(before_base, after_base, strict=True))  # bit for bit
    assert not any(np.array_equal(a, b) for a, b in zip(before_head, head.values(), strict=True))


def test_a_pattern_that_matches_no_layer_is_one_line(tmp_path):
    done = run_cli("model=mlp", "model.freeze=[nosuchlayer*]", "trainer.epochs=1", f"hydra.run.dir={tmp_path}/r")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: model.freeze=nosuchlayer*: matches no layer of the model; accepted: ")
    assert "dense" in last  # the model's layers, to choose from


def test_freeze_patterns_freeze_those_layers_only(compose_cfg):
    from tfhydra.config.contracts import DataSpec
    from tfhydra.model.build import build_model
    from tfhydra.model.freeze import freeze_layers, trained_layers

    cfg = compose_cfg(["model=resnet", "model.depth=8", "model.freeze=[stem*,stage1_*]"])
    model = build_model(cfg.model, DataSpec((16, 16, 3), 4, tuple("abcd"), 1, 1))
    freeze_layers(model, cfg.model.freeze)
    frozen = {layer.name for layer in model.layers if layer.weights and not layer.trainable}
    assert frozen and all(name.startswith(("stem", "stage1_")) for name in frozen)
    assert all(layer.trainable for layer in model.layers if layer.name.startswith(("stage2_", "logits")))
    record = trained_layers(model, cfg.model.freeze)
    assert record["freeze"] == ["stem*", "stage1_*"] and set(record["frozen"]) == frozen
    assert record["trainable_params"] + record["frozen_params"] + record["statistics_params"] == model.count_params()
    # unfrozen, only BatchNorm's moving statistics are non-trainable, and they are not called frozen
    whole = build_model(cfg.model, DataSpec((16, 16, 3), 4, tuple("abcd"), 1, 1))
    norms = [layer for layer in whole.layers if "BatchNormalization" in type(layer).__name__]
    moving = sum(2 * int(layer.moving_mean.shape[0]) for layer in norms)
    assert moving > 0 and trained_layers(whole, None)["frozen_params"] == 0
    assert trained_layers(whole, None)["statistics_params"] == moving


def test_a_bad_freeze_value_is_refused_before_tensorflow():
    done = run_cli("model.freeze=all", "trainer.epochs=1")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "Error: model.freeze=all: not an accepted value; accepted: none, base (every layer with weights but the "
        "output layer) or a list of layer-name patterns"
    )


def test_a_users_model_is_frozen_too_and_its_builder_never_sees_the_key(tmp_path):
    run_dir = tmp_path / "run"
    done = run_cli(
        "~model",
        "+model._target_=user_code.build_tiny_model",
        "+model.freeze=base",
        "trainer.epochs=1",
        "export.formats=[]",
        f"hydra.run.dir={run_dir}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    layers = read_run_record(run_dir)["layers"]
    assert layers["freeze"] == "base" and len(layers["frozen"]) >= 1 and layers["trainable_params"] > 0


def test_freezing_every_weight_is_one_line_before_training(compose_cfg):
    """`model.freeze=[*]` used to train 0 parameters and end `completed`: refused where the model is frozen."""
    from tfhydra.config.contracts import DataSpec
    from tfhydra.config.errors import ConfigError
    from tfhydra.model.build import build_model
    from tfhydra.model.freeze import freeze_layers

    cfg = compose_cfg(["model=mlp", "model.units=[8]", "model.freeze=[*]"])
    model = build_model(cfg.model, DataSpec((8, 8, 1), 4, tuple("abcd"), 1, 1))
    with pytest.raises(ConfigError) as caught:
        freeze_layers(model, cfg.model.freeze)
    assert str(caught.value).startswith(
        "model.freeze=['*']: it freezes every weight of the model: nothing would train (0 trainable parameters); "
    )
    again = build_model(cfg.model, DataSpec((8, 8, 1), 4, tuple("abcd"), 1, 1))
    freeze_layers(again, ["dense*"])  # the head (logits) left: accepted
    assert again.trainable_weights
