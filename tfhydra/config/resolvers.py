"""The OmegaConf resolvers conf/ names, registered when tfhydra is imported (the ground floor).

conf/task/ names its metrics in the run's Keras with `${tfhydra.keras:metrics.AUC}`. conf/tfhydra.yaml names a
sweep job's directory with `${tfhydra.job_dirname:...}`, resolved in whichever process
composes the job (the command, a launcher's worker, `tfhydra.compose`, a test), so the resolver must exist as soon
as tfhydra does. Registering it imports only OmegaConf: tfhydra/config/jobnames.py, which knows how a job
directory is named, is imported when a name is first resolved.
"""

from __future__ import annotations

from omegaconf import OmegaConf


def job_dirname(overrides, _root_) -> str:
    """`${tfhydra.job_dirname:${hydra.overrides.task}}`: the swept overrides of the job `_root_` composes."""
    from tfhydra.config.jobnames import job_dirname as named

    return named(list(overrides), hydra_node=_root_.get("hydra"))


def keras_path(name: str, _root_) -> str:
    """`${tfhydra.keras:metrics.AUC}`: the dotted name in the run's Keras, `tf_keras.metrics.AUC` under keras=2 and
    `keras.metrics.AUC` under keras=3 (docs/keras.md), so one conf/ option's `_target_` serves both."""
    return f"{'tf_keras' if _root_.keras == 2 else 'keras'}.{name}"


def register_resolvers() -> None:
    if not OmegaConf.has_resolver("tfhydra.job_dirname"):  # resolved in the job's process: its own config names it
        OmegaConf.register_new_resolver("tfhydra.job_dirname", job_dirname)
    if not OmegaConf.has_resolver("tfhydra.keras"):
        OmegaConf.register_new_resolver("tfhydra.keras", keras_path)
