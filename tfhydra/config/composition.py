"""Composing configs in the pre-flight, and Hydra's composition errors as one line naming the override.

Hydra's own messages span several lines with its search path; a YAML file that does not parse is a
traceback. Here each becomes one ConfigError: the key or file, the bad value, and what is accepted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

import yaml
from omegaconf import DictConfig

from tfhydra.config.errors import ConfigError, suggestion
from tfhydra.config.schema import Rule
from tfhydra.config.typed import type_error

# Keys under these nodes are the user's to name (a metric of the run's task), so the config cannot list them and
# Hydra's struct mode would refuse `trainer.stop_at.val_accuracy=0.98` without a `+`: wherever tfhydra hands
# overrides to Hydra (the command line, the Python API, the tests' compose) they become `++key=value`.
OPEN_KEYS = ("trainer.stop_at",)


def with_open_keys(overrides: list[str]) -> list[str]:
    """`overrides` setting an `OPEN_KEYS` node or a key under it as Hydra's add-or-set (`++key=value`)."""
    return [f"++{o}" if o.startswith(tuple(f"{k}{c}" for k in OPEN_KEYS for c in ".=")) else o for o in overrides]


def is_group_choice(override: str) -> bool:
    key = override.split("=", 1)[0].lstrip("+~")
    return "." not in key


def compose_choices(
    compose, config_name: str, overrides: list[str], groups: list[str], rules: Mapping[str, Rule] | None = None
) -> DictConfig:
    with composition_errors(overrides, groups, rules):
        return compose(config_name=config_name, overrides=overrides, return_hydra_config=True)


def with_values(
    defaults: DictConfig, overrides: list[str], groups: list[str], rules: Mapping[str, Rule] | None = None
) -> DictConfig:
    """`defaults` (composed from the group choices) with the key=value overrides applied by Hydra's own
    function, as its compose does after the defaults list: one composition per set of group choices
    instead of two per job (about 0.1 s each)."""
    import copy

    from hydra.core.override_parser.overrides_parser import OverridesParser

    from tfhydra.config.hydra_api import apply_overrides

    cfg = copy.deepcopy(defaults)
    if overrides:
        with composition_errors(overrides, groups, rules):
            apply_overrides(OverridesParser.create().parse_overrides(overrides), cfg)
    return cfg


@contextlib.contextmanager
def composition_errors(
    overrides: list[str], groups: list[str], rules: Mapping[str, Rule] | None = None
) -> Iterator[None]:
    """Hydra's composition errors, as one ConfigError line naming the override. A value a schema's type refuses
    is said with that key's rule from `rules` (each room's `RULES`), as the rules say a value of the right type."""
    from hydra.errors import ConfigCompositionException, HydraException, MissingConfigException
    from omegaconf.errors import ValidationError

    try:
        yield
    except ValidationError as error:
        refusal = type_error(error, rules)
        if refusal is None:
            raise
        raise refusal from None
    except MissingConfigException as error:
        group, _, option = (error.missing_cfg_file or "").rpartition("/")
        options = error.options or group_options(group)  # Hydra lists none for an option of a list (logger=[a,b])
        accepted = options or "an existing YAML file in conf/"
        extras = {name: extra for name, extra in _PLUGIN_OPTIONS.get(group, {}).items() if name not in options}
        if option in extras:  # launchers come from optional extras: name the one this option needs
            extras = {option: extras[option]}
        if extras:
            accepted = f"one of {', '.join(options)}, or " + ", ".join(
                f"{name} after pip install -e '.[{extra}]'" for name, extra in extras.items()
            )
        raise ConfigError(
            group or "config", option, accepted, f"no such {group or 'config'} option{suggestion(option, options)}"
        ) from None
    except ConfigCompositionException as error:
        refusal = type_error(error, rules) or deletion_error(error)
        if refusal is not None:
            raise refusal from None
        bad = next((o for o in overrides if f"'{o.split('=', 1)[0].lstrip('+~')}'" in str(error)), None)
        if bad is not None:
            key, _, value = bad.partition("=")
            name = key.lstrip("+~")  # `precison=mixed` is a group misspelt: name the one group it is nearest to
            raise ConfigError(
                key,
                value,
                f"a config group ({', '.join(groups)}) or an existing key",
                f"no such group or key{suggestion(name, _group_names(name, groups), count=1)}",
            ) from None
        raise ConfigError(" ".join(overrides), None, "valid overrides", str(error).splitlines()[0]) from None
    except HydraException as error:
        raise ConfigError(" ".join(overrides), None, "valid overrides", str(error).splitlines()[0]) from None
    except yaml.YAMLError as error:  # a config file of the project's (or tfhydra's) own conf/ that does not parse
        mark = getattr(error, "problem_mark", None)
        where = f"{mark.name}:{mark.line + 1}" if mark is not None else "a config file"
        raise ConfigError(
            where,
            None,
            "a YAML file Hydra can compose (a mapping of keys to values)",
            f"not readable YAML ({getattr(error, 'problem', None) or type(error).__name__})",
        ) from None


