"""The one reader of what a run or sweep directory says about itself (`.hydra/*.yaml`, `multirun.yaml`).

Those files are data, not code (tfhydra/trust/allowlist.py says what they may hold and why). The
readers here are the only way into them: evaluate and predict (`run_overrides`, `completed_run`),
`compression.from_run` (`completed_run`), the pre-flight's checks of an existing run or sweep directory
(`run_config` against the config about to run), `tfhydra-sweep resume` (`sweep_command`) and the sweep
summary (`plain_file`, which only displays). tests/trust/test_trust.py fails on any other module that opens
them. `trusted=True` (`--trust-run`, `--trust-sweep`) skips the allowlist, never the plain-YAML parse.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.config.registry import targets_in
from tfhydra.record.run_record import RecordError, Status, load_record
from tfhydra.record.rundir import RunPaths, SweepPaths
from tfhydra.trust.allowlist import (
    HYDRA_DROPPED,
    INSTANTIATE_KEYS,
    Untrusted,
    check_overrides,
    compose_trusted,
    read_plain_yaml,
)

RUN_FLAG, SWEEP_FLAG = "--trust-run", "--trust-sweep"
NEW_RUN = "a new hydra.run.dir"  # what lifts the gate for train.py: its own directory, not someone else's
SECTIONS = ("model", "data", "trainer", "compression")  # what makes a saved config a tfhydra run's

__all__ = [
    "RUN_FLAG",
    "SWEEP_FLAG",
    "NEW_RUN",
    "Untrusted",
    "run_overrides",
    "run_config",
    "completed_run",
    "sweep_command",
    "plain_file",
    "trusted_warning",
]


def run_overrides(run_dir: Path, primary: Path | None, flag: str = RUN_FLAG, trusted: bool = False) -> list[str]:
    """A run's `.hydra/overrides.yaml`: the overrides its command line gave, each through the allowlist."""
    path = RunPaths(run_dir).overrides
    saved = read_plain_yaml(path, run_dir, flag)
    if not isinstance(saved, list) or not all(isinstance(o, str) for o in saved):
        raise Untrusted(path, flag, "it is not a list of overrides", "the list of overrides Hydra writes")
    if not trusted:
        check_overrides(saved, path, flag, primary, multirun=False)
    return saved


def run_config(
    run_dir: Path, reference: DictConfig | None, flag: str = NEW_RUN, trusted: bool = False, primary: Path | None = None
) -> DictConfig:
    """A run's `.hydra/config.yaml` as plain data.

    With a `reference` (the config the user's own configs compose for that run), an interpolation or an
    instantiate key is taken only where the reference holds exactly the same at that path, so resolving
    the result runs nothing the user's configs would not. Without one the config comes back inert: every
    `${` is escaped, so reading a value returns its text and resolves nothing (its readers compare values
    and rebuild only built-in schemes from it)."""
    path = RunPaths(run_dir).config
    saved = read_plain_yaml(path, run_dir, flag)
    if not isinstance(saved, dict):
        raise Untrusted(path, flag, "it is not a YAML mapping", "the config Hydra writes")
    if trusted:
        return OmegaConf.create(saved)
    if reference is None:
        found = _untrusted_target(saved, own_targets(primary))
        if found is not None:
            raise Untrusted(path, flag, f"it holds {found[0]}: {found[1]}, which your own configs do not name")
        return OmegaConf.create(_inert(saved))
    expected = OmegaConf.to_container(reference, resolve=False)
    found = _unmatched(saved, expected if isinstance(expected, dict) else {})
    if found is not None:
        where, value = found
        raise Untrusted(
            path,
            flag,
            f"it holds {where}: {value}, which your own configs do not (an interpolation or "
            "a call would run when the config is read)",
        )
    return OmegaConf.create(saved)


def own_targets(primary: Path | None = None) -> set[str]:
    """Every `_target_` the trusted config directories (the project's and tfhydra's) name."""
    from tfhydra.config.project import CONFIG_DIR, project_config_dir

    found: set[str] = set()
    for directory in {d for d in (primary or project_config_dir(), CONFIG_DIR) if d is not None}:
        for path in Path(directory).rglob("*.yaml"):
            try:
                found |= targets_in(read_plain_yaml(path, directory, NEW_RUN))
            except ConfigError:
                continue  # the pre-flight names a broken file of the user's own configs
    return found


