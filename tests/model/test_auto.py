"""model=auto, the default: what it builds for each kind of data, straight from a DataSpec (no data, no training),
and the one line for a key of a model it did not choose."""

import pytest

from tfhydra.config.contracts import DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.model.auto import model_choice
from tfhydra.model.base import MODELS
from tfhydra.model.build import build_model

IMAGES = DataSpec((28, 28, 1), 10, tuple("0123456789"), 1437, 360)
TABLE = DataSpec((10,), 1, ("target",), 282, 71)
TOKENS = DataSpec((16,), 2, ("neg", "pos"), 100, 20, dtype="int32", vocab_size=50)


def kinds(model):
    return [type(layer).__name__ for layer in model.layers]


def test_auto_is_the_default_and_carries_the_cnn_keys_with_the_cnn_defaults(compose_cfg):
    auto, cnn = compose_cfg().model, compose_cfg(["model=cnn"]).model
    assert auto.name == "auto"
    assert {k: auto[k] for k in cnn if k != "name"} == {k: cnn[k] for k in cnn if k != "name"}
    assert compose_cfg(["model=transformer"]).model == {**auto.tokens}


def test_images_get_the_seed_cnn(compose_cfg):
    auto, cnn = (build_model(compose_cfg(o).model, IMAGES) for o in ([], ["model=cnn"]))
    assert auto.name == "cnn" and kinds(auto) == kinds(cnn) and auto.count_params() == cnn.count_params()
    assert model_choice(compose_cfg().model, IMAGES) == {
        "option": "auto",
        "chose": "cnn",
        "data": "images",
        "because": "the data's examples are float32 of shape (28, 28, 1)",
    }


def test_a_cnn_key_under_auto_changes_the_cnn_it_builds(compose_cfg):
    model = build_model(compose_cfg(["model.filters=[8]", "model.dense_units=12"]).model, IMAGES)
    assert [layer.filters for layer in model.layers if hasattr(layer, "filters")] == [8]
    assert [layer.units for layer in model.layers if type(layer).__name__ == "Dense"] == [12, 10]


def test_feature_vectors_get_the_tabular_mlp_of_autos_own_keys(compose_cfg):
    cfg = compose_cfg(["task=regression"])
    model = build_model(cfg.model, TABLE)
    dense = [layer.units for layer in model.layers if type(layer).__name__ == "Dense" and layer.name != "wide"]
    assert model.name == "mlp" and dense == [*cfg.model.tabular.units, 1]
    assert cfg.model.tabular.wide and model.get_layer("wide").units == 1  # the linear path, beside them
    dropouts = [layer.rate for layer in model.layers if type(layer).__name__ == "Dropout"]
    assert dropouts == [cfg.model.tabular.dropout] * (len(cfg.model.tabular.units) - 1)
    assert model_choice(cfg.model, TABLE)["chose"] == "mlp" and model_choice(cfg.model, TABLE)["data"] == "features"


def test_token_ids_get_the_sequence_model(compose_cfg):
    model = build_model(compose_cfg().model, TOKENS)
    assert model.name == MODELS.names()[[MODELS.traits(n).get("default_for") for n in MODELS.names()].index("tokens")]
    assert model_choice(compose_cfg().model, TOKENS)["data"] == "tokens"


def test_a_named_model_wins(compose_cfg):
    assert build_model(compose_cfg(["model=mlp"]).model, IMAGES).name == "mlp"
    assert model_choice(compose_cfg(["model=mlp"]).model, TABLE) is None


def test_a_cnn_key_when_auto_builds_the_mlp_is_one_line_naming_the_choice(compose_cfg):
    with pytest.raises(ConfigError) as info:
        build_model(compose_cfg(["model.filters=[16,32]"]).model, TABLE)
    line = str(info.value)
    assert "\n" not in line and line.startswith("model.filters=[16, 32]: model=auto chose mlp for this data")
    assert "float32 of shape (10,)" in line and "model=cnn" in line and "model.tabular.*" in line


def test_a_tabular_key_when_auto_builds_the_cnn_is_one_line_too(compose_cfg):
    with pytest.raises(ConfigError, match=r"^model.tabular.units=\[8\]: model=auto chose cnn for this data"):
        build_model(compose_cfg(["model.tabular.units=[8]"]).model, IMAGES)


def test_data_auto_has_no_model_for_is_one_line(compose_cfg):
    with pytest.raises(ConfigError, match=r"^model=auto: no model for this data .*shape \(4, 4\)"):
        build_model(compose_cfg().model, DataSpec((4, 4), 2, ("a", "b"), 10, 10))


def test_a_csv_regression_without_a_model_trains_the_tabular_mlp(compose_cfg, tmp_path):
    """The acceptance line of issue 55: `python train.py data=csv data.path=t.csv data.label=target task=regression`,
    no model=, trains (three epochs here: the tables' own epochs are conf/tables.yaml's)."""
    import numpy as np
    from conftest import read_run_record

    import tfhydra

    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 4)) * [1, 10, 100, 1000]
    table = np.column_stack([x, 50 + 3 * x[:, 0] + 0.2 * x[:, 1] + rng.normal(size=120)])
    np.savetxt(tmp_path / "t.csv", table, delimiter=",", header="a,b,c,d,target", comments="")
    overrides = ["data=csv", f"data.path={tmp_path / 't.csv'}", "data.label=target", "task=regression"]
    cfg = compose_cfg(overrides)
    assert cfg.model.name == "auto" and cfg.task.standardize is True and cfg.trainer.early_stopping.patience > 0
    quick = ["trainer.epochs=3", "logging.histogram_freq=0", "export.formats=[]"]
    tfhydra.run(compose_cfg([*overrides, *quick]), run_dir=tmp_path / "run")
    record = read_run_record(tmp_path / "run")
    assert record["status"] == "completed" and record["epochs_run"] == 3 and record["model"] == "mlp"
    assert record["model_choice"]["chose"] == "mlp" and record["model_choice"]["data"] == "features"
    assert record["model_choice"]["linear_start"] is True  # started at the least-squares fit (linear_start.py)
    assert record["task"]["standardize"] is True and record["test"]["metrics"]["r2"] > 0.9


def test_a_wide_mlp_holds_the_linear_model_beside_its_hidden_layers(compose_cfg):
    """model.tabular.wide (wide & deep): the features reach the logits through a Dense of their own, so with the
    hidden path at zero the model is exactly the linear model (softmax of x W + b)."""
    import numpy as np

    spec = DataSpec((4,), 3, ("a", "b", "c"), 60, 20)
    model = build_model(compose_cfg(["model.tabular.wide=true", "model.tabular.units=[5]"]).model, spec)
    assert model.name == "mlp" and model.get_layer("wide").kernel.shape == (4, 3)
    rng = np.random.default_rng(0)
    for layer in model.layers:
        if layer.name != "wide":
            layer.set_weights([np.zeros_like(w) for w in layer.get_weights()])
    kernel, bias = rng.normal(size=(4, 3)), rng.normal(size=3)
    model.get_layer("wide").set_weights([kernel, bias])
    x = rng.normal(size=(7, 4)).astype(np.float32)
    logits = x @ kernel + bias
    expected = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(model(x).numpy(), expected, rtol=1e-5, atol=1e-6)
    narrow = build_model(compose_cfg(["model=mlp"]).model, spec)  # model=mlp keeps the seed MLP: no wide path
    assert "wide" not in [layer.name for layer in narrow.layers]
