"""`model=auto`, the default: the model that fits the data, chosen from the data's `DataSpec` as Ludwig chooses an
encoder by feature type. Images (rank-3 floats) get the seed CNN, feature vectors (rank-1 floats: a table) an MLP,
token ids (integers with a vocabulary) a sequence model. Which builder is the pick for which kind of data is what
the builders declare at registration (`default_for=IMAGE_KIND` in `@MODELS.register("cnn", ...)`), so this
module names none.

The node carries the CNN's keys at the top (conf/model/auto.yaml includes conf/model/cnn.yaml), so `model.filters=...`
and the Optuna search over the CNN's keys read as under model=cnn when auto builds the CNN; `model.tabular` holds
the MLP's keys for tables, chosen by measurement (benchmarks/task_baselines.py, docs/tasks.md), and `model.tokens`
the sequence model's (conf/model/transformer.yaml's). A key set away from the value tfhydra ships, for a model auto
did not choose, is one line naming what it chose: it would otherwise be ignored without a word.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from tfhydra.config.contracts import DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.model.base import FEATURE_KIND, IMAGE_KIND, MODELS, TOKEN_KIND, describe_data, is_token_data
from tfhydra.model.schemas import AutoModelConfig
from tfhydra.platform.keras_lib import keras

IMAGES, FEATURES, TOKENS = IMAGE_KIND, FEATURE_KIND, TOKEN_KIND  # the kinds of data auto tells apart (base.py)
KIND_WORDS = {IMAGES: "images", FEATURES: "feature vectors (a table)", TOKENS: "token ids"}
# Where the node keeps each pick's keys: the CNN's at the top, the others under their own key.
SECTIONS = {IMAGES: None, FEATURES: "tabular", TOKENS: "tokens"}
OWN_KEYS = ("name", "weights", "freeze")  # tfhydra's keys of every pick: model.weights, model.freeze
ACCEPTED = "images (float, height x width x channels), feature vectors (float, one axis) or token ids (data=text_csv)"


def data_kind(spec: DataSpec) -> str | None:
    """IMAGES, FEATURES or TOKENS, from the spec alone; None for data auto has no model for."""
    if is_token_data(spec):
        return TOKENS if len(spec.input_shape) == 1 and spec.vocab_size else None
    if len(spec.input_shape) == 3:
        return IMAGES
    return FEATURES if len(spec.input_shape) == 1 else None


def default_model(kind: str | None) -> str | None:
    """The registered model that declared itself the pick for `kind` (`default_for=` at registration)."""
    names = [name for name in MODELS.names() if kind is not None and MODELS.traits(name).get("default_for") == kind]
    return names[0] if len(names) == 1 else None


def picked(spec: DataSpec) -> tuple[str, str]:
    """(the kind of the data, the registered model that is its pick), or a ConfigError naming auto."""
    kind = data_kind(spec)
    name = default_model(kind)
    if kind is None or name is None:
        raise ConfigError(
            "model", "auto", ACCEPTED, f"no model for this data ({describe_data(spec)}): name one, e.g. model=mlp"
        )
    return kind, name


def model_choice(cfg_model: DictConfig, spec: DataSpec) -> dict | None:
    """What model=auto chose for the data, for the record; None for a model the config names."""
    if "_target_" in cfg_model or cfg_model.get("name") != "auto":
        return None
    kind, name = picked(spec)
    choice: dict[str, Any] = {"option": "auto", "chose": name, "data": kind, "because": describe_data(spec)}
    tabular = cfg_model.get("tabular") if name == "mlp" else None
    regression = spec.head is not None and spec.head.activation == "linear"
    if tabular is not None and tabular.get("wide") and tabular.get("linear_start") and regression:
        choice["linear_start"] = True  # the MLP starts as the linear model (linear_start.py)
    return choice


@MODELS.register("auto", schema=AutoModelConfig)
def build_auto(cfg: DictConfig, spec: DataSpec) -> keras.Model:
    """The registered model the data's kind picks, built from its keys in the auto node."""
    kind, name = picked(spec)
    check_unused_keys(cfg, kind, name, spec)
    return MODELS.get(name)(pick_node(cfg, kind, name), spec=spec)


def pick_node(cfg: DictConfig, kind: str, name: str) -> DictConfig:
    """The chosen builder's node: its keys from their section of the auto node, with auto's weights and freeze."""
    section = SECTIONS[kind]
    keys = cfg if section is None else cfg[section]
    values = OmegaConf.to_container(keys)
    assert isinstance(values, dict)
    own = {str(k): v for k, v in values.items() if k not in (*OWN_KEYS, *SECTIONS.values())}
    return OmegaConf.create({**own, "name": name, **{k: cfg.get(k) for k in OWN_KEYS if k != "name"}})


def check_unused_keys(cfg: DictConfig, kind: str, name: str, spec: DataSpec) -> None:
    """A key of a pick auto did not make, set away from the value tfhydra ships: one line naming what auto chose
    (an Optuna search over model.filters on a table would otherwise search nothing)."""
    for other, section in SECTIONS.items():
        if other == kind:
            continue
        given = OmegaConf.to_container(cfg if section is None else cfg[section])
        assert isinstance(given, dict)
        for key, value in shipped_keys(other).items():
            if given.get(key) == value:
                continue
            dotted = f"model.{key}" if section is None else f"model.{section}.{key}"
            own = f"model.{SECTIONS[kind]}.*" if SECTIONS[kind] else "the CNN's keys at the top of model"
            raise ConfigError(
                dotted,
                given.get(key),
                f"the keys of what auto builds for {KIND_WORDS[kind]} ({own}), or the model named: "
                f"model={default_model(other)}",
                f"model=auto chose {name} for this data ({describe_data(spec)}), which does not use {dotted}",
            )


def shipped_keys(kind: str) -> dict[str, Any]:
    """The values tfhydra ships for a pick's keys (the picked option's YAML, e.g. conf/model/cnn.yaml; for tables
    auto.yaml's own `tabular`), read from tfhydra's own conf/ as plain YAML: what a key is compared with to tell
    that it was set. Empty when it cannot be read (nothing is refused then)."""
    from tfhydra.config.project import CONFIG_DIR
    from tfhydra.trust.readers import plain_file

    section = SECTIONS[kind]
    option = "auto" if kind == FEATURES else default_model(kind)
    values = plain_file(CONFIG_DIR / "model" / f"{option}.yaml", CONFIG_DIR) or {}
    values = (values.get(section) or {}) if kind == FEATURES else values
    return {str(k): v for k, v in values.items() if k not in (*OWN_KEYS, "defaults")}
