"""Checks on a composed config, run before TensorFlow is imported.

Two layers:
- `RULES`: range and choice checks for keys whose valid values are narrower than
  their type. A rule applies wherever its key exists, so `model.dropout` covers every
  model option that has a `dropout` key, except inside a node with `_target_`, whose
  keys are the user's callable's arguments.
- `check_types`: every other leaf must keep the type of its default in `conf/`
  (`optimizer.lr=abc` is refused because the default `lr` is a float).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from omegaconf import DictConfig, ListConfig, OmegaConf

from tfhydra.errors import ConfigError


@dataclass(frozen=True)
class Rule:
    accepted: str
    ok: Callable[[Any], bool]
    numeric: bool = False  # a numeric rule calls a bad number "out of range", anything else "not a number"
    refusal: str = ""  # what to call a refused value when neither of those says it (e.g. "no such file")
    integral: bool = False  # 1.5 for an integer key is "not an integer", not "out of range"
    options: tuple = ()  # a choice's values: a misspelt name gets the nearest ones, a long list is shortened

    def problem(self, value: Any) -> str:
        if value is None:  # a `null  # required` default left unset: "no such file" would mislead
            return "not set (it is required)"
        if self.refusal:
            return self.refusal
        if not self.numeric:
            return "not an accepted value"
        if self.integral and _is_number(value) and not _is_int(value):
            return "not an integer"
        return "out of range" if _is_number(value) else "not a number"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (_is_int(v) or isinstance(v, float)) and not (isinstance(v, float) and math.isnan(v))


def integer(low: int, high: int | None = None) -> Rule:
    text = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
    return Rule(text, lambda v: _is_int(v) and v >= low and (high is None or v <= high), numeric=True, integral=True)


def number(low: float, high: float | None = None, low_open: bool = True, high_open: bool = True) -> Rule:
    left, right = "(" if low_open else "[", ")" if high_open else "]"
    text = f"a number > {low}" if high is None and low_open else (
        f"a number >= {low}" if high is None else f"a number in {left}{low}, {high}{right}")

    def ok(v: Any) -> bool:
        if not _is_number(v) or math.isinf(v):
            return False
        above = v > low if low_open else v >= low
        below = high is None or (v < high if high_open else v <= high)
        return above and below

    return Rule(text, ok, numeric=True)


def choice(*options: Any) -> Rule:
    from tfhydra.errors import _show

    return Rule("one of " + ", ".join(map(_show, options)),
                lambda v: v in options and type(v) in {type(o) for o in options}, options=options)


def _is_target(v: Any) -> bool:
    return isinstance(v, (dict, DictConfig)) and "_target_" in v


def _is_weights(v: Any) -> bool:
    """Checked here, before TensorFlow is imported, so a mistyped path costs no model build."""
    return v is None or v == "imagenet" or (isinstance(v, str) and Path(v).expanduser().is_file())


def optional(rule: Rule) -> Rule:
    return Rule(f"null or {rule.accepted}", lambda v: v is None or rule.ok(v), rule.numeric, integral=rule.integral)


def list_of(rule: Rule, min_len: int = 1) -> Rule:
    return Rule(f"a list of at least {min_len} items, each {rule.accepted}",
                lambda v: isinstance(v, (list, ListConfig)) and len(v) >= min_len and all(rule.ok(x) for x in v))


def _exists(v: Any) -> bool:
    """A data file is looked for here, before TensorFlow is imported, so a typo costs no start-up."""
    return isinstance(v, str) and v != "" and Path(v).expanduser().exists()


def _is_globs(v: Any) -> bool:
    return (isinstance(v, str) and v != "") or (isinstance(v, (list, ListConfig)) and len(v) > 0
                                                and all(isinstance(p, str) and p for p in v))


def _is_image_size(v: Any) -> bool:
    return (_is_int(v) and v >= 1) or (isinstance(v, (list, ListConfig)) and len(v) == 2
                                       and all(_is_int(d) and d >= 1 for d in v))


def _is_augment_list(v: Any) -> bool:
    return isinstance(v, (list, ListConfig)) and all(
        isinstance(item, str) or (isinstance(item, (dict, DictConfig)) and isinstance(item.get("name"), str))
        for item in v)


def _is_run_dir(v: Any) -> bool:
    """Looked for before TensorFlow is imported; tfhydra.compression checks what the directory holds."""
    return v is None or (isinstance(v, str) and v != "" and Path(v).expanduser().is_dir())


def _is_block(v: Any) -> bool:
    return isinstance(v, (list, ListConfig)) and len(v) == 2 and all(_is_int(d) and d >= 1 for d in v)


# tf_keras.applications' architectures (`model=keras_app model.arch=...`), checked before TensorFlow is
# imported; tests/test_group_checks.py holds the list to the installed tf_keras.
KERAS_APPLICATIONS = (
    "ConvNeXtBase", "ConvNeXtLarge", "ConvNeXtSmall", "ConvNeXtTiny", "ConvNeXtXLarge", "DenseNet121", "DenseNet169",
    "DenseNet201", "EfficientNetB0", "EfficientNetB1", "EfficientNetB2", "EfficientNetB3", "EfficientNetB4",
    "EfficientNetB5", "EfficientNetB6", "EfficientNetB7", "EfficientNetV2B0", "EfficientNetV2B1", "EfficientNetV2B2",
    "EfficientNetV2B3", "EfficientNetV2L", "EfficientNetV2M", "EfficientNetV2S", "InceptionResNetV2", "InceptionV3",
    "MobileNet", "MobileNetV2", "MobileNetV3Large", "MobileNetV3Small", "NASNetLarge", "NASNetMobile", "RegNetX002",
    "RegNetX004", "RegNetX006", "RegNetX008", "RegNetX016", "RegNetX032", "RegNetX040", "RegNetX064", "RegNetX080",
    "RegNetX120", "RegNetX160", "RegNetX320", "RegNetY002", "RegNetY004", "RegNetY006", "RegNetY008", "RegNetY016",
    "RegNetY032", "RegNetY040", "RegNetY064", "RegNetY080", "RegNetY120", "RegNetY160", "RegNetY320", "ResNet101",
    "ResNet101V2", "ResNet152", "ResNet152V2", "ResNet50", "ResNet50V2", "ResNetRS101", "ResNetRS152", "ResNetRS200",
    "ResNetRS270", "ResNetRS350", "ResNetRS420", "ResNetRS50", "VGG16", "VGG19", "Xception")

# tf_keras' activation functions by name (tests/test_group_checks.py holds it to the installed tf_keras).
KERAS_ACTIVATIONS = ("elu", "exponential", "gelu", "hard_sigmoid", "linear", "mish", "relu", "selu", "sigmoid",
                     "softmax", "softplus", "softsign", "swish", "tanh")

# Keys whose valid range is narrower than their type. Keep one line per key.
RULES: dict[str, Rule] = {
    "trainer.epochs": integer(1),
    "trainer.seed": integer(0),
    "trainer.steps_per_execution": integer(1),
    "trainer.verbose": integer(0, 2),
    "trainer.loop": choice("fit", "custom"),
    "trainer.jit_compile": choice("auto", True, False),
    "trainer.clip_norm": optional(number(0)),
    "trainer.clip_value": optional(number(0)),
    "trainer.clip_global_norm": optional(number(0)),
    "trainer.save_every": Rule("'epoch' or an integer >= 1 (steps)", lambda v: v == "epoch" or (_is_int(v) and v >= 1)),
    "trainer.resume": choice(True, False),
    "trainer.deterministic": choice(True, False),
    "trainer.early_stopping.patience": integer(0),
    "trainer.early_stopping.mode": choice("min", "max"),
    "trainer.early_stopping.min_delta": number(0, low_open=False),
    "optimizer.schedule.name": choice("constant", "cosine", "exponential", "piecewise", "reduce_on_plateau"),
    "optimizer.schedule.warmup_epochs": number(0, low_open=False),
    "optimizer.schedule.min_lr": number(0, low_open=False),
    "optimizer.schedule.decay_rate": number(0, 1, high_open=False),
    "optimizer.schedule.decay_epochs": number(0),
    "optimizer.schedule.boundaries_epochs": list_of(number(0), min_len=0),
    "optimizer.schedule.multipliers": list_of(number(0)),
    "optimizer.schedule.factor": number(0, 1),
    "optimizer.schedule.patience": integer(0),
    "trainer.monitor_mode": choice("min", "max"),
    "strategy.cross_device_ops": choice("auto", "nccl", "hierarchical_copy", "reduce_to_one"),
    "strategy.communication": choice("auto", "ring", "nccl"),
    "strategy.auto_shard": choice("auto", "data", "file", "off"),
    "strategy.cluster_resolver": choice("tf_config", "slurm", "kubernetes"),
    "strategy.port": integer(1, 65535),
    "strategy.gpus_per_task": optional(integer(1)),
    "strategy.worker_label": Rule("a Kubernetes label selector such as job-name=tfhydra-worker",
                                  lambda v: isinstance(v, str) and "=" in v),
    "strategy.logical_cpus": integer(0),
    "strategy.devices": optional(list_of(Rule("a device name such as /gpu:0", lambda v: isinstance(v, str)))),
    "strategy.device": optional(Rule("a device name such as /gpu:0", lambda v: isinstance(v, str))),
    "trainer.threads": integer(0),
    "trainer.max_loss": Rule("auto, null or a number > 0", lambda v: v in ("auto", None) or number(0).ok(v)),
    "trainer.steps_per_epoch": optional(integer(1)),
    "trainer.validation_steps": optional(integer(1)),
    "logging.histogram_freq": integer(0),
    "logging.profile_batch": Rule("0 (off), a batch number >= 1, or [start, stop] with 1 <= start <= stop",
                                  lambda v: (_is_int(v) and v >= 0) or (isinstance(v, (list, ListConfig)) and len(v) == 2
                                            and all(_is_int(b) and b >= 1 for b in v) and v[0] <= v[1])),
    "logging.update_freq": Rule("'epoch', 'batch' or an integer >= 1",
                                lambda v: v in ("epoch", "batch") or (_is_int(v) and v >= 1)),
    "data.batch_size": integer(1),
    "data.val_fraction": number(0, 1),
    "data.fraction": number(0, 1, high_open=False),
    "data.shuffle_buffer": integer(0),
    "data.cache": Rule("memory, false, or a path prefix for cache files",
                       lambda v: v is False or (isinstance(v, str) and v != "")),
    "data.prefetch": Rule("auto or an integer >= 0 (batches; 0 = off)", lambda v: v == "auto" or (_is_int(v) and v >= 0)),
    "data.augment": Rule("a list of layer names or {name: <layer>, <argument>: <value>} mappings", _is_augment_list),
    "data.image_size": optional(Rule("an integer >= 1 or [height, width]", _is_image_size)),
    "data.num_classes": optional(integer(2)),
    "data.class_names": optional(list_of(Rule("a name", lambda v: isinstance(v, str) or _is_int(v)), min_len=2)),
    "data.train_size": integer(1),
    "data.val_size": integer(1),
    "data.shape": list_of(integer(1)),
    "data.path": Rule("the path of an existing file or directory (relative to the working directory)", _exists,
                      refusal="no such file or directory"),
    "data.train": Rule("a glob pattern of TFRecord files, or a list of them", _is_globs),
    "data.validation": optional(Rule("a glob pattern of TFRecord files, or a list of them", _is_globs)),
    "data.encoding": choice("png", "jpeg", "raw"),
    "data.channels": choice(0, 1, 3, 4),
    "data.raw_shape": optional(list_of(integer(1))),
    "data.raw_dtype": choice("uint8", "uint16", "int8", "int16", "int32", "int64", "float16", "float32", "float64"),
    "data.color_mode": choice("grayscale", "rgb", "rgba"),
    "data.features": optional(list_of(Rule("a column name", lambda v: isinstance(v, str)))),
    "data.delimiter": Rule("a single character", lambda v: isinstance(v, str) and len(v) == 1),
    "data.sequence_length": integer(1),
    "data.vocab_size": integer(3),
    "data.label_mode": choice("fine", "coarse"),
    "optimizer.lr": number(0),
    "optimizer.momentum": number(0, 1, low_open=False),
    "optimizer.beta_1": number(0, 1, low_open=False),
    "optimizer.beta_2": number(0, 1, low_open=False),
    "optimizer.epsilon": number(0),
    "model.filters": list_of(integer(1)),
    "model.units": list_of(integer(1)),
    "model.kernel_size": integer(1),
    "model.pool_size": integer(1),
    "model.dense_units": integer(1),
    "model.dropout": number(0, 1, low_open=False),
    "model.activation": choice(*KERAS_ACTIVATIONS),
    "model.arch": choice(*KERAS_APPLICATIONS),
    "model.depth": optional(Rule("6n+2 with n >= 1 (8, 14, 20, 32, 44, 56, 110, ...)",
                                 lambda v: _is_int(v) and v >= 8 and (v - 2) % 6 == 0, numeric=True)),
    "model.blocks_per_stage": optional(list_of(integer(1))),
    "model.width": integer(1),
    "model.weights": Rule("null (random initialisation), imagenet (downloads; needs network) or the path of an "
                          "existing weights file", _is_weights, refusal="no such file"),
    "model.pooling": choice("avg", "max"),
    "model.cell": choice("lstm", "gru"),
    "model.bidirectional": choice(True, False),
    "model.embedding_dim": integer(1),
    "model.mask_zero": choice(True, False),
    "model.heads": integer(1),
    "model.blocks": integer(1),
    "model.mlp_dim": integer(1),
    "model.positions": choice("sinusoidal", "learned"),
    "trainer.loss": Rule("a Keras loss name, or a node with _target_", lambda v: isinstance(v, str) or _is_target(v)),
    "trainer.metrics": Rule("a list of Keras metric names or nodes with _target_", lambda v: isinstance(
        v, (list, ListConfig)) and all(isinstance(m, str) or _is_target(m) for m in v)),
    "compression.start_epoch": integer(0),
    "compression.from_run": Rule("null or the directory of a completed run", _is_run_dir, refusal="no such directory"),
    "compression.schedule": choice("polynomial", "constant"),
    "compression.target_sparsity": number(0, 1, low_open=False),
    "compression.initial_sparsity": number(0, 1, low_open=False),
    "compression.begin_step": optional(integer(0)),
    "compression.end_step": optional(integer(1)),
    "compression.begin_epoch": optional(number(0, low_open=False)),
    "compression.end_epoch": optional(number(0)),
    "compression.frequency": integer(1),
    "compression.block_size": optional(Rule("[rows, cols], integers >= 1", _is_block)),
    "compression.number_of_clusters": integer(2),
    "compression.centroids_init": choice("kmeans_plus_plus", "linear", "density_based", "random"),
    "compression.quantize_epochs": integer(1),
    "logger.mlflow.experiment_name": Rule("a non-empty name", lambda v: isinstance(v, str) and v.strip() != ""),
    "logger.wandb.mode": Rule("null ($WANDB_MODE, else offline), offline, online or disabled",
                              lambda v: v in (None, "offline", "online", "disabled")),
    "export.formats": list_of(choice("saved_model", "keras", "tflite", "onnx"), min_len=0),
    "export.tflite.quantization": choice("none", "dynamic", "float16", "int8"),
    "export.tflite.calibration_samples": integer(0),
    "export.tflite.integer_io": choice(True, False),
}


def check_rules(cfg: DictConfig) -> None:
    for key, rule in RULES.items():
        value = OmegaConf.select(cfg, key, default=_ABSENT)
        if value is _ABSENT or _in_target_node(cfg, key):
            continue
        if not rule.ok(value):
            accepted, problem = rule.accepted, rule.problem(value)
            if rule.options and isinstance(value, str):
                from tfhydra.errors import short_list, suggestion

                accepted = short_list(value, rule.options, f"all of them: {key} in tfhydra/schema.py")
                problem += suggestion(value, rule.options)
            raise ConfigError(key, _plain(value), accepted, problem)


def _in_target_node(cfg: DictConfig, key: str) -> bool:
    """Keys inside a `_target_` node are the user's callable's arguments (`+model.units=128`), not our builders'."""
    parts = key.split(".")
    for end in range(1, len(parts)):
        node = OmegaConf.select(cfg, ".".join(parts[:end]), default=None)
        if isinstance(node, DictConfig) and "_target_" in node:
            return True
    return False


