"""Every model option trains one epoch on matching data and exports (the run contract), in-process, on tiny data."""

import numpy as np
import pytest
import tensorflow as tf
from conftest import FAST, read_run_record

import tfhydra

IMAGES = [
    "data=synthetic",
    "data.shape=[32,32,3]",
    "data.num_classes=3",
    "data.train_size=64",
    "data.val_size=32",
    "data.batch_size=32",
    "data.test_size=32",  # one batch measured on the exported weights (the default is 512)
]
# Token data from a user source (tests/user_code.py): 16 ids per example, vocabulary of 50, 2 classes.
TOKENS = ["~data", "+data._target_=user_code.token_source", "+data.num_classes=2", "data.batch_size=32"]

# (model overrides, data overrides, parameter count at that data: checks the head follows the class count)
RUNS = {
    "cnn": (
        ["model=cnn", "model.filters=[8]", "model.dense_units=16"],
        IMAGES,
        8 * 27 + 8 + 15 * 15 * 8 * 16 + 16 + 16 * 3 + 3,
    ),
    "mlp": (["model=mlp", "model.units=[16]"], IMAGES, 32 * 32 * 3 * 16 + 16 + 16 * 3 + 3),
    # stem 248 + stage1 1216 + stage2 3776 + stage3 14720 (convs, batch norms, projection shortcuts) + head 32*3+3
    "resnet": (["model=resnet", "model.depth=8", "model.width=8"], IMAGES, 248 + 1216 + 3776 + 14720 + 99),
    # MobileNet (v1) without its top at alpha 0.25 has 218,544 parameters in 86 layers; its pooled output has 256
    # features. Fewer layers, less tracing: this case with MobileNetV2 (the default arch, 154 layers) took 58.2 s
    # against 33.3 s (pytest -n 0, back to back, load 11 on 2 cores); MobileNetV2 is built in
    # tests/model/test_model.py and trained in tests/model/test_freeze.py
    "keras_app": (
        ["model=keras_app", "model.arch=MobileNet", "+model.arch_args.alpha=0.25"],
        IMAGES,
        218544 + 256 * 3 + 3,
    ),
    # embedding 50*16 + 4 gates * (16*16 + 16*16 + 16) + head 16*2+2 (bidirectional doubles the tracing time:
    # tests/model/test_model.py checks its structure without training)
    "lstm": (["model=lstm", "model.units=[16]", "model.embedding_dim=16"], TOKENS, 800 + 2112 + 34),
    "transformer": (
        ["model=transformer", "model.width=16", "model.heads=2", "model.blocks=1", "model.mlp_dim=32"],
        # embedding 50*16 + block (2 norms 64, attention 4*272, MLP 544+528) + final norm 32 + head 16*2+2
        TOKENS,
        800 + 64 + 1088 + 1072 + 32 + 34,
    ),
}

SLOW_RUNS = {"keras_app"}  # the slowest case: in .ci/run (pytest -m "slow or not slow"), not a plain pytest


@pytest.mark.parametrize(
    "option", [pytest.param(o, marks=pytest.mark.slow) if o in SLOW_RUNS else o for o in sorted(RUNS)]
)
def test_model_option_trains_one_epoch_and_exports(option, compose_cfg, tmp_path):
    model_overrides, data_overrides, params = RUNS[option]
    # no op graph for TensorBoard (one more trace of the model): training and export are the subject here
    cfg = compose_cfg([*model_overrides, *data_overrides, *FAST, "logging.write_graph=false"])
    tfhydra.run(cfg, run_dir=tmp_path)

    metrics = read_run_record(tmp_path)
    assert metrics["status"] == "completed" and metrics["epochs_run"] == 1
    assert metrics["params"] == params
    classes = metrics["data"]["num_classes"]
    served = tf.saved_model.load(str(tmp_path / metrics["exports"]["saved_model"]))
    if option in ("lstm", "transformer"):
        examples = tf.constant(np.random.default_rng(0).integers(0, 50, size=(4, 16)), dtype=tf.int32)
    else:
        examples = tf.random.uniform((4, 32, 32, 3))
    probabilities = served.serve(examples).numpy()
    assert probabilities.shape == (4, classes) and probabilities.dtype == np.float32
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
