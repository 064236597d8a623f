"""The trust boundary's allowlist: what tfhydra may take from a file in a run or sweep directory.

A run or sweep directory may come from anyone (a colleague's share, a download, an old backup), and
Hydra configs can make code run: `_target_` nodes are imported and called, interpolations call
resolvers when a value is read (`${oc.create:...}` builds a `_target_` that no check saw), `hydra.*`
overrides add callbacks, search paths and environment variables, and a config directory brings
configs of its own. So what a directory says is **data**, checked against an allowlist before
anything is composed or imported (docs/reliability.md, "The trust model"):

- YAML is parsed by the safe loader into plain values only (str, int, float, bool, null, lists,
  mappings with string keys): no tags that build other objects, no links out of the directory;
- an override is accepted only when its key is a key of the config composed from the trusted
  configs (tfhydra's `conf/` and the user's project `conf/`), its value is plain (no `${` anywhere,
  escaped or not; no `_target_` or other instantiate key at any depth), it neither deletes (`~`) nor
  re-packages (`@`) a node, it names no path to write to (`WRITE_KEYS`) and no server to connect to
  (`CONNECT_KEYS`), and it is no `hydra.*` key at all: the launcher, the sweeper, their keys, the jobs'
  environment, callbacks and search paths come only from the user's command line (resume takes them as its
  own arguments: tfhydra/sweep/__main__.py);
- every YAML file is measured before it is parsed (tfhydra/config/bounded.py: size, depth, nodes with aliases
  expanded), so a 2 kB alias bomb is one line, not a walk of 10⁹ nodes;
- a group choice names an option that the trusted config directories have;
- a saved config (`.hydra/config.yaml`) may hold an interpolation or an instantiate key only where the
  trusted composition of the same run holds exactly the same one;
- config directories and search paths never come from a file: the command line, `$TFHYDRA_CONFIG_DIR`
  or `./conf` name them, as for a new run.

Every reader of those files (evaluate, `tfhydra-sweep resume`, `compression.from_run`, the checks of
an existing run or sweep directory, the sweep summary) reads them through tfhydra/trust/readers.py;
tests/trust/test_trust.py fails on a module that parses them itself. `--trust-run` / `--trust-sweep` lift the gate,
loudly.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from tfhydra.config.bounded import MAX_BYTES, MAX_DEPTH, MAX_NODES, TooLarge, check_yaml_shape, read_text_bounded
from tfhydra.config.errors import ConfigError

# Keys Hydra's instantiate reads: any of them makes a node a call.
INSTANTIATE_KEYS = ("_target_", "_args_", "_partial_", "_recursive_", "_convert_")
# Keys whose value says where to write (or what to download into): a directory's file may leave them unset only.
WRITE_KEYS = {
    "data.cache": ("memory", "auto", False, None),
    "data.cache_dir": (None,),
    "data.snapshot": (None, False),
    "data.download": (False,),
    "logger.mlflow.tracking_uri": (None,),
    "logger.mlflow.artifact_location": (None,),
    "logger.wandb.dir": (None,),
    "hydra.sweeper.storage": (None,),
}
# Keys whose value names a server to connect to: a directory's file may leave them unset (or local) only; the
# user names servers on the command line (tfhydra-evaluate RUN data.service.address=...).
CONNECT_KEYS = {"data.service.address": (None,), "logger.wandb.mode": (None, "offline", "disabled")}
FIXED_KEYS = {**WRITE_KEYS, **CONNECT_KEYS}  # what a file may not point elsewhere
# `hydra.*` overrides that every tfhydra sweep command writes again itself: never taken from a file, nor asked for
# again by resume. Every other hydra setting a file records is not taken either; resume asks for it by name.
HYDRA_DROPPED = ("hydra.sweep.dir", "hydra.mode", "hydra.job.env_set.TFHYDRA_")
ADDED_KEYS = ("optuna_trial",)  # `+key=` a tfhydra sweep itself writes (tfhydra/sweep/search.py's trial number)
_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")  # one segment of a key, and a group option
_OPTION = re.compile(r"^[A-Za-z0-9_\-./]+$")


class Untrusted(ConfigError):
    """A file in a run or sweep directory says something the allowlist does not accept."""

    def __init__(self, path: Path | str, flag: str, problem: str, accepted: str | None = None):
        lift = f"{flag} if you trust whoever wrote that directory" if flag.startswith("--") else flag
        accepted = accepted or (
            "plain values of tfhydra's (or your project's) config keys and options from your own "
            f"config directories; or {lift}"
        )
        super().__init__(str(path), None, accepted, problem)


# ---- plain data from YAML ---------------------------------------------------------------------------------------


def read_plain_yaml(path: Path, root: Path, flag: str) -> Any:
    """`path` (a file inside the directory `root`) parsed as plain data; an Untrusted error otherwise.

    A link that leaves `root` is refused: the directory's author would choose which of the reader's
    files tfhydra reads. The file is measured before it is parsed (tfhydra/config/bounded.py: size, depth, nodes
    with aliases expanded), so a YAML bomb is one line, not a reader walking 10⁹ nodes."""
    import yaml

    path, root = Path(path), Path(root)
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError) as error:
        raise Untrusted(
            path, flag, f"cannot be read ({type(error).__name__})", "a file of the directory, as tfhydra wrote it"
        ) from None
    if not real.is_relative_to(root.resolve()):
        raise Untrusted(path, flag, f"it links out of {root} (to {real})", "a file inside the directory")
    try:
        text = read_text_bounded(real)
        check_yaml_shape(text)  # measured before anything is built
        loaded = yaml.safe_load(text)
    except TooLarge as error:
        raise Untrusted(
            path,
            flag,
            f"it is too large to read safely: {error}",
            f"a file tfhydra wrote (at most {MAX_BYTES} bytes, {MAX_DEPTH} levels, {MAX_NODES} nodes)",
        ) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        where = getattr(error, "problem_mark", None)
        problem = f"line {where.line + 1}: {getattr(error, 'problem', '')}" if where else type(error).__name__
        raise Untrusted(path, flag, f"it is not readable YAML ({problem})", "the YAML file tfhydra wrote") from None
    bad = _not_plain(loaded)
    if bad is not None:
        raise Untrusted(
            path,
            flag,
            f"it holds {bad}, which is not a plain value",
            "strings, numbers, booleans, null, lists and mappings with string keys",
        )
    return loaded


def _not_plain(value: Any, where: str = "") -> str | None:
    """Where `value` holds something other than plain YAML data (a date, bytes, a set, a non-string key)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return None
    if isinstance(value, list):
        return next((b for i, v in enumerate(value) if (b := _not_plain(v, f"{where}[{i}]")) is not None), None)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"the key {key!r} at {where or 'the top'}"
            bad = _not_plain(item, f"{where}.{key}" if where else key)
            if bad is not None:
                return bad
        return None
    return f"a {type(value).__name__} at {where or 'the top'}"


