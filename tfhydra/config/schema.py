"""Checks on a composed config, run before TensorFlow is imported.

Two layers:
- rules (`Rule`, built with `integer`, `number`, `choice`, ...): range and choice checks for keys whose
  valid values are narrower than their type. Each room declares the rules of its keys, with its option
  names, in its TensorFlow-free checks module (`RULES` in tfhydra/<room>/checks.py); tfhydra/runner/plan.py gathers
  them. A rule applies wherever its key exists, so `model.dropout` covers every model option that has a
  `dropout` key, except inside a node with `_target_`, whose keys are the user's callable's arguments.
- `check_types`: every other leaf must keep the type of its default in `conf/`
  (`optimizer.lr=abc` is refused because the default `lr` is a float).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from omegaconf import DictConfig, ListConfig, OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.platform.private_api import config_node, list_nodes, node_value, resolve_node


@dataclass(frozen=True)
class Rule:
    accepted: str
    ok: Callable[[Any], bool]
    numeric: bool = False  # a numeric rule calls a bad number "out of range", anything else "not a number"
    refusal: str = ""  # what to call a refused value when neither of those says it (e.g. "no such file")
    integral: bool = False  # 1.5 for an integer key is "not an integer", not "out of range"
    options: tuple = ()  # a choice's values: a misspelt name gets the nearest ones, a long list is shortened
    source: str = ""  # the module that declares it (set by tfhydra/runner/plan.py), where a shortened list is in full

    def problem(self, value: Any) -> str:
        if value is None:  # a `null  # required` default left unset: "no such file" would mislead
            return "not set (it is required)"
        if self.refusal:
            return self.refusal
        if not self.numeric:
            return "not an accepted value"
        if self.integral and is_number(value) and not is_int(value):
            return "not an integer"
        return "out of range" if is_number(value) else "not a number"


def is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> TypeGuard[int | float]:
    return (is_int(v) or isinstance(v, float)) and not (isinstance(v, float) and math.isnan(v))


def integer(low: int, high: int | None = None) -> Rule:
    text = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
    return Rule(text, lambda v: is_int(v) and v >= low and (high is None or v <= high), numeric=True, integral=True)


def number(low: float, high: float | None = None, low_open: bool = True, high_open: bool = True) -> Rule:
    left, right = "(" if low_open else "[", ")" if high_open else "]"
    text = (
        f"a number > {low}"
        if high is None and low_open
        else (f"a number >= {low}" if high is None else f"a number in {left}{low}, {high}{right}")
    )

    def ok(v: Any) -> bool:
        if not is_number(v) or math.isinf(v):
            return False
        above = v > low if low_open else v >= low
        below = high is None or (v < high if high_open else v <= high)
        return above and below

    return Rule(text, ok, numeric=True)


def choice(*options: Any) -> Rule:
    from tfhydra.config.errors import _show

    return Rule(
        "one of " + ", ".join(map(_show, options)),
        lambda v: v in options and type(v) in {type(o) for o in options},
        options=options,
    )


def is_target(v: Any) -> bool:
    return isinstance(v, dict) and "_target_" in v or has_target(v)


def has_target(node: Any) -> bool:
    """A DictConfig with a `_target_` key, looked up in its keys: `"_target_" in node` on a struct config raises and
    formats an error inside OmegaConf for every node without one (measured: a tenth of the pre-flight's time)."""
    return isinstance(node, DictConfig) and "_target_" in node.keys()


def optional(rule: Rule) -> Rule:
    return Rule(f"null or {rule.accepted}", lambda v: v is None or rule.ok(v), rule.numeric, integral=rule.integral)


def list_of(rule: Rule, min_len: int = 1) -> Rule:
    return Rule(
        f"a list of at least {min_len} items, each {rule.accepted}",
        lambda v: isinstance(v, (list, ListConfig)) and len(v) >= min_len and all(rule.ok(x) for x in v),
    )


def exists(v: Any) -> bool:
    """A data file is looked for here, before TensorFlow is imported, so a typo costs no start-up."""
    return isinstance(v, str) and v != "" and Path(v).expanduser().exists()


def is_globs(v: Any) -> bool:
    return (isinstance(v, str) and v != "") or (
        isinstance(v, (list, ListConfig)) and len(v) > 0 and all(isinstance(p, str) and p for p in v)
    )


def is_image_size(v: Any) -> bool:
    return (is_int(v) and v >= 1) or (
        isinstance(v, (list, ListConfig)) and len(v) == 2 and all(is_int(d) and d >= 1 for d in v)
    )


def is_augment_list(v: Any) -> bool:
    return isinstance(v, (list, ListConfig)) and all(
        isinstance(item, str) or (isinstance(item, (dict, DictConfig)) and isinstance(item.get("name"), str))
        for item in v
    )


def is_run_dir(v: Any) -> bool:
    """Looked for before TensorFlow is imported; tfhydra.compression checks what the directory holds."""
    return v is None or (isinstance(v, str) and v != "" and Path(v).expanduser().is_dir())


def is_block(v: Any) -> bool:
    return isinstance(v, (list, ListConfig)) and len(v) == 2 and all(is_int(d) and d >= 1 for d in v)


def check_rules(cfg: DictConfig, rules: dict[str, Rule]) -> None:
    for key, rule in rules.items():
        value = OmegaConf.select(cfg, key, default=_ABSENT)
        if value is _ABSENT or _in_target_node(cfg, key):
            continue
        if not rule.ok(value):
            accepted, problem = rule.accepted, rule.problem(value)
            if rule.options and isinstance(value, str):
                from tfhydra.config.errors import short_list, suggestion

                accepted = short_list(value, rule.options, f"all of them: {key} in {rule.source or 'its room'}")
                problem += suggestion(value, rule.options)
            raise ConfigError(key, _plain(value), accepted, problem)


def _in_target_node(cfg: DictConfig, key: str) -> bool:
    """Keys inside a `_target_` node are the user's callable's arguments (`+model.units=128`), not our builders'."""
    parts = key.split(".")
    for end in range(1, len(parts)):
        node = OmegaConf.select(cfg, ".".join(parts[:end]), default=None)
        if has_target(node):
            return True
    return False


def check_types(cfg: DictConfig, defaults: DictConfig, rules: dict[str, Rule], prefix: str = "") -> None:
    """Refuse a leaf whose type differs from its default's (keys with a rule are checked there)."""
    if has_target(cfg):  # a _target_ node's keys are its callable's
        return
    for key in defaults:
        path = f"{prefix}{key!s}"
        if path == "hydra" or key == "_target_":
            continue
        if key not in cfg:
            raise ConfigError(
                f"~{path}",
                None,
                f"{path} set to a value (tfhydra reads it; override it instead of deleting it)",
                "a key tfhydra needs was deleted",
            )
        if path in rules:
            continue
        expected, given = config_node(defaults, key), config_node(cfg, key)
        if isinstance(expected, DictConfig):
            if isinstance(given, DictConfig):
                check_types(given, expected, rules, path + ".")
                continue
            raise ConfigError(path, _plain(cfg[key]), "a mapping of keys (use dotted keys to set one)", "wrong type")
        default = OmegaConf.to_container(expected) if isinstance(expected, ListConfig) else node_value(expected)
        value = OmegaConf.to_container(given) if isinstance(given, (ListConfig, DictConfig)) else node_value(given)
        if default is None or value is None or _same_kind(default, value):
            continue
        raise ConfigError(path, _plain(value), f"{_kind(default)} (default {_plain(default)})", "wrong type")


def _same_kind(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return is_number(value)
    if isinstance(default, list):
        return (
            isinstance(value, list) and all(_same_kind(default[0], v) for v in value)
            if default
            else isinstance(value, list)
        )
    return type(default) is type(value)


def _kind(default: Any) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, list) and default:
        return f"a list of {_kind(default[0]).replace('a ', '', 1)}s"
    return {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a mapping"}.get(
        type(default), type(default).__name__
    )


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
            child = (
                f"{path}.{key!s}"
                if path and isinstance(node, DictConfig)
                else (f"{path}[{key!s}]" if isinstance(node, ListConfig) else str(key))
            )
            try:
                value = config_node(node, key)
                resolve_node(value)
            except OmegaConfBaseException as error:
                raw = node_value(config_node(node, key)) if config_node(node, key) is not None else None
                reason = " ".join(str(error).split("\n")[0].split())
                raise ConfigError(
                    child,
                    raw,
                    "a value, or an interpolation such as ${trainer.monitor} that names an "
                    "existing key (or a set environment variable for ${oc.env:...})",
                    f"cannot resolve it ({reason})",
                ) from None
            check_interpolations(value, child)


# The sections every run reads: a group may be replaced (`~model +model._target_=...`) but not left out.
SECTIONS = (
    "model",
    "data",
    "optimizer",
    "precision",
    "strategy",
    "compression",
    "task",
    "trainer",
    "logging",
    "export",
)
GROUPS = 7  # the first SECTIONS are config groups, each option naming what builds it


def check_sections(cfg: DictConfig) -> None:
    """Every section a run reads is there, and every group section names what builds it (`name` or `_target_`):
    `~data` deletes the group's option but leaves the keys conf/tfhydra.yaml shares (data.batch_size, ...), a
    mapping no builder can take."""
    for section in SECTIONS:
        node, group = cfg.get(section), section in SECTIONS[:GROUPS]
        article = "an" if section[0] in "aeiou" else "a"
        accepted = (
            f"{article} {section} option (conf/{section}/), or +{section}._target_=<your builder>"
            if group
            else f"the {section} section of conf/tfhydra.yaml"
        )
        if not isinstance(node, DictConfig):
            raise ConfigError(
                section, None, accepted, "missing: deleted with ~, or set to a value that is not a mapping"
            )
        if group and "name" not in node and "_target_" not in node:
            raise ConfigError(
                section,
                None,
                accepted,
                f"no {section} option: deleted with ~{section} (only the keys every {section} option shares are left)",
            )


def validate(cfg: DictConfig, defaults: DictConfig | None = None, rules: dict[str, Rule] | None = None) -> None:
    """The generic checks that need no TensorFlow; raises ConfigError on the first mistake. `rules`: each room's
    ranges and choices (tfhydra/runner/plan.py gathers them: `RULES`)."""
    rules = rules or {}
    from tfhydra.config.registry import check_target_installed

    check_sections(cfg)
    check_interpolations(cfg)
    if defaults is not None:
        check_types(cfg, defaults, rules)
    check_rules(cfg, rules)
    for path, node in nodes_with_target(cfg):
        check_target_installed(node, path)


def nodes_with_target(node: Any, path: str = ""):
    """(dotted path, node) of every node with a `_target_` (the hydra section left out)."""
    if isinstance(node, DictConfig):
        if has_target(node):
            yield path, node
        for key in node:
            if path == "" and key == "hydra":
                continue
            yield from nodes_with_target(config_node(node, key), f"{path}.{key!s}" if path else str(key))
    elif isinstance(node, ListConfig):
        for i, _item in enumerate(list_nodes(node)):
            yield from nodes_with_target(config_node(node, i), f"{path}[{i}]")
