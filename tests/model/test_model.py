import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tfhydra.config.contracts import DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.model.base import MODELS
from tfhydra.model.build import build_model

DIGITS = DataSpec((28, 28, 1), 10, tuple("0123456789"), 1437, 360)


def layer_summary(model):
    return [
        (
            type(layer).__name__,
            getattr(layer, "filters", None) or getattr(layer, "units", None) or getattr(layer, "rate", None),
        )
        for layer in model.layers
    ]


def test_cnn_is_the_seed_cnn(compose_cfg):
    model = build_model(compose_cfg().model, DIGITS)
    assert layer_summary(model) == [
        ("Conv2D", 32),
        ("MaxPooling2D", None),
        ("Conv2D", 64),
        ("MaxPooling2D", None),
        ("Flatten", None),
        ("Dense", 64),
        ("Dense", 10),
        ("Activation", None),
    ]
    assert model.input_shape == (None, 28, 28, 1) and model.output_shape == (None, 10)
    assert model.layers[-1].dtype_policy.compute_dtype == "float32"


def test_cnn_sizes_come_from_config_and_data(compose_cfg):
    spec = DataSpec((32, 32, 3), 5, tuple("abcde"), 10, 10)
    model = build_model(compose_cfg(["model.filters=[8,16,16]", "model.dense_units=12"]).model, spec)
    assert [s for s in layer_summary(model) if s[0] in ("Conv2D", "Dense")] == [
        ("Conv2D", 8),
        ("Conv2D", 16),
        ("Conv2D", 16),
        ("Dense", 12),
        ("Dense", 5),
    ]
    assert model.input_shape == (None, 32, 32, 3)


def test_mlp_is_the_seed_functional_mlp(compose_cfg):
    model = build_model(compose_cfg(["model=mlp"]).model, DIGITS)
    assert isinstance(model, keras.Model) and not isinstance(model, keras.Sequential)
    assert layer_summary(model)[1:] == [
        ("Flatten", None),
        ("Dense", 64),
        ("Dropout", 0.5),
        ("Dense", 32),
        ("Dense", 10),
        ("Activation", None),
    ]


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


# ---- data the new model options are built for (no training here: tests/model/test_model_runs.py trains each option)
CIFAR = DataSpec((32, 32, 3), 10, tuple("0123456789"), 64, 32)
TOKENS = DataSpec((16,), 2, ("neg", "pos"), 64, 32, dtype="int32", vocab_size=50)


def layers_of(model, kind):
    return [layer for layer in model.layers if type(layer).__name__ == kind]


def test_resnet20_is_the_cifar_resnet(compose_cfg):
    """He et al.'s ResNet-20: 19 3x3 convs + the classifier, ~0.27M parameters, widths 16/32/64."""
    model = build_model(compose_cfg(["model=resnet"]).model, CIFAR)
    convs = [c for c in layers_of(model, "Conv2D") if c.kernel_size == (3, 3)]
    assert model.name == "resnet20" and len(convs) == 19
    assert sorted({c.filters for c in convs}) == [16, 32, 64]
    assert len(layers_of(model, "BatchNormalization")) == len(layers_of(model, "Conv2D"))
    assert model.count_params() == 274042  # 0.27M in the paper (which used zero-padding shortcuts)
    assert model.get_layer("pool").input_shape == (None, 8, 8, 64)
    assert model.output_shape == (None, 10) and model.layers[-1].dtype_policy.compute_dtype == "float32"


def test_resnet_blocks_per_stage_sets_stages_and_depth(compose_cfg):
    cfg = compose_cfg(["model=resnet", "model.blocks_per_stage=[2,2,2,2]", "model.depth=null", "model.width=8"])
    model = build_model(cfg.model, CIFAR)
    assert model.name == "resnet18" and model.get_layer("pool").input_shape == (None, 4, 4, 64)
    with pytest.raises(ConfigError) as info:  # the default depth (20) contradicts 4 stages of 2 blocks
        build_model(compose_cfg(["model=resnet", "model.blocks_per_stage=[2,2,2,2]"]).model, CIFAR)
    assert str(info.value) == (
        "model.depth=20: disagrees with model.blocks_per_stage=[2, 2, 2, 2]; "
        "accepted: null or 18 (2 * sum(blocks_per_stage) + 2)"
    )


