import pytest
import tf_keras as keras

from tfhydra.data import DataSpec
from tfhydra.errors import ConfigError
from tfhydra.model import build_model

DIGITS = DataSpec((28, 28, 1), 10, tuple("0123456789"), 1437, 360)


def layer_summary(model):
    return [(type(layer).__name__, getattr(layer, "filters", None) or getattr(layer, "units", None)
             or getattr(layer, "rate", None)) for layer in model.layers]


def test_cnn_is_the_seed_cnn(compose_cfg):
    model = build_model(compose_cfg().model, DIGITS)
    assert layer_summary(model) == [("Conv2D", 32), ("MaxPooling2D", None), ("Conv2D", 64), ("MaxPooling2D", None),
                                    ("Flatten", None), ("Dense", 64), ("Dense", 10), ("Activation", None)]
    assert model.input_shape == (None, 28, 28, 1) and model.output_shape == (None, 10)
    assert model.layers[-1].dtype_policy.compute_dtype == "float32"


def test_cnn_sizes_come_from_config_and_data(compose_cfg):
    spec = DataSpec((32, 32, 3), 5, tuple("abcde"), 10, 10)
    model = build_model(compose_cfg(["model.filters=[8,16,16]", "model.dense_units=12"]).model, spec)
    assert [s for s in layer_summary(model) if s[0] in ("Conv2D", "Dense")] == [
        ("Conv2D", 8), ("Conv2D", 16), ("Conv2D", 16), ("Dense", 12), ("Dense", 5)]
    assert model.input_shape == (None, 32, 32, 3)


def test_mlp_is_the_seed_functional_mlp(compose_cfg):
    model = build_model(compose_cfg(["model=mlp"]).model, DIGITS)
    assert isinstance(model, keras.Model) and not isinstance(model, keras.Sequential)
    assert layer_summary(model)[1:] == [("Flatten", None), ("Dense", 64), ("Dropout", 0.5), ("Dense", 32),
                                        ("Dense", 10), ("Activation", None)]


def test_cnn_refuses_images_too_small_for_its_depth(compose_cfg):
    with pytest.raises(ConfigError, match=r"model.filters=\[32, 64, 64\].*at most 1 conv blocks for 8x8"):
        build_model(compose_cfg(["model.filters=[32,64,64]"]).model, DataSpec((8, 8, 1), 10, tuple("0123456789"), 1, 1))


def test_user_model_by_target(compose_cfg):
    cfg = compose_cfg(["~model", "+model._target_=user_code.build_tiny_model", "+model.units=4"])
    model = build_model(cfg.model, DIGITS)
    assert model.name == "tiny4" and model.output_shape == (None, 10)


def test_target_returning_something_else_is_refused(compose_cfg):
    cfg = compose_cfg(["~model", "+model._target_=user_code.not_a_model"])
    with pytest.raises(ConfigError, match="a builder returning a tf_keras.Model"):
        build_model(cfg.model, DIGITS)
