"""Multirun helpers: job directory names made of the swept overrides.

`hydra.job.override_dirname` lists every override of a job (the fixed ones too) and
lets a value containing `/` create nested folders. Job directories are instead named
`<num>_<swept overrides>`, e.g. `3_optimizer.lr=5e-4,data.batch_size=64`, with
characters that file systems or shells mishandle replaced by `_`.
"""
from __future__ import annotations

import re
import sys
from typing import Sequence

_UNSAFE = re.compile(r"[/\\:*?\"<>|\s]")
MAX_NAME = 180  # leaves room under the usual 255-byte limit for the job number


def swept_keys(argv: Sequence[str]) -> set[str]:
    """Keys whose value on the command line is a sweep (`a=1,2`, `range(...)`, `glob(...)`)."""
    from hydra._internal.utils import get_args_parser
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args, _ = get_args_parser().parse_known_args(list(argv))
    try:
        parsed = OverridesParser.create().parse_overrides(list(args.overrides))
    except Exception:  # malformed overrides are reported by the pre-flight check, not here
        return set()
    return {o.get_key_element() for o in parsed if o.is_sweep_override()}


def job_dirname(task_overrides: Sequence[str], argv: Sequence[str] | None = None) -> str:
    swept = swept_keys(sys.argv[1:] if argv is None else argv)
    chosen = [o for o in task_overrides if o.split("=", 1)[0] in swept] or list(task_overrides)
    return _UNSAFE.sub("_", ",".join(chosen))[:MAX_NAME]


def register_resolvers() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("tfhydra.job_dirname"):
        OmegaConf.register_new_resolver("tfhydra.job_dirname", lambda overrides: job_dirname(list(overrides)))
