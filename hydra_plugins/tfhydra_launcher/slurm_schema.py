"""`hydra/launcher=submitit_slurm` with what a preemptible cluster needs by default (docs/distribute.md,
"Pre-emption and time limits").

SLURM sends SIGUSR2 `signal_delay_s` seconds before a job's time limit, and when it pre-empts the job; tfhydra
saves the job's state and hands the signal to submitit, which requeues the job (`scontrol requeue`), and the
requeued job resumes from its last epoch. Hydra's launcher requeues at the time limit only `max_num_timeout`
times, 0 by default, so a job that reaches its limit is lost; here it is 3. (submitit counts a signal as the time
limit whenever the job has run 80 % of it, or `timeout_min` <= 10: a pre-emption then is a timeout too.)

The config replaces Hydra's own entry of the same name in the ConfigStore. Hydra's plugin scan executes every
module under `hydra_plugins` again, in the order of the path entries, so a store made at import could be
overwritten by the plugin's own; tfhydra's search path plugin (hydra_plugins/tfhydra_conf), which Hydra calls
after the scan whenever it composes in a process that imported tfhydra, stores it then. A YAML file of that name
cannot do it: it makes Hydra match it to the schema, which is deprecated since Hydra 1.1. Without
hydra-submitit-launcher (the `slurm` extra) nothing is stored, and the pre-flight names the extra. Hydra 1.4 warns
when a store replaces an entry without `replace=True` (an error in 1.5), a keyword Hydra 1.3 does not have.
"""

import inspect
from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore

try:
    from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf
except ImportError:  # the slurm extra is not installed
    SlurmQueueConf = None

REQUEUES_AT_THE_TIME_LIMIT = 3

if SlurmQueueConf is not None:  # a class of the module (not of a function), so a config holding it pickles

    @dataclass
    class PreemptibleSlurmQueueConf(SlurmQueueConf):
        max_num_timeout: int = REQUEUES_AT_THE_TIME_LIMIT  # hydra.launcher.max_num_timeout=0 turns it off


def store_preemptible_slurm() -> None:
    """Store `hydra/launcher=submitit_slurm` with the requeue defaults over Hydra's own entry (idempotent)."""
    if SlurmQueueConf is not None:
        store = ConfigStore.instance().store
        replacing: dict[str, Any] = {"replace": True} if "replace" in inspect.signature(store).parameters else {}
        node = PreemptibleSlurmQueueConf
        store(group="hydra/launcher", name="submitit_slurm", node=node, provider="tfhydra", **replacing)
