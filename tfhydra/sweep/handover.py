"""What a job needs to know about its sweep, carried to every launcher.

`hydra.job.override_dirname` lists every override of a job (the fixed ones too) and
lets a value containing `/` create nested folders. Job directories are instead named
`<num>_<swept overrides>`, e.g. `3_optimizer.lr=5e-4,data.batch_size=64`, with
characters that file systems or shells mishandle replaced by `_` (tfhydra/config/jobnames.py: the config's
resolver names jobs).

Which keys are swept is known to the process that launched the sweep (its command line
and `hydra.sweeper.params`). A job run by another launcher lives in a process whose
`sys.argv` is not the user's (a joblib or submitit worker), on a machine that may not share
the launching shell's environment (a SLURM node, a Ray worker started before the sweep). So
the sweep callback (tfhydra/sweep/callback.py) writes the swept keys into every job's config,
as `hydra.job.env_set.TFHYDRA_SWEPT_KEYS` (`handover_overrides`): Hydra composes each job from
the sweep's `hydra.overrides.hydra` under every launcher, and sets the variable while the job
runs, for the job's own code.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable

from tfhydra.config.jobnames import SWEPT_KEYS_ENV
from tfhydra.platform.command import COMMAND_ENV, command_handover


def handover_overrides(swept: Iterable[str], sweep_dir: str, launcher: str = "none") -> list[str]:
    """Hydra overrides that carry what each job must know about its sweep to every launcher (Hydra composes
    every job again from the sweep's `hydra.overrides.hydra`): the swept keys, the command line the user typed (a
    launcher's job runs in a process whose `sys.argv` is the launcher's), and under Ray's launcher
    (`launcher`: its kind, tfhydra/sweep/kind.py) an absolute sweep directory, because a Ray worker runs in the
    directory `ray start` ran in; the others run their jobs in the launching directory."""
    overrides = [f"++hydra.job.env_set.{SWEPT_KEYS_ENV}={override_quoted(json.dumps(sorted(swept)))}"]
    overrides.append(f"++hydra.job.env_set.{COMMAND_ENV}={override_quoted(command_handover())}")  # the `command`
    if launcher == "ray" and not os.path.isabs(sweep_dir):
        overrides.append(f"hydra.sweep.dir={override_quoted(os.path.abspath(sweep_dir))}")
    return overrides


def override_quoted(text: str) -> str:
    """`text` as one quoted value in Hydra's override grammar: quotes escaped, and the backslashes just before
    a quote or the closing quote doubled (Hydra unescapes backslashes only there)."""
    return "'" + re.sub(r"(\\*)('|$)", lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), text) + "'"
