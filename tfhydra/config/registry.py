"""One Registry type: a config group's name -> builder table.

Builders register at their definition site (`@MODELS.register("cnn", schema=CnnModelConfig)`, as fairseq's
`register_model(name, dataclass=...)`) and are plain functions `build(cfg_node, *context) -> object`; `schema`
names the dataclass that types the option's config (its room's schemas.py), which conf/'s YAML names too. A
registry names the modules that fill it (`locations`, as mmengine's `Registry(..., locations=[...])`) and imports
them on its first lookup, so no module imports another only to have it register, and importing a room's face runs
none of its builders' modules. A node with `_target_` bypasses the table: Hydra instantiates the dotted path with
the node's keys plus the context as keyword arguments, so user code needs no change to tfhydra.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from omegaconf import DictConfig

from tfhydra.config.errors import ConfigError


class Registry:
    def __init__(self, group: str, locations: Sequence[str] = ()):
        """`locations`: the modules whose builders register here (`"tfhydra.model.seed"`), imported on the first
        `get`, `names`, `traits` or `build`, not when the registry is made: the registry's own module is
        imported by each of them."""
        self.group = group
        self.locations = tuple(locations)
        self._imported = not self.locations
        self._builders: dict[str, Callable[..., Any]] = {}
        self._traits: dict[str, dict[str, Any]] = {}
        self._schemas: dict[str, type] = {}

    def import_locations(self) -> None:
        """Import every module of `locations` (once; mmengine's `import_from_location`). A module that fails to
        import raises here, at the lookup, and is tried again at the next. A lookup in one thread while another
        imports a location (the preload thread, tfhydra/platform/startup.py) waits on Python's import lock for that
        module, so it sees the whole table; a location module therefore looks nothing up while it is imported."""
        if self._imported:
            return
        for location in self.locations:
            importlib.import_module(location)
        self._imported = True

    def register(
        self, name: str, schema: type | None = None, **traits: Any
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """`schema`: the dataclass of the option's keys (tests/config/test_registry.py holds it equal to the one
        stored for `schema/<group>/<name>`); `traits`: what the builder declares about itself for other rooms to
        ask (a model's `inputs`: what it takes from the data), so no room tests a builder's name."""

        def decorate(builder: Callable[..., Any]) -> Callable[..., Any]:
            if name in self._builders:
                raise ValueError(f"{self.group} builder {name!r} is registered twice")
            self._builders[name] = builder
            self._traits[name] = traits
            if schema is not None:
                self._schemas[name] = schema
            return builder

        return decorate

    def traits(self, name: str) -> dict[str, Any]:
        """What `name`'s builder declared at registration (empty: nothing; an unknown name too)."""
        self.import_locations()
        return dict(self._traits.get(name, {}))

    def schema(self, name: str) -> type | None:
        """The dataclass `name`'s registration named (None: none, e.g. an option whose keys live elsewhere)."""
        self.import_locations()
        return self._schemas.get(name)

    def names(self) -> list[str]:
        self.import_locations()
        return sorted(self._builders)

    def get(self, name: str) -> Callable[..., Any]:
        """Like `keras.optimizers.get`: an unknown name lists the valid ones."""
        self.import_locations()
        try:
            return self._builders[name]
        except KeyError:
            raise ConfigError(
                f"{self.group}.name", name, self.names(), f"no {self.group} builder of that name"
            ) from None

    def build(self, node: DictConfig, **context: Any) -> Any:
        if "_target_" in node:
            return instantiate_target(node, self.group, **context)
        return self.get(node.name)(node, **context)


def instantiate_target(node: DictConfig, key: str, **context: Any) -> Any:
    """Hydra-instantiate a user's `_target_`, turning an unimportable path into a ConfigError. Hydra 1.4 may call
    exactly the node's own `_target_`s (callable_targets says why that is what it may name)."""
    from hydra.errors import InstantiationException

    from tfhydra.config.hydra_api import instantiate_partial

    check_target_imports(node, key)
    try:
        # _partial_ then call: context objects (a DataSpec, a model) must not be merged into the config
        builder = instantiate_partial(node, callable_targets(node))
    except InstantiationException as error:
        raise ConfigError(
            f"{key}._target_",
            node._target_,
            "a callable taking the node's keys as keyword arguments",
            f"calling it failed ({error.__cause__ or error})",
        ) from error
    check_signature(builder, node, key, context)
    return builder(**context)


def callable_targets(node: DictConfig) -> list[str]:
    """What Hydra may call to build `node`: every `_target_` in it, resolved (`${tfhydra.keras:metrics.AUC}` is
    `tf_keras.metrics.AUC`), Hydra 1.4's execution whitelist for it. The trust layer decides what a config may
    name: one reaches a builder from the user's own command line and configs, or from a directory only through
    tfhydra/trust/'s readers, which refuse a `_target_` the user's own configs do not name. So what it names is
    what it may call, and nothing else is."""
    from omegaconf import OmegaConf

    return sorted(targets_in(OmegaConf.to_container(node, resolve=True)))


def targets_in(value: Any) -> set[str]:
    """Every `_target_` of plain data (dicts and lists), at any depth."""
    if isinstance(value, dict):
        own = {str(value["_target_"])} if "_target_" in value else set()
        return own.union(*(targets_in(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(targets_in(v) for v in value))
    return set()


def check_signature(builder, node: DictConfig, key: str, context: dict) -> None:
    """A node's keys the target does not take (e.g. a group option's own keys under a user `_target_`)
    are one line, not a TypeError from deep inside the call."""
    import functools
    import inspect

    target = builder.func if isinstance(builder, functools.partial) else builder
    args, keywords = (builder.args, builder.keywords) if isinstance(builder, functools.partial) else ((), {})
    try:
        inspect.signature(target).bind(*args, **keywords, **context)
    except (TypeError, ValueError) as error:
        if isinstance(error, ValueError) or "keyword" not in str(error) and "argument" not in str(error):
            return  # no signature to check (a builtin): let the call speak
        keys = [str(k) for k in node if not str(k).startswith("_")]
        raise ConfigError(
            f"{key}._target_",
            node._target_,
            f"a callable taking the node's keys ({', '.join(keys)}) and "
            f"{', '.join(context) or 'nothing else'} as keyword arguments (drop a group option's keys "
            f"with ~{key} before +{key}._target_=...)",
            f"cannot call it: {error}",
        ) from None


# Packages whose import is TensorFlow's (seconds): the pre-flight checks only that they are installed.
TENSORFLOW_PACKAGES = frozenset({"tensorflow", "tf_keras", "keras", "tensorflow_model_optimization"})


def check_target_installed(node: DictConfig, key: str) -> None:
    """The pre-flight's check of a `_target_`: it imports (a user's module, a typo). A target in a TensorFlow
    package not yet imported (the task's `tf_keras.metrics.AUC`, a user's `tf_keras.optimizers.SGD`) only has to
    name an installed package here, and one of tfhydra's own modules only has to be found: importing it would import
    TensorFlow before the pre-flight answers (seconds for a config error) and outside the preload that overlaps it
    with Hydra's work (tfhydra/platform/startup.py). The builder checks the whole path with `check_target_imports`
    before it instantiates, still in one line."""
    import importlib.util
    import sys

    target = str(node._target_)
    package, module = target.split(".", 1)[0], target.rsplit(".", 1)[0]
    if package in TENSORFLOW_PACKAGES and package not in sys.modules and importlib.util.find_spec(package):
        return
    if package == "tfhydra" and module not in sys.modules and importlib.util.find_spec(module):
        return  # a module of tfhydra's own that imports TensorFlow (tfhydra/task/metrics.py): found, not imported
    check_target_imports(node, key)


def check_target_imports(node: DictConfig, key: str) -> None:
    from tfhydra.config.hydra_api import locate

    try:
        locate(node._target_)
    except Exception as error:  # noqa: BLE001  (ImportError, AttributeError, ValueError from _locate)
        reason = str(error.__cause__ or error).splitlines()[0]
        raise ConfigError(
            f"{key}._target_",
            node._target_,
            "an importable dotted path such as mypkg.models.build_net",
            f"cannot import it ({reason})",
        ) from None