def test_resnet_refuses_more_downsampling_than_the_images_allow(compose_cfg):
    cfg = compose_cfg(["model=resnet", "model.blocks_per_stage=[1,1,1,1,1]", "model.depth=null"])
    with pytest.raises(ConfigError) as info:
        build_model(cfg.model, DataSpec((8, 8, 1), 10, tuple("0123456789"), 1, 1))
    assert str(info.value) == (
        "model.blocks_per_stage=[1, 1, 1, 1, 1]: resnet with 5 stages halves the images 4 times "
        "and needs at least 16x16; the data's are 8x8; accepted: at most 4 stage(s) for 8x8 images"
    )
    with pytest.raises(ConfigError, match=r"^model.depth=20: resnet with 3 stages .* at least 4x4; the data's are 3x3"):
        build_model(compose_cfg(["model=resnet"]).model, DataSpec((3, 3, 1), 2, ("a", "b"), 1, 1))


def test_keras_app_builds_the_named_architecture_under_our_head(compose_cfg):
    """Gray 32x32 images, 5 classes: MobileNetV2 without its top + a 5-way float32 head."""
    cfg = compose_cfg(["model=keras_app", "model.arch=MobileNetV2", "+model.arch_args.alpha=0.35", "model.dropout=0.2"])
    model = build_model(cfg.model, DataSpec((32, 32, 1), 5, tuple("abcde"), 1, 1))
    assert [type(layer).__name__ for layer in model.layers] == [
        "InputLayer",
        "ArchPreprocessing",
        "Functional",
        "Dropout",
        "Dense",
        "Activation",
    ]
    assert model.input_shape == (None, 32, 32, 1) and model.output_shape == (None, 5)
    assert model.count_params() == 410208 + 1280 * 5 + 5  # the no-top MobileNetV2 (alpha 0.35) + our head
    assert model.layers[-1].dtype_policy.compute_dtype == "float32"
    # MobileNetV2 was trained on pixels in [-1, 1]: [0, 1] gray pixels are repeated to RGB and rescaled
    preprocessed = model.get_layer("preprocess")(tf.constant([[[[0.0]], [[1.0]]]])).numpy()
    np.testing.assert_allclose(preprocessed.reshape(-1), [-1, -1, -1, 1, 1, 1])


def test_keras_app_unknown_arch_lists_the_applications(compose_cfg):
    with pytest.raises(ConfigError) as info:
        build_model(compose_cfg(["model=keras_app", "model.arch=ResNet51"]).model, CIFAR)
    message = str(info.value)
    assert message.startswith("model.arch=ResNet51: not an architecture in tf_keras.applications; accepted: one of ")
    assert all(name in message for name in ("ConvNeXtTiny", "EfficientNetB0", "MobileNetV2", "ResNet50", "Xception"))


# (arch, image size, the library's minimum): each application refuses smaller images
MIN_SIZES = [
    ("MobileNetV2", 28, 32),
    ("EfficientNetB0", 16, 32),
    ("ResNet50", 31, 32),
    ("Xception", 64, 71),
    ("InceptionV3", 64, 75),
]


@pytest.mark.parametrize("arch,size,minimum", MIN_SIZES, ids=[m[0] for m in MIN_SIZES])
def test_keras_app_refuses_images_below_the_architectures_minimum(compose_cfg, arch, size, minimum):
    with pytest.raises(ConfigError) as info:
        build_model(
            compose_cfg(["model=keras_app", f"model.arch={arch}"]).model,
            DataSpec((size, size, 3), 10, tuple("0123456789"), 1, 1),
        )
    assert str(info.value) == (
        f"model.arch={arch}: {arch} needs images of at least {minimum}x{minimum}; the data's are "
        f"{size}x{size}; accepted: data with images of at least {minimum}x{minimum}, "
        "or a smaller-input model"
    )


def test_keras_app_loads_a_local_weights_file_and_refuses_a_wrong_one(compose_cfg, tmp_path):
    """weights=<file>: the no-top weights of the same architecture, e.g. saved from an earlier run's base."""
    base = keras.applications.MobileNetV2(
        include_top=False, weights=None, input_shape=(32, 32, 3), alpha=0.35, pooling="avg"
    )
    base.save_weights(str(tmp_path / "mobilenet_v2_0.35_notop.h5"))
    cfg = compose_cfg(
        ["model=keras_app", f"model.weights={tmp_path / 'mobilenet_v2_0.35_notop.h5'}", "+model.arch_args.alpha=0.35"]
    )
    model = build_model(cfg.model, CIFAR)
    loaded = model.layers[2].get_weights()
    assert all(np.array_equal(a, b) for a, b in zip(loaded, base.get_weights(), strict=True))

    keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]).save_weights(str(tmp_path / "other.h5"))
    cfg = compose_cfg(["model=keras_app", f"model.weights={tmp_path / 'other.h5'}", "+model.arch_args.alpha=0.35"])
    with pytest.raises(
        ConfigError,
        # refused by the HDF5 reader before a byte is read: no weight of the model has the file's shapes
        match=rf"^model.weights={tmp_path / 'other.h5'}: its weights do not fit model MobileNetV2 \(dataset .*: shape "
        r"\(2,\), which no weight of the model has .*; refused before reading it\); accepted: "
        r"null \(random initialisation\), imagenet \(keras_app only",
    ):
        build_model(cfg.model, CIFAR)