def check_types(cfg: DictConfig, defaults: DictConfig, prefix: str = "") -> None:
    """Refuse a leaf whose type differs from its default's (keys with a rule are checked there)."""
    for key in defaults:
        path = f"{prefix}{key}"
        if path == "hydra" or key == "_target_" or "_target_" in cfg:  # a _target_ node's keys are its callable's
            continue
        if key not in cfg:
            raise ConfigError(f"~{path}", None, f"{path} set to a value (tfhydra reads it; override it instead of "
                              "deleting it)", "a key tfhydra needs was deleted")
        if path in RULES:
            continue
        expected, given = defaults._get_node(key), cfg._get_node(key)
        if isinstance(expected, DictConfig):
            if isinstance(given, DictConfig):
                check_types(given, expected, path + ".")
                continue
            raise ConfigError(path, _plain(cfg[key]), "a mapping of keys (use dotted keys to set one)", "wrong type")
        default = OmegaConf.to_container(expected) if isinstance(expected, ListConfig) else expected._value()
        value = OmegaConf.to_container(given) if isinstance(given, (ListConfig, DictConfig)) else given._value()
        if default is None or value is None or _same_kind(default, value):
            continue
        raise ConfigError(path, _plain(value), f"{_kind(default)} (default {_plain(default)})", "wrong type")


