"""Where a command's configs come from: tfhydra's own `conf/` and, used from another project, that project's.

tfhydra's configs are one directory, `CONFIG_DIR`: the checkout's top-level `conf/`, which the wheel
installs as `tfhydra/conf/` (pyproject.toml maps one to the other, so there is no copy to keep in step).

A project that uses tfhydra keeps its own configs in its own `conf/`: the `--config-dir` given on the
command line, else `$TFHYDRA_CONFIG_DIR`, else `./conf` when the working directory has one. That
directory becomes Hydra's primary config directory and tfhydra's follows it on Hydra's search path (a
search path plugin, hydra_plugins/tfhydra_conf, Hydra's own mechanism for a library's configs: it adds
tfhydra's conf/ to the search path of any Hydra app in a process that imported tfhydra, after the app's
own), so for every config Hydra looks in the project first:
- `conf/model/tiny.yaml` adds the option `model=tiny` beside tfhydra's models (a file with the name of one
  of tfhydra's options replaces it);
- `conf/config.yaml` replaces tfhydra's two-line primary config. It starts with `defaults: [tfhydra, _self_]`
  (tfhydra's defaults, `conf/tfhydra.yaml`) and changes what it wants after: `- override model: tiny`
  in its defaults, `trainer: {epochs: 5}` below them.
Nothing here reads or imports the project's files: Hydra composes them like tfhydra's own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tfhydra.config.errors import ConfigError

_PACKAGED = Path(__file__).resolve().parents[1] / "conf"  # an installed wheel: tfhydra/conf/
CONFIG_DIR = _PACKAGED if _PACKAGED.is_dir() else _PACKAGED.parents[1] / "conf"  # or the checkout's conf/
ENV = "TFHYDRA_CONFIG_DIR"
_CONFIG_DIR_FLAGS = ("--config-dir", "-cd")


def project_config_dir(argv: Sequence[str] = (), cwd: Path | None = None) -> Path | None:
    """The project's config directory for this command line, or None when tfhydra's own configs are all
    there is (including a command run inside tfhydra's checkout, whose `./conf` is tfhydra's)."""
    named, key = _flag_value(argv), "--config-dir"
    if named is None and os.environ.get(ENV):
        named, key = os.environ[ENV], ENV
    if named is not None:
        path = Path(named).expanduser().resolve()
        if not path.is_dir():
            raise ConfigError(
                key, named, "a directory of config groups (e.g. conf/ holding model/tiny.yaml)", "no such directory"
            )
    else:
        path = ((cwd or Path.cwd()) / "conf").resolve()
        if not path.is_dir():
            return None
    return None if path == CONFIG_DIR.resolve() else path


def config_dir_flags(primary: str | Path | None, cwd: Path | None = None) -> list[str]:
    """`--config-dir <primary>` when a command must name the primary config directory a run was composed
    from (Hydra records it in hydra.runtime.config_sources) to compose it again: not for tfhydra's own, nor
    for the `./conf` the command finds by itself."""
    if primary is None:
        return []
    primary = Path(primary).resolve()
    if primary in (CONFIG_DIR.resolve(), ((cwd or Path.cwd()) / "conf").resolve()):
        return []
    return ["--config-dir", str(primary)]


def primary_config_dir(hydra_node) -> str | None:
    """The primary ("main") config directory a recorded hydra node was composed from."""
    for source in (hydra_node or {}).get("runtime", {}).get("config_sources", None) or []:
        if source.get("provider") == "main" and source.get("schema") == "file":
            return str(source.get("path"))
    return None


def import_from_working_directory() -> None:
    """The project's own modules named by its configs (`_target_: mymodels.build_tiny`) import from the
    working directory, as under `python -m`, but at the end of `sys.path`: they cannot shadow an installed
    package. A console script (`tfhydra-train`) has only its own bin/ directory there otherwise."""
    import sys

    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())


def without_config_dir_flags(argv: Sequence[str]) -> list[str]:
    """`argv` less `--config-dir DIR` (for commands that parse the rest themselves)."""
    rest, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _CONFIG_DIR_FLAGS:
            skip = True
        elif not arg.startswith(tuple(f + "=" for f in _CONFIG_DIR_FLAGS)):
            rest.append(arg)
    return rest


def _flag_value(argv: Sequence[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg in _CONFIG_DIR_FLAGS and i + 1 < len(argv):
            return argv[i + 1]
        for flag in _CONFIG_DIR_FLAGS:
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return None