def unparsed(error: Exception) -> ConfigError:
    """An override Hydra's grammar cannot parse, in one line; a value holding one of the grammar's characters (a
    path with `=`, text with a space) is shown quoted, as the grammar and the shell take it."""
    override = getattr(error, "override", "an override")
    accepted = "key=value in Hydra's override syntax"
    key, _, value = str(override).partition("=")
    if any(c in value for c in "=:,()[]{} ") and value[:1] not in "'\"[{":
        quoted = f"{key}='{value}'"
        accepted += f'; quote a value holding = : , ( ) [ ] {{ }} or a space: {quoted} (in the shell: "{quoted}")'
    return ConfigError(override, None, accepted, f"cannot parse it ({str(error).splitlines()[0]})")


def in_user_words(error: ConfigError, overrides: list[str]) -> ConfigError:
    """`error` quoting a number as the command line spelt it (`compression.target_sparsity=1.0`, `optimizer.lr=-1`):
    a schema's float field holds both as floats, and the line should say what the user typed."""
    if type(error) is not ConfigError or not isinstance(error.value, float):
        return error
    typed = next((o.partition("=")[2] for o in overrides if o.partition("=")[0].lstrip("+") == error.key), None)
    return error if typed is None else ConfigError(error.key, typed, error.accepted, error.problem)


def deletion_error(error: Exception) -> ConfigError | None:
    """`~trainer.loss`: a schema's key cannot be deleted (OmegaConf refuses it while Hydra composes); said as the
    run plan says a deleted key. None: not that refusal."""
    from omegaconf.errors import ConfigTypeError

    cause = error.__cause__
    if not isinstance(cause, ConfigTypeError) or "deletion" not in str(cause) or not getattr(cause, "full_key", None):
        return None
    path = str(cause.full_key)
    return ConfigError(
        f"~{path}",
        None,
        f"{path} set to a value (tfhydra reads it; override it instead of deleting it)",
        "a key tfhydra needs was deleted",
    )


def check_group_values(parsed: list, groups: list[str]) -> None:
    """A group choice whose value Hydra's grammar read as something other than a name (`debug=nan` is a float,
    `model=1` an int, `precision=true` a bool) is one line naming the group's options: Hydra itself raises a
    ValueError deep in its defaults list."""
    for override in parsed:
        key = override.get_key_element().lstrip("+~")
        if "." in key or (key not in groups and not key.startswith("hydra/")) or override.is_delete():
            continue
        if override.is_sweep_override() and not hasattr(override.value(), "list"):
            continue  # glob(), range(), interval(): Hydra's own sweep syntax, checked by the sweep room
        values = override.value()
        values = getattr(values, "list", values)  # a sweep's choices
        names = values if isinstance(values, list) else [values]
        bad = [v for v in names if not isinstance(v, (str, list))]
        if bad:
            kind = {bool: "a boolean", int: "an integer", float: "a number"}.get(type(bad[0]), "null")
            raise ConfigError(
                key,
                override.input_line.split("=", 1)[1],
                f"an option name: one of "
                f"{', '.join(group_options(key))} (quote a name Hydra would read otherwise: {key}='...')",
                f"Hydra reads it as {kind}, not an option name",
            )


def _group_names(name: str, groups: list[str]) -> list[str]:
    """The groups a misspelt group name is compared with: tfhydra's, or Hydra's own (`hydra/launcher` ...) for a
    name under `hydra/`."""
    from hydra.core.global_hydra import GlobalHydra

    if not name.startswith("hydra/") or not GlobalHydra.instance().is_initialized():
        return groups
    return [f"hydra/{g}" for g in GlobalHydra.instance().config_loader().list_groups("hydra")]


def group_options(group: str) -> list[str]:
    """The options of `group` in the config search path Hydra is composing with; [] outside one."""
    from hydra.core.global_hydra import GlobalHydra

    if not group or not GlobalHydra.instance().is_initialized():
        return []
    return list(GlobalHydra.instance().config_loader().get_group_options(group))


# Options that Hydra plugins add, and tfhydra's extra that installs each (pyproject.toml).
_PLUGIN_OPTIONS = {
    "hydra/launcher": {
        "joblib": "sweeps",
        "submitit_local": "slurm",
        "submitit_slurm": "slurm",
        "ray": "ray",
        "ray_aws": "ray",
    }
}
