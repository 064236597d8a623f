"""A sweep job's directory name, `<num>_<swept overrides>` (conf/tfhydra.yaml's hydra.sweep.subdir), and the
swept keys it is made of.

`hydra.job.override_dirname` lists every override of a job (the fixed ones too) and lets a value containing `/`
create nested folders; tfhydra names a job by its swept overrides only, with the characters file systems or
shells mishandle replaced by `_`. The name is read from a job's config (its overrides, its `hydra` node), so it
lives with the config on the ground floor: the `${tfhydra.job_dirname:...}` resolver (resolvers.py) resolves it
in whichever process composes a job, and the sweep room (tfhydra/sweep/) hands the swept keys to every launcher.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Sequence

_UNSAFE = re.compile(r"[/\\:*?\"<>|\s]")
MAX_NAME = 180  # leaves room under the usual 255-byte limit for the job number
SWEPT_KEYS_ENV = (
    "TFHYDRA_SWEPT_KEYS"  # JSON list of swept keys: a job's hydra.job.env_set, written by the sweep callback
)


def swept_keys(argv: Sequence[str]) -> set[str]:
    """Keys whose value on the command line is a sweep (`a=1,2`, `range(...)`, `glob(...)`)."""
    from tfhydra.config.hydra_api import parse_command_line

    args, _ = parse_command_line(argv)
    return sweep_override_keys(args.overrides)


def sweep_override_keys(overrides: Iterable[str]) -> set[str]:
    """The keys of the overrides that are sweeps, from Hydra's own parser."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # noqa: BLE001  (malformed overrides are reported by the pre-flight check, not here)
        return set()
    return {o.get_key_element() for o in parsed if o.is_sweep_override()}


def current_swept_keys(argv: Sequence[str] | None = None, hydra_node=None) -> set[str]:
    """The swept keys of the running sweep: those the sweep callback wrote into the job's config
    (`recorded_swept_keys`), else those of the command line (`argv`, else `sys.argv`)."""
    recorded = recorded_swept_keys(hydra_node) if argv is None else None
    return recorded if recorded is not None else swept_keys(sys.argv[1:] if argv is None else argv)


def recorded_swept_keys(hydra_node=None) -> set[str] | None:
    """`hydra.job.env_set.TFHYDRA_SWEPT_KEYS` of a job's `hydra` node (by default the running job's), else the
    variable in the environment (Hydra sets it while the job runs); None when neither holds a JSON list."""
    from omegaconf import OmegaConf

    if hydra_node is None:
        from hydra.core.hydra_config import HydraConfig

        hydra_node = HydraConfig.get() if HydraConfig.initialized() else None
    recorded = OmegaConf.select(hydra_node, f"job.env_set.{SWEPT_KEYS_ENV}", default=None) if hydra_node else None
    for text in (recorded, os.environ.get(SWEPT_KEYS_ENV)):
        try:
            keys = json.loads(text) if text else None
        except ValueError:
            continue
        if isinstance(keys, list):
            return set(keys)
    return None


def job_dirname(
    task_overrides: Sequence[str], argv: Sequence[str] | None = None, swept: set[str] | None = None, hydra_node=None
) -> str:
    """`<swept overrides>` of a job's directory `<num>_<swept overrides>` (conf/tfhydra.yaml's hydra.sweep.subdir)."""
    swept = current_swept_keys(argv, hydra_node) if swept is None else swept
    chosen = [o for o in task_overrides if o.split("=", 1)[0] in swept] or list(task_overrides)
    return safe_name(",".join(chosen))


def safe_name(text: str) -> str:
    return _UNSAFE.sub("_", text)[:MAX_NAME]