def _same_kind(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return _is_number(value)
    if isinstance(default, list):
        return isinstance(value, list) and all(_same_kind(default[0], v) for v in value) if default else isinstance(value, list)
    return type(default) is type(value)


def _kind(default: Any) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, list) and default:
        return f"a list of {_kind(default[0]).replace('a ', '', 1)}s"
    return {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a mapping"}.get(type(default), type(default).__name__)


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value) if isinstance(value, (DictConfig, ListConfig)) else value


_ABSENT = object()


def config_differences(a, b, prefix: str = "") -> list[str]:
    """Dotted keys whose (resolved) values differ between two configs: what a resumed run or
    `compression.from_run` must not change."""
    if isinstance(a, DictConfig) and isinstance(b, DictConfig):
        keys = sorted(set(a) | set(b), key=str)
        return [d for k in keys for d in config_differences(a.get(k), b.get(k), f"{prefix}{k}.")]
    plain = [OmegaConf.to_container(v, resolve=True) if isinstance(v, (DictConfig, ListConfig)) else v for v in (a, b)]
    return [] if plain[0] == plain[1] else [prefix.rstrip(".")]


def check_interpolations(node: Any, path: str = "") -> None:
    """Every `${...}` resolves: OmegaConf would raise deep inside the job, with a traceback, at first use."""
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(node, (DictConfig, ListConfig)):
        keys = list(node.keys()) if isinstance(node, DictConfig) else range(len(node))
        for key in keys:
            if path == "" and key == "hydra":
                continue
            child = f"{path}.{key}" if path and isinstance(node, DictConfig) else (
                f"{path}[{key}]" if isinstance(node, ListConfig) else str(key))
            try:
                value = node._get_node(key)
                if value._is_interpolation():
                    value._dereference_node()
            except OmegaConfBaseException as error:
                raw = node._get_node(key)._value() if node._get_node(key) is not None else None
                reason = " ".join(str(error).split("\n")[0].split())
                raise ConfigError(child, raw, "a value, or an interpolation such as ${trainer.monitor} that names an "
                                  "existing key (or a set environment variable for ${oc.env:...})",
                                  f"cannot resolve it ({reason})") from None
            check_interpolations(value, child)


