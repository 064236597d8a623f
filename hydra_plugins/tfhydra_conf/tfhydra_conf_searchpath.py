"""tfhydra's configs on Hydra's search path, after the app's own: how Hydra lets a library ship configs.

Hydra imports every module under `hydra_plugins` when it composes a config, in any app, so this one only
acts in a process that has imported tfhydra (`tfhydra-train`, `python train.py`, `tfhydra.compose`, a
user's own Hydra app that calls `tfhydra.run`): there it appends tfhydra's conf/ (tfhydra.config.project.CONFIG_DIR),
unless the app's primary directory is that conf/ already. A project's conf/ then adds options to tfhydra's
groups and may replace tfhydra's primary config (tfhydra/config/project.py). It imports nothing of tfhydra itself.

Called after Hydra's plugin scan, it is also when tfhydra's `hydra/launcher=submitit_slurm` (requeued at the time
limit by default) is stored over Hydra's own (hydra_plugins/tfhydra_launcher/slurm_schema.py says why then).
"""

import sys

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

from hydra_plugins.tfhydra_launcher.slurm_schema import store_preemptible_slurm


def store_tfhydra_schemas() -> None:
    """tfhydra's option schemas (`schema/<group>/<option>`, named by the defaults lists of its conf/), stored once a
    process composes with tfhydra's configs: the run plan's module holds them, TensorFlow-free."""
    import importlib

    importlib.import_module("tfhydra.runner.plan").store_schemas()


class TfhydraConfSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        project = sys.modules.get("tfhydra.config.project")
        if project is None:
            return
        store_preemptible_slurm()
        store_tfhydra_schemas()
        path = f"file://{project.CONFIG_DIR}"
        if all(element.path != path for element in search_path.get_path()):
            search_path.append(provider="tfhydra", path=path)
