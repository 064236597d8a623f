"""Typed configs: what the option schemas share, and their refusals said as tfhydra says a mistake.

Every built-in option and section has a dataclass schema in its room's `schemas.py`, stored in Hydra's ConfigStore
(tfhydra/runner/plan.py `store_schemas`) and named by its YAML's defaults list, so OmegaConf refuses a value of the
wrong type while Hydra composes, before the rooms' rules run. `type_error` turns that refusal into the one line the
key's rule would give (docs/design.md, "Typed configs").
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from omegaconf import DictConfig, ListConfig

from tfhydra.config.errors import ConfigError
from tfhydra.config.schema import Rule, _plain, rule_error


class Choice(str, Enum):
    """A schema's closed set of names: a `str` Enum whose members' names equal their values, so a member hashes,
    compares, prints and serialises as its name does (`Loop.fit == "fit"`, `f"{Loop.fit}"` is `fit`, JSON and
    OmegaConf's YAML write `fit`). OmegaConf 2.3 has no `Literal`, so this is how a schema closes a choice."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(str(self), spec)

    def __repr__(self) -> str:
        return repr(str(self))


def type_error(error: Exception, rules: Mapping[str, Rule] | None = None) -> ConfigError | None:
    """A value a schema's type refused while Hydra composed (OmegaConf's ValidationError, or Hydra's composition
    error around one), said as that key's rule says it (`trainer.seed=1.5`: "not an integer", "an integer >= 0"),
    else by the type the schema declares ("true or false", "wrong type"). None: not a type refusal."""
    from omegaconf.errors import ValidationError

    cause = error if isinstance(error, ValidationError) else error.__cause__
    if not isinstance(cause, ValidationError) or not getattr(cause, "full_key", None):
        return None
    key, value = str(cause.full_key), getattr(cause, "value", None)
    rule = (rules or {}).get(key)
    if rule is not None:
        return rule_error(key, value, rule)
    return ConfigError(key, _plain(value), _type_text(getattr(cause, "child_node", None), cause), "wrong type")


def _type_text(node: Any, cause: Exception) -> str:
    """What the schema's field takes, from the OmegaConf node that refused the value."""
    from omegaconf import nodes

    if isinstance(node, nodes.EnumNode):
        return "one of " + ", ".join(str(member.value) for member in node.enum_type)
    kinds = (
        (nodes.BooleanNode, "true or false"),
        (nodes.IntegerNode, "an integer"),
        (nodes.FloatNode, "a number"),
        (nodes.StringNode, "a string"),
        (ListConfig, "a list"),
        (DictConfig, "a mapping of keys (use dotted keys to set one)"),
    )
    text = next((text for kind, text in kinds if isinstance(node, kind)), None)
    return text or f"a value of the key's type ({' '.join(str(cause).splitlines()[0].split())})"