def test_keras_app_weights_file_that_does_not_exist_is_refused_before_tensorflow_work(compose_cfg):
    from tfhydra.runner.plan import plan_run

    with pytest.raises(ConfigError) as info:
        plan_run(compose_cfg(["model=keras_app", "model.weights=/no/such/weights.h5"]))
    assert str(info.value).startswith(
        "model.weights=/no/such/weights.h5: no such file; accepted: null (random "
        "initialisation), imagenet (keras_app only: downloads, needs network) or the path of an HDF5 weights file"
    )
    plan_run(compose_cfg(["model=keras_app", "model.weights=imagenet"]))  # allowed: downloads when built


def test_keras_app_refuses_arguments_the_architecture_does_not_take(compose_cfg):
    with pytest.raises(ConfigError) as info:
        build_model(
            compose_cfg(["model=keras_app", "model.arch=MobileNetV2", "+model.arch_args.depth_multiplier=2"]).model,
            CIFAR,
        )
    assert str(info.value) == (
        "model.arch_args.depth_multiplier=2: not a parameter of tf_keras.applications.MobileNetV2; "
        "accepted: one of alpha"
    )


def test_lstm_stacks_bidirectional_recurrent_layers(compose_cfg):
    cfg = compose_cfg(
        ["model=lstm", "model.cell=gru", "model.units=[32,16]", "model.bidirectional=true", "model.dropout=0.1"]
    )
    model = build_model(cfg.model, TOKENS)
    assert [type(layer).__name__ for layer in model.layers] == [
        "InputLayer",
        "Embedding",
        "Bidirectional",
        "Dropout",
        "Bidirectional",
        "Dropout",
        "Dense",
        "Activation",
    ]
    first, second = layers_of(model, "Bidirectional")
    assert isinstance(first.forward_layer, keras.layers.GRU) and first.forward_layer.return_sequences
    assert not second.forward_layer.return_sequences and second.output_shape == (None, 32)
    assert model.input_shape == (None, 16) and model.inputs[0].dtype == tf.int32
    assert model.get_layer("embedding").input_dim == 50 and model.output_shape == (None, 2)


def test_transformer_has_the_configured_blocks_heads_and_width(compose_cfg):
    cfg = compose_cfg(["model=transformer", "model.width=32", "model.heads=4", "model.blocks=3", "model.mlp_dim=48"])
    model = build_model(cfg.model, TOKENS)
    attention = layers_of(model, "MultiHeadAttention")
    assert len(attention) == 3 and {(a.get_config()["num_heads"], a.get_config()["key_dim"]) for a in attention} == {
        (4, 8)
    }
    assert {d.units for d in layers_of(model, "Dense")} == {48, 32, 2}
    assert model.get_layer("embedding").output_dim == 32 and model.output_shape == (None, 2)
    with pytest.raises(
        ConfigError,
        match=r"^model.heads=5: each head gets width / heads dimensions; "
        r"accepted: a divisor of model.width=32$",
    ):
        build_model(compose_cfg(["model=transformer", "model.width=32", "model.heads=5"]).model, TOKENS)


@pytest.mark.parametrize("option", ["lstm", "transformer"])
def test_sequence_models_ignore_padding(compose_cfg, option):
    """With mask_zero, trailing 0s change nothing: the same weights give the same prediction at length 8 and 16."""
    cfg = compose_cfg(
        [f"model={option}", "model.positions=sinusoidal" if option == "transformer" else "model.units=[8]"]
    )
    short = build_model(cfg.model, DataSpec((8,), 2, ("a", "b"), 1, 1, dtype="int32", vocab_size=50))
    long = build_model(cfg.model, TOKENS)
    long.set_weights(short.get_weights())
    tokens = np.array([[5, 9, 17, 3, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6, 7, 8]], dtype=np.int32)
    padded = np.concatenate([tokens, np.zeros((2, 8), np.int32)], axis=1)
    np.testing.assert_allclose(short(tokens).numpy(), long(padded).numpy(), rtol=1e-5, atol=1e-6)


