"""Hydra's answers that the property tests ask for again and again, computed once per process.

A drawn case of the pre-flight, trust or data properties spends most of its time on work that does not depend on
what was drawn: composing the same group choices (`model=cnn`: forty options for three hundred cases; `data=csv`:
one for a source's twelve damaged files), listing the config groups of the same search path (the allowlist asks
Hydra's loader about sixty times a case, each a deep copy of Hydra's config repository), composing the same trusted
configs, and parsing tfhydra's own conf/ for the `_target_`s it names. Each is a pure function of its arguments,
the search path and the schemas Hydra's ConfigStore holds, so the tests keep its first real answer (keyed by all
three) and hand every later case a private copy; everything that depends on the drawn value (the override applied,
the plan, the allowlist's decision, the readers, the data read) still runs, for real, in every case.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator

import pytest

_COMPOSED: dict[tuple, object] = {}
_TRUSTED: dict[tuple, object] = {}
_GROUPS: dict[tuple, dict[str, list[str]]] = {}
_TARGETS: dict[tuple, set[str]] = {}


def _stored() -> int:
    """How many schemas Hydra's ConfigStore holds: a room's schemas are stored when its module is first imported."""
    from hydra.core.config_store import ConfigStore

    def entries(node) -> int:
        return sum(entries(value) if isinstance(value, dict) else 1 for value in node.values())

    return entries(ConfigStore.instance().repo)


def _search_path() -> tuple:
    """Where Hydra's loader looks for configs now, and the schemas it holds: the answers below are the same wherever
    both are."""
    from hydra.core.global_hydra import GlobalHydra

    path = GlobalHydra.instance().config_loader().get_search_path().get_path()
    return (*((entry.provider, entry.path) for entry in path), _stored())


@contextlib.contextmanager
def compositions_kept() -> Iterator[None]:
    """The pre-flight's composition of a job's group choices (tfhydra/config/composition.py: compose_choices), the
    allowlist's composition of the trusted configs (tfhydra/trust/allowlist.py: _compose) and its list of groups
    and options (_group_options), and the `_target_`s the trusted config directories name (tfhydra/trust/readers.py:
    own_targets, which parses every YAML file of conf/), each made for real the first time its arguments are seen
    in this process; a refusal is never kept (it is raised again, for real)."""
    from tfhydra.cli import preflight
    from tfhydra.config.project import project_config_dir
    from tfhydra.trust import allowlist, readers

    real_compose, real_trusted, real_groups = preflight.compose_choices, allowlist._compose, allowlist._group_options
    real_targets = readers.own_targets

    def compose_choices(compose, config_name, overrides, groups, rules=None):
        key = (_search_path(), config_name, tuple(overrides), tuple(groups), id(rules))
        if key not in _COMPOSED:
            _COMPOSED[key] = real_compose(compose, config_name, overrides, groups, rules)
        return copy.deepcopy(_COMPOSED[key])

    def compose_trusted(overrides):
        key = (_search_path(), tuple(overrides))
        if key not in _TRUSTED:
            _TRUSTED[key] = real_trusted(overrides)
        return copy.deepcopy(_TRUSTED[key])

    def group_options():
        key = _search_path()
        if key not in _GROUPS:
            _GROUPS[key] = real_groups()
        return {group: list(options) for group, options in _GROUPS[key].items()}

    def own_targets(primary=None):
        key = (str(primary), str(project_config_dir()))
        if key not in _TARGETS:
            _TARGETS[key] = real_targets(primary)
        return set(_TARGETS[key])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(preflight, "compose_choices", compose_choices)
        patch.setattr(allowlist, "_compose", compose_trusted)
        patch.setattr(allowlist, "_group_options", group_options)
        patch.setattr(readers, "own_targets", own_targets)
        yield


_CHOICES: dict[tuple, object] = {}


def composed_config(overrides: list[str]):
    """`compose_config(overrides)` (the DictConfig `python train.py OVERRIDES` runs) with its group choices composed
    once per process: the key=value overrides are applied to a copy by Hydra's own function, as the pre-flight does
    (tfhydra/config/composition.py: with_values). For a property whose drawn case is a file and the keys naming it."""
    from conftest import CONFIG_DIR, compose_config

    from tfhydra.config.composition import is_group_choice, with_values
    from tfhydra.runner.plan import RULES

    choices = tuple(o for o in overrides if is_group_choice(o))
    key = (choices, _stored())
    if key not in _CHOICES:
        _CHOICES[key] = compose_config(list(choices))
    groups = sorted(p.name for p in CONFIG_DIR.iterdir() if p.is_dir())
    return with_values(_CHOICES[key], [o for o in overrides if not is_group_choice(o)], groups, RULES)


def preflight(argv: list[str]):
    """None if the pre-flight accepts `argv`; the ConfigError if it refuses it in one line. Anything else fails the
    test. A group choice's composition is made once per process (above); the drawn value is checked each time."""
    from conftest import CONFIG_DIR

    from tfhydra.cli.preflight import check_overrides
    from tfhydra.config.errors import ConfigError

    try:
        with compositions_kept():
            check_overrides(CONFIG_DIR, "config", argv)
    except ConfigError as error:
        assert "\n" not in str(error) and str(error).strip(), repr(str(error))
        return error
    return None
