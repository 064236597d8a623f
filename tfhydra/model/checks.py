"""What the run plan checks in the model options: the ranges and choices of their keys. No TensorFlow.

Whether the data suit a model is known only once the data are built (tfhydra/model/base.py's `require_*`);
whether a weights file fits the model, once the model is built (tfhydra/model/weights.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from omegaconf import DictConfig

from tfhydra.config.errors import ConfigError
from tfhydra.config.keras_choice import KERAS_MAJORS
from tfhydra.config.paths import special_refusal
from tfhydra.config.schema import Rule, choice, integer, is_int, list_of, number, optional

# tf_keras.applications' architectures (`model=keras_app model.arch=...`), checked before TensorFlow is
# imported; tests/runner/test_plan_group_checks.py holds the list to the installed tf_keras.
KERAS_APPLICATIONS = (
    "ConvNeXtBase",
    "ConvNeXtLarge",
    "ConvNeXtSmall",
    "ConvNeXtTiny",
    "ConvNeXtXLarge",
    "DenseNet121",
    "DenseNet169",
    "DenseNet201",
    "EfficientNetB0",
    "EfficientNetB1",
    "EfficientNetB2",
    "EfficientNetB3",
    "EfficientNetB4",
    "EfficientNetB5",
    "EfficientNetB6",
    "EfficientNetB7",
    "EfficientNetV2B0",
    "EfficientNetV2B1",
    "EfficientNetV2B2",
    "EfficientNetV2B3",
    "EfficientNetV2L",
    "EfficientNetV2M",
    "EfficientNetV2S",
    "InceptionResNetV2",
    "InceptionV3",
    "MobileNet",
    "MobileNetV2",
    "MobileNetV3Large",
    "MobileNetV3Small",
    "NASNetLarge",
    "NASNetMobile",
    "RegNetX002",
    "RegNetX004",
    "RegNetX006",
    "RegNetX008",
    "RegNetX016",
    "RegNetX032",
    "RegNetX040",
    "RegNetX064",
    "RegNetX080",
    "RegNetX120",
    "RegNetX160",
    "RegNetX320",
    "RegNetY002",
    "RegNetY004",
    "RegNetY006",
    "RegNetY008",
    "RegNetY016",
    "RegNetY032",
    "RegNetY040",
    "RegNetY064",
    "RegNetY080",
    "RegNetY120",
    "RegNetY160",
    "RegNetY320",
    "ResNet101",
    "ResNet101V2",
    "ResNet152",
    "ResNet152V2",
    "ResNet50",
    "ResNet50V2",
    "ResNetRS101",
    "ResNetRS152",
    "ResNetRS200",
    "ResNetRS270",
    "ResNetRS350",
    "ResNetRS420",
    "ResNetRS50",
    "VGG16",
    "VGG19",
    "Xception",
)

# tf_keras' activation functions by name (tests/runner/test_plan_group_checks.py holds it to the installed tf_keras).
KERAS_ACTIVATIONS = (
    "elu",
    "exponential",
    "gelu",
    "hard_sigmoid",
    "linear",
    "mish",
    "relu",
    "selu",
    "sigmoid",
    "softmax",
    "softplus",
    "softsign",
    "swish",
    "tanh",
)

# Keys whose valid range is narrower than their type. Keep one line per key.
# The model options' ranges and choices (a rule applies to every option with that key), read by the schema's checks.
RULES: dict[str, Rule] = {
    "keras": choice(*KERAS_MAJORS),  # the Keras the model is built in (tfhydra/platform/keras_env.py)
    "model.filters": list_of(integer(1)),
    "model.units": list_of(integer(1)),
    "model.kernel_size": integer(1),
    "model.pool_size": integer(1),
    "model.dense_units": integer(1),
    "model.dropout": number(0, 1, low_open=False),
    "model.wide": choice(True, False),
    "model.linear_start": choice(True, False),
    "model.deep_l2": number(0, None, low_open=False),
    "model.activation": choice(*KERAS_ACTIVATIONS),
    "model.arch": choice(*KERAS_APPLICATIONS),
    "model.depth": optional(
        Rule(
            "6n+2 with n >= 1 (8, 14, 20, 32, 44, 56, 110, ...)",
            lambda v: is_int(v) and v >= 8 and (v - 2) % 6 == 0,
            numeric=True,
        )
    ),
    "model.blocks_per_stage": optional(list_of(integer(1))),
    "model.width": integer(1),
    "model.pooling": choice("avg", "max"),
    "model.freeze": Rule(
        "none, base (every layer with weights but the output layer) or a list of layer-name patterns",
        lambda v: v in ("none", "base") or list_of(Rule("a pattern", lambda p: isinstance(p, str) and p != "")).ok(v),
    ),
    "model.cell": choice("lstm", "gru"),
    "model.bidirectional": choice(True, False),
    "model.embedding_dim": integer(1),
    "model.mask_zero": choice(True, False),
    "model.heads": integer(1),
    "model.blocks": integer(1),
    "model.mlp_dim": integer(1),
    "model.positions": choice("sinusoidal", "learned"),
    "model.sequence_length": optional(integer(2)),
}
# model=auto's sections (tfhydra/model/auto.py) hold a named model's keys: the same ranges, under their own name.
AUTO_SECTIONS = {
    "tabular": ("units", "dropout", "activation", "wide", "linear_start", "deep_l2"),
    "tokens": ("width", "heads", "blocks", "mlp_dim", "dropout", "positions", "mask_zero", "freeze"),
}
RULES.update(
    {f"model.{section}.{key}": RULES[f"model.{key}"] for section, keys in AUTO_SECTIONS.items() for key in keys}
)


# What model.weights accepts (here, TensorFlow-free, for the pre-flight; tfhydra/model/weights.py says it too).
WEIGHTS_ACCEPTED = (
    "null (random initialisation), imagenet (keras_app only: downloads, needs network) or the path of an HDF5 "
    "weights file (.h5, .weights.h5) saved from this model config (a run's checkpoints/best.weights.h5) or, "
    "for keras_app, from its application without its top"
)
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def check_weights(cfg: DictConfig) -> None:
    """`model.weights`, for every model (a `_target_` one too: the key is tfhydra's, not the builder's): a file that
    is missing or not HDF5 is refused before TensorFlow is imported; whether it fits is known once the model is."""
    value = cfg.model.get("weights")
    if value is None:
        return
    problem = weights_problem(value, cfg.model.get("name"))
    if problem:
        raise ConfigError("model.weights", value, WEIGHTS_ACCEPTED, problem)


def weights_problem(value, model: str | None) -> str | None:
    if value == "imagenet":
        return None if model == "keras_app" else "ImageNet weights are keras_app's (tf_keras.applications)"
    if not isinstance(value, str) or value == "":
        return "not a path"
    path = Path(value).expanduser()
    if special := special_refusal(path):  # before any open: a FIFO would block it, a device never end
        return special
    if not path.is_file():
        if Path(f"{path}.index").is_file():
            return "a TensorFlow checkpoint prefix; save the model's weights to a .weights.h5 file instead"
        return "no such file"
    if not is_hdf5(path):
        return "not an HDF5 weights file"
    from tfhydra.trust.hdf5 import UnsafeWeights, checked_weights  # h5py: only when a file is named

    try:  # what needs no model (bytes stored elsewhere, links, filters, types): before TensorFlow is imported
        checked_weights(path, None)
    except UnsafeWeights as unsafe:
        return unsafe.problem
    except OSError as error:
        return f"not an HDF5 weights file ({error})"
    return None


def is_hdf5(path: Path) -> bool:
    """HDF5's signature at offset 0 or after a user block (512, 1024, 2048 ... bytes), as h5py looks for it."""
    try:
        with path.open("rb") as file:
            offset = 0
            while True:
                file.seek(offset)
                head = file.read(8)
                if head == HDF5_SIGNATURE:
                    return True
                if len(head) < 8:
                    return False
                offset = 512 if offset == 0 else offset * 2
    except OSError:
        return False