def _interpolation_or_call(value: Any) -> str | None:
    """The first `${...}` text or instantiate key anywhere in a plain value, else None."""
    if isinstance(value, str):
        return value if "${" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            if key in INSTANTIATE_KEYS or not _NAME.match(str(key)):
                return f"the key {key}"
            found = _interpolation_or_call(item)
            if found is not None:
                return found
    if isinstance(value, list):
        return next((f for f in map(_interpolation_or_call, value) if f is not None), None)
    return None


# ---- overrides ----------------------------------------------------------------------------------------------------


def check_overrides(overrides: Iterable[str], path: Path, flag: str, primary: Path | None, multirun: bool) -> None:
    """Every override a file recorded passes the allowlist (module docstring), or one Untrusted error naming it.

    `primary`: the project's config directory of this command (None: tfhydra's own only)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = list(overrides)
    for line in overrides:
        if not isinstance(line, str):
            raise Untrusted(path, flag, f"it holds {line!r}, which is not an override")
        if "${" in line:
            raise Untrusted(path, flag, f"it holds {line}, whose interpolation would run when the config is read")
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as error:  # noqa: BLE001  (Hydra's grammar errors: one line)
        raise Untrusted(path, flag, f"it holds an override Hydra cannot parse ({str(error).splitlines()[0]})") from None
    references = _references(parsed, primary)
    for override in parsed:
        _check_override(override, references, path, flag, multirun)


def _check_override(override, references: _References, path: Path, flag: str, multirun: bool) -> None:
    from hydra.core.override_parser.types import OverrideType

    line, key = override.input_line, override.key_or_group
    refuse = lambda why: Untrusted(path, flag, f"it holds {line}, {why}")  # noqa: E731
    if override.type == OverrideType.DEL:
        raise refuse("which deletes a node")
    if override.package is not None:
        raise refuse("which moves a config to another package")
    if override.is_sweep_override() and not multirun:
        raise refuse("a sweep in a single run's overrides")
    if any(segment in INSTANTIATE_KEYS for segment in key.split(".")):
        raise refuse("which names code to import and call")
    if key.startswith("hydra"):  # launcher, sweeper, environment, callbacks, paths: each can run code or send work
        raise refuse("a hydra setting, which tfhydra takes only from your own command line, never from a file")
    if "." not in key and (key in references.options or not references.has_key(key)):
        # a group choice: an option of the trusted config directories (a top-level key, `keras`, is a plain key)
        if override.type == OverrideType.ADD and key in ADDED_KEYS and _plain_scalars(override):
            return
        references.check_choice(override, refuse)
        return
    if not all(_NAME.match(segment) for segment in key.split(".")):
        raise refuse("whose key is not a config key")
    if not references.has_key(key):
        raise refuse("whose key is not a key of your config directories' configs")
    values = _values(override)
    found = next((f for f in map(_interpolation_or_call, values) if f is not None), None)
    if found is not None:
        raise refuse(
            f"which names code to import and call ({found})"
            if found.startswith("the key ")
            else f"whose interpolation {found} would run when the config is read"
        )
    allowed = FIXED_KEYS.get(key)
    if allowed is not None and any(not _is_one_of(v, allowed) for v in values):
        what = "a server to connect to" if key in CONNECT_KEYS else "where to write"
        raise refuse(
            f"which names {what} (accepted there from a file: {', '.join(map(str, allowed))}; give it on "
            "your own command line)"
        )


def _is_one_of(value: Any, allowed: tuple) -> bool:
    return any(value is a or (type(value) is type(a) and value == a) for a in allowed)


def _values(override) -> list[Any]:
    """The plain values an override sets: one, or each of a sweep's."""
    from hydra.core.override_parser.types import ChoiceSweep, Glob, IntervalSweep, RangeSweep

    value = override.value()
    if isinstance(value, ChoiceSweep):
        return list(value.list)
    if isinstance(value, RangeSweep):
        return [value.start, value.stop, value.step]
    if isinstance(value, IntervalSweep):
        return [value.start, value.end]
    if isinstance(value, Glob):
        return [*value.include, *value.exclude]
    return [value]