def _untrusted_target(saved: Any, own: set[str], where: str = "") -> tuple[str, Any] | None:
    """The first instantiate key of `saved` that is not a `_target_` of the user's own configs."""
    items = saved.items() if isinstance(saved, dict) else enumerate(saved) if isinstance(saved, list) else ()
    for key, value in items:
        path = f"{where}[{key}]" if isinstance(saved, list) else (f"{where}.{key}" if where else str(key))
        if isinstance(saved, dict) and key in INSTANTIATE_KEYS and not (key == "_target_" and value in own):
            return path, value
        found = _untrusted_target(value, own, path)
        if found is not None:
            return found
    return None


def _inert(value: Any) -> Any:
    """`value` with every `${` escaped (OmegaConf's `\\${`): its text, never an interpolation."""
    if isinstance(value, str):
        return value.replace("\\", "\\\\").replace("${", "\\${") if "${" in value else value
    if isinstance(value, dict):
        return {k: _inert(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_inert(v) for v in value]
    return value


def _unmatched(saved: Any, expected: Any, where: str = "") -> tuple[str, Any] | None:
    """The first (path, value) of `saved` that is an interpolation or an instantiate key not equal in `expected`."""
    if isinstance(saved, str):
        return (where, saved) if "${" in saved and saved != expected else None
    if isinstance(saved, dict):
        for key, value in saved.items():
            path = f"{where}.{key}" if where else key
            sub = expected.get(key) if isinstance(expected, dict) else None
            if key == "hydra" and not where:
                continue  # Hydra's own node: never composed from here (config.yaml has none)
            if key in INSTANTIATE_KEYS and value != sub:
                return path, value
            found = _unmatched(value, sub, path)
            if found is not None:
                return found
    if isinstance(saved, list):
        for i, value in enumerate(saved):
            sub = expected[i] if isinstance(expected, list) and i < len(expected) else None
            found = _unmatched(value, sub, f"{where}[{i}]")
            if found is not None:
                return found
    return None


def completed_run(
    run: Path,
    key: str,
    value: Any,
    accepted: str,
    needs: Iterable[str] = (),
    primary: Path | None = None,
    flag: str = RUN_FLAG,
    trusted: bool = False,
    composed: bool = True,
) -> DictConfig:
    """The saved config of the completed run in `run`, checked before anything uses the run: a finished run
    (`metrics.json` status completed) with the files `needs` names (relative to it), and a config that is a
    tfhydra run's. `composed`: the run's overrides pass the allowlist and its config holds nothing their
    composition from the user's configs does not (evaluate, which composes the run again); else the config
    comes back inert (`compression.from_run`, which compares it and rebuilds built-in schemes only). Any
    problem is one ConfigError naming `key`/`value` and `accepted` (or the file, for what the allowlist refuses)."""
    run = Path(run)
    if not run.is_dir():
        raise ConfigError(key, value, accepted, "no such directory")
    paths = RunPaths(run)
    try:
        status = load_record(run).status
    except OSError:
        status = None
    except RecordError:
        raise ConfigError(key, value, accepted, "not a completed run (its metrics.json cannot be read)") from None
    if status != Status.COMPLETED:
        raise ConfigError(key, value, accepted, f"not a completed run (status: {status})")
    wanted = (paths.config, paths.overrides) if composed else (paths.config,)
    missing = [name for name in (*map(paths.relative, wanted), *needs) if not (run / name).exists()]
    if missing:
        raise ConfigError(key, value, accepted, f"it has no {', '.join(missing)}")
    reference = None
    if composed and not trusted:
        reference = _compose_or_refuse(primary, run_overrides(run, primary, flag), paths.overrides, flag)
    config = run_config(run, reference, flag, trusted, primary)
    if not all(isinstance(config.get(s), DictConfig) for s in SECTIONS):
        raise ConfigError(
            key,
            value,
            accepted,
            "its .hydra/config.yaml is not a tfhydra run config (no model, data, trainer and compression sections)",
        )
    return config


def _compose_or_refuse(primary: Path | None, overrides: list[str], path: Path, flag: str) -> DictConfig:
    try:
        return compose_trusted(primary, overrides)
    except Exception as error:  # noqa: BLE001  (Hydra's composition errors: the run is not of these configs)
        raise Untrusted(
            path,
            flag,
            f"your config directories cannot compose it ({str(error).splitlines()[0]})",
            "a run made with the configs of the project you run the command from",
        ) from None


@dataclass(frozen=True)
class SweepCommand:
    task: list[str]  # the sweep's own overrides (what the user typed)
    hydra: list[str]  # the hydra settings of this resume: the user's own (trusted: the file's, then the user's)
    recorded_config_dir: str | None  # the primary config directory the file says it was made with (trusted only)


def sweep_command(
    sweep_dir: Path, primary: Path | None, trusted: bool = False, given: Sequence[str] = ()
) -> SweepCommand:
    """What `multirun.yaml` says the sweep's command was: its task overrides, each through the allowlist.

    Its hydra settings are never taken from the file (the launcher, the sweeper, their keys, the jobs'
    environment, callbacks: each can run code or send work elsewhere); `given` are the ones the user typed
    after the directory. A setting the file records and the user did not give again is refused by name, so a
    sweep that ran under SLURM does not quietly resume on this machine, nor the other way round."""
    from tfhydra.config.project import primary_config_dir

    path = SweepPaths(sweep_dir).multirun
    if not path.is_file():
        raise ConfigError(
            str(sweep_dir),
            None,
            "a sweep directory with the multirun.yaml its command wrote",
            "it has no multirun.yaml",
        )
    recorded = read_plain_yaml(path, sweep_dir, SWEEP_FLAG)
    hydra = recorded.get("hydra") if isinstance(recorded, dict) else None
    overrides = hydra.get("overrides") if isinstance(hydra, dict) else None
    if not isinstance(overrides, dict):
        raise Untrusted(path, SWEEP_FLAG, "it has no hydra.overrides", "the multirun.yaml Hydra writes")
    task, hydra_lines = overrides.get("task") or [], overrides.get("hydra") or []
    if (
        not isinstance(task, list)
        or not isinstance(hydra_lines, list)
        or not all(isinstance(o, str) for o in task + hydra_lines)
    ):
        raise Untrusted(
            path, SWEEP_FLAG, "its hydra.overrides are not lists of overrides", "the multirun.yaml Hydra writes"
        )
    kept = [o for o in hydra_lines if not _setting_key(o).startswith(HYDRA_DROPPED)]
    if trusted:
        return SweepCommand(list(task), kept + list(given), primary_config_dir(hydra))
    hydra_task = next((o for o in task if _setting_key(o).startswith("hydra")), None)
    if hydra_task is not None:
        raise Untrusted(
            path,
            SWEEP_FLAG,
            f"its task overrides hold {hydra_task}, a hydra setting (Hydra records "
            "those under hydra.overrides.hydra, and resume takes them only from its own command line)",
        )
    check_overrides(task, path, SWEEP_FLAG, primary, multirun=True)
    unanswered = _not_given_again(kept, given)
    if unanswered:
        raise Untrusted(
            path,
            SWEEP_FLAG,
            f"it records hydra settings that resume takes only from its own command line: {', '.join(unanswered)}",
            "the settings you want, given after the directory "
            f"(tfhydra-sweep resume {sweep_dir} {' '.join(f'{k}=...' for k in unanswered[:2])}), or "
            f"{SWEEP_FLAG} if you trust whoever wrote that directory",
        )
    return SweepCommand(list(task), list(given), None)


def _setting_key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def _not_given_again(recorded: Sequence[str], given: Sequence[str]) -> list[str]:
    """The keys of `recorded` hydra settings that `given` neither sets nor replaces (a launcher's or sweeper's keys
    are answered by choosing that group again: `hydra/launcher=tfhydra` answers `hydra.launcher.partition`)."""
    typed = {_setting_key(o) for o in given}
    groups = {k for k in typed if "/" in k}
    unanswered = []
    for key in dict.fromkeys(_setting_key(o) for o in recorded):
        group = "/".join(key.split(".")[:2]) if key.count(".") >= 1 else key
        if key not in typed and group not in groups and key not in unanswered:
            unanswered.append(key)
    return unanswered


def plain_file(path: Path, root: Path) -> Any:
    """A YAML file of a run or sweep directory as plain data for display (the summary), None if it is not
    plain YAML inside `root`: nothing is composed, resolved or run from it."""
    try:
        return read_plain_yaml(path, root, SWEEP_FLAG)
    except ConfigError:
        return None


def trusted_warning(flag: str, directory: Path) -> str:
    """The line a command prints when the user lifted the gate: it is in the output and in what it records."""
    return (
        f"Warning: {flag}: {directory} is trusted: its overrides, interpolations and _target_ nodes run as "
        "they say, and its recorded config directory is used"
    )
