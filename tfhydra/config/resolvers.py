"""The OmegaConf resolvers conf/ names, registered when tfhydra is imported (the ground floor).

conf/task/ names its metrics in the run's Keras with `${tfhydra.keras:metrics.AUC}`. conf/tfhydra.yaml names a
sweep job's directory with `${tfhydra.job_dirname:...}` (and the Optuna sweeper its default direction with
`${tfhydra.direction:...}`), resolved in whichever process
composes the job (the command, a launcher's worker, `tfhydra.compose`, a test), so the resolver must exist as soon
as tfhydra does. Registering it imports only OmegaConf and the Hydra door (tfhydra/config/hydra_api.py, which
imports nothing at its top): tfhydra/config/jobnames.py, which knows how a job directory is named, is imported
when a name is first resolved.
"""

from __future__ import annotations

from omegaconf import OmegaConf


def job_dirname(overrides, _root_) -> str:
    """`${tfhydra.job_dirname:${hydra.overrides.task}}`: the swept overrides of the job `_root_` composes."""
    from tfhydra.config.jobnames import job_dirname as named

    return named(list(overrides), hydra_node=_root_.get("hydra"))


def search_direction(mode: str) -> str:
    """`${tfhydra.direction:${task.monitor_mode}}`: Optuna's word (`maximize`, `minimize`) for a monitor mode, so a
    search's default direction is the task's (conf/hydra/sweeper/tfhydra_optuna.yaml); another value is left for
    the pre-flight to name."""
    return {"max": "maximize", "min": "minimize"}.get(str(mode), str(mode))


def keras_path(name: str, _root_) -> str:
    """`${tfhydra.keras:metrics.AUC}`: the dotted name in the run's Keras, `tf_keras.metrics.AUC` under keras=2 and
    `keras.metrics.AUC` under keras=3 (docs/keras.md), so one conf/ option's `_target_` serves both."""
    return f"{'tf_keras' if _root_.keras == 2 else 'keras'}.{name}"


def register_resolvers() -> None:
    """Each resolver once per process (a job's process resolves its own config): under OmegaConf 2.3's name or
    2.4's, whichever this OmegaConf has (tfhydra/config/hydra_api.py)."""
    from tfhydra.config.hydra_api import register_resolver

    for name, resolver in (
        ("tfhydra.job_dirname", job_dirname),
        ("tfhydra.direction", search_direction),
        ("tfhydra.keras", keras_path),
    ):
        if not OmegaConf.has_resolver(name):
            register_resolver(name, resolver)