def _plain_scalars(override) -> bool:
    return all(v is None or isinstance(v, (str, int, float, bool)) for v in _values(override))


class _References:
    """The trusted configs an override is checked against: composed from the user's own config directories with
    the group choices the overrides make (each option of a swept group composed on its own)."""

    def __init__(self, configs: list[DictConfig], options: dict[str, list[str]]):
        self.configs, self.options = configs, options

    def has_key(self, key: str) -> bool:
        return any(
            OmegaConf.select(c, key, default=_ABSENT, throw_on_missing=False) is not _ABSENT for c in self.configs
        )

    def check_choice(self, override, refuse) -> None:
        group = override.key_or_group
        if group not in self.options:
            raise refuse(f"which names no config group of your config directories ({', '.join(sorted(self.options))})")
        for value in _values(override):
            names = value if isinstance(value, list) else [value]
            for name in names:
                if name is None and not override.is_sweep_override():
                    continue
                if not isinstance(name, str) or not _OPTION.match(name) or name not in self.options[group]:
                    raise refuse(f"which is not an option of {group} ({', '.join(self.options[group])})")


_ABSENT = object()


def _references(parsed, primary: Path | None) -> _References:
    from hydra.core.override_parser.types import OverrideType

    with trusted_hydra(primary):
        options = _group_options()
        fixed: list[tuple[str, list]] = []  # (group, its values)
        swept: list[tuple[str, list]] = []
        for o in parsed:
            key = o.key_or_group
            if "." in key or key not in options or o.type == OverrideType.DEL or o.package is not None:
                continue
            values = [v for v in _values(o) if isinstance(v, (str, list))]
            names = [n for v in values for n in (v if isinstance(v, list) else [v])]
            if not values or not all(isinstance(n, str) and n in options[key] for n in names):
                continue  # refused by check_choice, with the group's options
            (swept if o.is_sweep_override() else fixed).append((key, values))
        base = [f"{key}={_choice(values[0])}" for key, values in fixed]
        combos = [base] + [base + [f"{key}={_choice(v)}"] for key, values in swept for v in values]
        return _References([_compose(c) for c in combos], options)


def _choice(value: Any) -> str:
    return f"[{','.join(value)}]" if isinstance(value, list) else str(value)


def _group_options() -> dict[str, list[str]]:
    """Each config group on the search path being composed with (Hydra's and its plugins' included), and its
    options, from Hydra's own config loader."""
    from hydra.core.global_hydra import GlobalHydra

    from tfhydra.config.hydra_api import config_groups

    return config_groups(GlobalHydra.instance().config_loader())


@contextlib.contextmanager
def trusted_hydra(primary: Path | None) -> Iterator[None]:
    """Hydra initialised on the trusted config directories (the project's, then tfhydra's), unless it already is
    (inside a Hydra app or the pre-flight, whose search path is the user's own)."""
    from hydra.core.global_hydra import GlobalHydra

    from tfhydra.config.hydra_api import initialize
    from tfhydra.config.project import CONFIG_DIR

    if GlobalHydra.instance().is_initialized():
        yield
        return
    with initialize(primary or CONFIG_DIR):
        yield


def _compose(overrides: list[str]) -> DictConfig:
    from hydra import compose

    return compose(config_name="config", overrides=overrides, return_hydra_config=True)


def compose_trusted(primary: Path | None, overrides: list[str]) -> DictConfig:
    """The config (with its hydra node) that the trusted config directories compose with `overrides`."""
    with trusted_hydra(primary):
        return _compose(overrides)