# model=keras_hub (tfhydra/model/hub.py): a local preset directory, keras-hub's own layout (`save_to_preset`, a
# kagglehub download): the backbone's config.json and the metadata.json keras-hub writes beside it.
PRESET_FILES = ("config.json", "metadata.json")
PRESET_ACCEPTED = (
    "a local keras-hub preset directory (config.json, metadata.json, model.weights.h5 ...): saved once with "
    "network access by keras_hub.models.TextClassifier.from_preset(name, num_classes=2).save_to_preset(dir), or "
    "a kagglehub.model_download (docs/models.md)"
)
HUB_INSTALL = 'keras-hub and tensorflow-text installed: pip install "tfhydra[hub]"'


def check_keras_hub(cfg: DictConfig) -> None:
    """model=keras_hub: Keras 3, keras-hub installed and a preset directory, all before TensorFlow is imported."""
    if cfg.model.get("name") != "keras_hub" or "_target_" in cfg.model:
        return
    if cfg.keras != 3:
        raise ConfigError(
            "model",
            "keras_hub",
            "keras=3 with model=keras_hub",
            f"keras-hub's models are Keras 3 models, and the run is keras={cfg.keras} (tf_keras)",
        )
    if importlib.util.find_spec("keras_hub") is None:
        raise ConfigError("model", "keras_hub", HUB_INSTALL, "keras-hub is not installed")
    problem = preset_problem(cfg.model.preset)
    if problem:
        raise ConfigError("model.preset", cfg.model.preset, PRESET_ACCEPTED, problem)
    from tfhydra.model.preset_files import check_preset_weights  # its weights files and the sizes config.json asks

    check_preset_weights(Path(str(cfg.model.preset)).expanduser(), PRESET_ACCEPTED)


def preset_problem(value) -> str | None:
    """Why `value` is not a preset directory keras-hub can read offline, or None."""
    if value is None:
        return "model=keras_hub needs one (model.preset=/path/to/preset)"
    if not isinstance(value, str) or value == "":
        return "not a path"
    path = Path(value).expanduser()
    if special := special_refusal(path):
        return special
    if not path.is_dir():
        return "no such directory" if not path.exists() else "a file, not a directory"
    missing = [name for name in PRESET_FILES if not (path / name).is_file()]
    if missing:
        return f"not a keras-hub preset: it has no {' and no '.join(missing)}"
    return preset_files_problem(path)


def preset_files_problem(path: Path) -> str | None:
    """A preset's config.json and metadata.json that keras-hub could not parse, said before TensorFlow: each must be
    a JSON object (read bounded: a preset is a file from anywhere), config.json naming the backbone's class and its
    arguments, as keras-hub's `save_to_preset` writes them."""
    from tfhydra.config.bounded import TooLarge, load_json_bounded, read_text_bounded

    read = {}
    for name in PRESET_FILES:
        try:
            read[name] = load_json_bounded(read_text_bounded(path / name))
        except (OSError, UnicodeDecodeError, ValueError, TooLarge) as error:
            return f"its {name} cannot be parsed ({' '.join(str(error).split())[:200]})"
        if not isinstance(read[name], dict):
            return f"its {name} is not a JSON object ({type(read[name]).__name__})"
    config = read["config.json"]
    if not isinstance(config.get("class_name"), str) or not isinstance(config.get("config"), dict):
        return "its config.json names no backbone (a class_name and its config, as keras-hub's save_to_preset writes)"
    return None


CHECKS = (check_weights, check_keras_hub)
