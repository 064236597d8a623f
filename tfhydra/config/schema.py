"""Checks on a composed config, run before TensorFlow is imported.

Two layers:
- rules (`Rule`, built with `integer`, `number`, `choice`, ...): range and choice checks for keys whose
  valid values are narrower than their type. Each room declares the rules of its keys, with its option
  names, in its TensorFlow-free checks module (`RULES` in tfhydra/<room>/checks.py); tfhydra/runner/plan.py gathers
  them. A rule applies wherever its key exists, so `model.dropout` covers every model option that has a
  `dropout` key, except inside a node with `_target_`, whose keys are the user's callable's arguments.
- types: every built-in option and section has a dataclass schema in its room's checks module (`SCHEMAS`), stored in
  Hydra's ConfigStore under `schema/` (tfhydra/runner/plan.py `store_schemas`) and named by its YAML's defaults list,
  so Hydra refuses `optimizer.lr=abc` while it composes; tfhydra/config/typed.py says that refusal as the key's
  rule would (docs/design.md, "Typed configs").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from omegaconf import DictConfig, ListConfig, OmegaConf

from tfhydra.config.errors import ConfigError


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
        lambda v: v in options and _plain_type(v) in {type(o) for o in options},
        options=options,
    )


def _plain_type(v: Any) -> type:
    """A schema's Choice member (a str Enum) is the string it names."""
    return str if isinstance(v, str) else type(v)


def is_target(v: Any) -> bool:
    return isinstance(v, dict) and "_target_" in v or has_target(v)


def has_target(node: Any) -> bool:
    """A DictConfig with a `_target_` key, looked up in its keys: `"_target_" in node` on a struct config raises and
    formats an error inside OmegaConf for every node without one (measured: a tenth of the pre-flight's time)."""
    return isinstance(node, DictConfig) and "_target_" in node.keys()


def optional(rule: Rule) -> Rule:
    """`rule`, or null: the same kind of rule (a PathRule still names a special file), its refusal kept."""
    return dataclasses.replace(rule, accepted=f"null or {rule.accepted}", ok=lambda v: v is None or rule.ok(v))


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
            raise rule_error(key, value, rule)


def rule_error(key: str, value: Any, rule: Rule) -> ConfigError:
    """The one line for a value `rule` refuses: the accepted values (a long choice shortened to the nearest), the
    problem."""
    accepted, problem = rule.accepted, rule.problem(value)
    if rule.options and isinstance(value, str):
        from tfhydra.config.errors import short_list, suggestion

        accepted = short_list(value, rule.options, f"all of them: {key} in {rule.source or 'its room'}")
        problem += suggestion(value, rule.options)
    return ConfigError(key, _plain(value), accepted, problem)


def _in_target_node(cfg: DictConfig, key: str) -> bool:
    """Keys inside a `_target_` node are the user's callable's arguments (`+model.units=128`), not our builders'."""
    parts = key.split(".")
    for end in range(1, len(parts)):
        node = OmegaConf.select(cfg, ".".join(parts[:end]), default=None)
        if has_target(node):
            return True
    return False


def check_deleted(cfg: DictConfig, defaults: DictConfig) -> None:
    """A key of the composed defaults that the command line deleted (`~trainer.loss`) is one line: tfhydra reads
    every key of its sections. Keys inside a `_target_` node are its callable's, and may go."""
    _check_deleted(cfg, OmegaConf.to_container(defaults, resolve=False), "")


def _check_deleted(cfg: Any, defaults: Any, prefix: str) -> None:
    if not isinstance(defaults, dict) or not isinstance(cfg, DictConfig) or has_target(cfg):
        return
    for key, default in defaults.items():
        path = f"{prefix}{key}"
        if path == "hydra" or key == "_target_":
            continue
        if key not in cfg:
            raise ConfigError(
                f"~{path}",
                None,
                f"{path} set to a value (tfhydra reads it; override it instead of deleting it)",
                "a key tfhydra needs was deleted",
            )
        if isinstance(default, dict):
            _check_deleted(OmegaConf.select(cfg, str(key), throw_on_missing=False), default, path + ".")


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


def check_interpolations(cfg: DictConfig) -> None:
    """Every `${...}` resolves: OmegaConf would raise deep inside the job, with a traceback, at first use."""
    from omegaconf.errors import OmegaConfBaseException

    for path, raw in leaves(OmegaConf.to_container(cfg, resolve=False)):
        if not (isinstance(raw, str) and "${" in raw):
            continue
        try:
            OmegaConf.select(cfg, path, throw_on_resolution_failure=True)
        except OmegaConfBaseException as error:
            reason = " ".join(str(error).split("\n")[0].split())
            raise ConfigError(
                path,
                raw,
                "a value, or an interpolation such as ${trainer.monitor} that names an "
                "existing key (or a set environment variable for ${oc.env:...})",
                f"cannot resolve it ({reason})",
            ) from None


def leaves(value: Any, path: str = ""):
    """(dotted path, value) of every leaf of plain data (OmegaConf.to_container's), the hydra section left out; a
    list item's path is `key[i]`, as OmegaConf.select reads it."""
    if isinstance(value, dict):
        if not value and path:
            yield path, value
        for key, item in value.items():
            if path == "" and key == "hydra":
                continue
            yield from leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            yield from leaves(item, f"{path}[{i}]")
    else:
        yield path, value


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
        check_deleted(cfg, defaults)
    check_rules(cfg, rules)
    for path, node in nodes_with_target(cfg):
        check_target_installed(node, path)


def nodes_with_target(cfg: DictConfig):
    """(dotted path, node) of every node with a `_target_` (the hydra section left out)."""
    for path in _target_paths(OmegaConf.to_container(cfg, resolve=False)):
        yield path, (cfg if path == "" else OmegaConf.select(cfg, path))


def _target_paths(value: Any, path: str = ""):
    if isinstance(value, dict):
        if "_target_" in value:
            yield path
        for key, item in value.items():
            if path == "" and key == "hydra":
                continue
            yield from _target_paths(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _target_paths(item, f"{path}[{i}]")