IMAGE_MODELS = ["cnn", "resnet", "keras_app"]


@pytest.mark.parametrize("option", IMAGE_MODELS)
def test_image_models_refuse_token_data(compose_cfg, option):
    with pytest.raises(ConfigError) as info:
        build_model(compose_cfg([f"model={option}"]).model, TOKENS)
    assert str(info.value) == (
        f"model={option}: needs images; the data are int32 token ids of shape (16,) "
        f"(vocab_size 50); accepted: image data: float examples of shape (height, width, channels)"
    )


def test_mlp_refuses_token_data(compose_cfg):
    with pytest.raises(ConfigError, match=r"^model=mlp: needs float inputs; the data are int32 token ids"):
        build_model(compose_cfg(["model=mlp"]).model, TOKENS)


@pytest.mark.parametrize("option", ["lstm", "transformer"])
@pytest.mark.parametrize(
    "spec,described",
    [
        (CIFAR, "the data's examples are float32 of shape (32, 32, 3)"),
        (DataSpec((16,), 2, ("a", "b"), 1, 1, dtype="int32"), "the data's examples are int32 of shape (16,)"),
        (DataSpec((16,), 2, ("a", "b"), 1, 1), "the data's examples are float32 of shape (16,)"),
    ],
    ids=["float-images", "ints-without-vocab_size", "float-vectors"],
)
def test_sequence_models_refuse_data_without_token_ids(compose_cfg, option, spec, described):
    with pytest.raises(ConfigError) as info:
        build_model(compose_cfg([f"model={option}"]).model, spec)
    assert str(info.value) == (
        f"model={option}: needs token ids; {described}; accepted: token data: int ids of shape "
        "(sequence_length,) with a known vocab_size (e.g. data=text_csv)"
    )


SMALL = {
    "auto": [],  # the CNN for CIFAR-shaped images
    "cnn": [],
    "mlp": [],
    "resnet": ["model.depth=8"],
    "keras_app": ["+model.arch_args.alpha=0.35"],
    "lstm": [],
    "transformer": [],
}


def test_every_option_outputs_float32_under_mixed_precision(compose_cfg):
    # a new option must join this test; keras_hub builds Keras 3 models only: tests/model/test_keras_hub.py
    assert sorted([*SMALL, "keras_hub"]) == MODELS.names()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        for option, overrides in SMALL.items():
            spec = TOKENS if option in ("lstm", "transformer") else CIFAR
            model = build_model(compose_cfg([f"model={option}", *overrides]).model, spec)
            example = np.ones((2, *spec.input_shape), dtype=spec.dtype)
            assert model(example).dtype == tf.float32, option
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_keras_app_imagenet_download_failure_is_one_line(compose_cfg, monkeypatch):
    """weights=imagenet downloads (never here: the download is made to fail as it does offline)."""
    from tf_keras.src.utils import data_utils

    def offline(fname, origin, **kwargs):
        raise Exception(f"URL fetch failure on {origin}: None -- [Errno -2] Name or service not known")

    monkeypatch.setattr(data_utils, "get_file", offline)
    with pytest.raises(ConfigError) as info:
        build_model(
            compose_cfg(["model=keras_app", "model.weights=imagenet", "+model.arch_args.alpha=0.35"]).model, CIFAR
        )
    assert str(info.value).startswith(
        "model.weights=imagenet: downloading the ImageNet weights failed (URL fetch "
        "failure on https://storage.googleapis.com/"
    )
    assert str(info.value).endswith("accepted: network access, or the path of the downloaded no-top .h5 file")


def test_target_model_keys_are_the_users_not_our_rules():
    """`model.units` must be a list for mlp/lstm, but a user builder's `units` may be anything it accepts."""
    from conftest import CONFIG_DIR

    from tfhydra.cli.preflight import check_overrides

    check_overrides(CONFIG_DIR, "config", ["~model", "+model._target_=user_code.build_tiny_model", "+model.units=128"])
    with pytest.raises(ConfigError, match=r"^model.units=128: not an accepted value"):
        check_overrides(CONFIG_DIR, "config", ["model=mlp", "model.units=128"])