# The sections every run reads: a group may be replaced (`~model +model._target_=...`) but not left out.
SECTIONS = ("model", "data", "optimizer", "precision", "strategy", "compression", "trainer", "logging", "export")


def check_sections(cfg: DictConfig) -> None:
    """Every section a run reads is there, and every group section names what builds it (`name` or `_target_`):
    `~data` deletes the group's option but leaves the keys conf/tfhydra.yaml shares (data.batch_size, ...), a
    mapping no builder can take."""
    for section in SECTIONS:
        node, group = cfg.get(section), section in SECTIONS[:6]
        article = "an" if section[0] in "aeiou" else "a"
        accepted = (f"{article} {section} option (conf/{section}/), or +{section}._target_=<your builder>"
                    if group else f"the {section} section of conf/tfhydra.yaml")
        if not isinstance(node, DictConfig):
            raise ConfigError(section, None, accepted, "missing: deleted with ~, or set to a value that is not a "
                              "mapping")
        if group and "name" not in node and "_target_" not in node:
            raise ConfigError(section, None, accepted, f"no {section} option: deleted with ~{section} (only the keys "
                              f"every {section} option shares are left)")


def validate(cfg: DictConfig, defaults: DictConfig | None = None) -> None:
    """All checks that need no TensorFlow; raises ConfigError on the first mistake."""
    from tfhydra.registry import check_target_imports

    check_sections(cfg)
    check_interpolations(cfg)
    if defaults is not None:
        check_types(cfg, defaults)
    check_rules(cfg)
    for path, node in nodes_with_target(cfg):
        check_target_imports(node, path)


def nodes_with_target(node: Any, path: str = ""):
    """(dotted path, node) of every node with a `_target_` (the hydra section left out)."""
    if isinstance(node, DictConfig):
        if "_target_" in node:
            yield path, node
        for key in node:
            if path == "" and key == "hydra":
                continue
            yield from nodes_with_target(node._get_node(key), f"{path}.{key}" if path else str(key))
    elif isinstance(node, ListConfig):
        for i, item in enumerate(node._iter_ex(resolve=False)):
            yield from nodes_with_target(node._get_node(i), f"{path}[{i}]")
