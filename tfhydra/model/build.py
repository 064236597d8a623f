"""`build_model`: the registered builder of `model.name` (or the user's `_target_`), checked to return a
model of the run's Keras (tfhydra/platform/keras_lib.py) whose output fits the run's task (tfhydra/model/head.py),
then filled from `model.weights` when that is a file. The builders register themselves in `MODELS` (model/base.py),
which imports their modules on its first lookup."""

from __future__ import annotations

import re

from omegaconf import DictConfig, OmegaConf, open_dict

from tfhydra.config.contracts import PREPARED, DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.model.base import MODELS
from tfhydra.model.freeze import KEY as FREEZE
from tfhydra.model.head import fit_to_task
from tfhydra.model.weights import KEY as WEIGHTS
from tfhydra.model.weights import is_file_setting, load_weights_file
from tfhydra.platform.keras_lib import MODEL_ACCEPTED, keras

__all__ = ["MODELS", "build_model", "model_inputs"]


def build_model(cfg_model, spec: DataSpec, load_weights: bool = True) -> keras.Model:
    """The model of `model.name` (or the user's `_target_`), checked to fit the task's head and ending in a
    regression's standardisation (tfhydra/model/head.py `fit_to_task`), filled from `model.weights` when it is a file.

    `model.freeze` and `model.weights` are tfhydra's keys: a `_target_` builder is handed neither, a built-in
    builder sees `weights` only as null or `imagenet` (keras_app's download); the file is loaded here, into the
    model as built, whatever built it (tfhydra/model/weights.py); `load_weights=False` for a build that only
    measures the model (tfhydra/model/memory.py), which would read the file for nothing. The run applies `freeze`
    after this."""
    model = MODELS.build(builder_node(cfg_model), spec=spec)
    if not isinstance(model, keras.Model):
        raise ConfigError(
            "model",
            cfg_model.get("_target_", cfg_model.get("name")),
            MODEL_ACCEPTED,
            f"the builder returned {type(model).__name__}",
        )
    model = fit_to_task(model, spec, model_option(cfg_model))
    if load_weights and is_file_setting(cfg_model.get(WEIGHTS)):
        load_weights_file(model, str(cfg_model.get(WEIGHTS)))
    return model


def model_option(cfg_model: DictConfig) -> tuple[str, str]:
    """The (key, value) a line about the built model names: `model._target_=pkg.build` or `model=cnn`."""
    if "_target_" in cfg_model:
        return "model._target_", str(cfg_model.get("_target_"))
    return "model", str(cfg_model.get("name"))


def model_in_words(cfg_model: DictConfig, keras_name: str) -> str:
    """`model=cnn`, or `model._target_=mymodels.build_tiny (my_tiny)`: the option the user chose, then the Keras
    model's own name where it says more (never Keras' default `model`, `model_1`, `sequential`, ...)."""
    key, value = model_option(cfg_model)
    default = re.fullmatch(r"(model|sequential|functional)(_\d+)?", keras_name)
    return f"{key}={value}" if default or keras_name == value else f"{key}={value} ({keras_name})"


def builder_node(cfg_model: DictConfig) -> DictConfig:
    """The node the builder is called with: without tfhydra's keys for a `_target_`, and without a weights file."""
    if "_target_" in cfg_model:
        own = [str(k) for k in cfg_model if k not in (FREEZE, WEIGHTS)]
        return OmegaConf.masked_copy(cfg_model, own) if len(own) < len(cfg_model) else cfg_model
    if not is_file_setting(cfg_model.get(WEIGHTS)):
        return cfg_model
    node = cfg_model.copy()
    with open_dict(node):
        node[WEIGHTS] = None  # built from random initialisation, then filled from the file
    return node


def model_inputs(cfg_model: DictConfig) -> str:
    """What the model takes from the data, as its builder declared (`inputs=` at registration): PREPARED (the
    source's token ids, features or images) or RAW_TEXT (strings, for a model with its own tokenizer). A user's
    `_target_` builder takes prepared examples."""
    if "_target_" in cfg_model:
        return PREPARED
    return MODELS.traits(cfg_model.name).get("inputs", PREPARED)
