"""What a compression config means before anything trains: its checks and its phases. No TensorFlow.

- `trainer.finetune.head_epochs=H` (recipe=finetune): the first H epochs train the head alone, the base frozen
  (`phases/0_head`); every later phase trains at `optimizer.lr x trainer.finetune.lr_factor`.
- `compression.start_epoch=N`: the first N epochs train the model uncompressed (`phases/0_pretrain`; after a
  head phase, the epochs from H to N).
- A collaborative scheme (prune_quantize, cluster_quantize) first trains its float scheme (prune,
  cluster) for the epochs before the last `compression.quantize_epochs` (`phases/<i>_prune`).
- `compression.from_run=<dir>`: the first of these, or the scheme itself, starts from that
  completed run's trained model.

An earlier phase is a run like any other (checkpoints, TensorBoard, metrics.json,
`.hydra/config.yaml`; no export), so an interrupted run continues inside the phase it was in and
skips the completed ones, and a phase directory can be a later run's `compression.from_run`. The
scheme's own phase is the run itself. The run plan (tfhydra/runner/plan.py) gathers `check_compression`,
and `plan_phases`;
tfhydra/runner/job.py runs the phases in order with `phase_config`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import cast

from omegaconf import DictConfig, OmegaConf, open_dict

from tfhydra.compression.checks_models import check_model_support
from tfhydra.config.contracts import PhasePlan
from tfhydra.config.errors import ConfigError
from tfhydra.config.schema import Rule, choice, config_differences, integer, is_block, is_run_dir, number, optional
from tfhydra.record.rundir import RunPaths, phase_directory

# Collaborative schemes: this float scheme trains first, in its own phase, then the scheme itself
# trains quantization-aware for `compression.quantize_epochs`, keeping its property.
TRAINED_FIRST = {"prune_quantize": "prune", "cluster_quantize": "cluster"}
QUANTIZATION_AWARE = {"quantize", "prune_quantize", "cluster_quantize"}  # export int8 from learned ranges
SHARED_KEYS = ("start_epoch", "from_run")  # conf/tfhydra.yaml's compression section: read here, not by schemes
FROM_RUN_SCHEMES = ("none", "prune", "cluster")  # built-in float schemes: what load_run_model may rebuild
FROM_RUN_ACCEPTED = (
    "the directory of a completed run (metrics.json with status completed, .hydra/config.yaml, "
    "checkpoints/last.weights.h5)"
)


def plan_phases(cfg: DictConfig) -> list[PhasePlan]:
    """The phases of a run in order; the last one is the scheme's own, trained in the run directory itself.

    `trainer.finetune.head_epochs=H` (recipe=finetune) puts a head phase first (model.freeze=base, uncompressed);
    every phase after it trains at optimizer.lr x trainer.finetune.lr_factor. The epochs are the run's: the
    head's count towards compression.start_epoch, so the model trains uncompressed for max(H, start_epoch)."""
    node, head = cfg.compression, cfg.trainer.finetune.head_epochs
    scheme, uncompressed = node.get("name") or "scheme", max(node.start_epoch, head)
    left = cfg.trainer.epochs - uncompressed
    later = {"optimizer.lr": cfg.optimizer.lr * cfg.trainer.finetune.lr_factor} if head else {}
    phases = [("head", {"name": "none"}, head, {"model.freeze": "base", "optimizer.lr": cfg.optimizer.lr})]
    phases = phases if head else []
    if uncompressed > head:
        phases.append(("pretrain", {"name": "none"}, uncompressed - head, later))
    first = TRAINED_FIRST.get(scheme)
    if first and left > node.quantize_epochs:
        phases.append((first, {**_plain(node), "name": first}, left - node.quantize_epochs, later))
        left = node.quantize_epochs
    planned = [
        PhasePlan(i, label, epochs, compression, phase_directory(i, label), overrides)
        for i, (label, compression, epochs, overrides) in enumerate(phases)
    ]
    label = "finetune" if head and scheme == "none" else scheme
    return planned + [PhasePlan(len(planned), label, left, _plain(node), None, later)]


def phase_config(cfg: DictConfig, phase: PhasePlan, start: str | None, formats: list[str] | None = None) -> DictConfig:
    """The config one phase trains with: its compression node, epochs and overrides, starting from `start` (a run
    directory)."""
    config = copy.deepcopy(cfg)
    with open_dict(config):
        config.compression = OmegaConf.merge(phase.compression, {"start_epoch": 0, "from_run": start})
        config.trainer.epochs = phase.epochs
        config.trainer.finetune.head_epochs = 0  # a phase is one stage: the plan has split the run
        for key, value in phase.overrides.items():
            OmegaConf.update(config, key, value)
        if formats is not None:
            config.export.formats = formats
    return config


def _plain(node: DictConfig) -> dict:
    return cast(dict, OmegaConf.to_container(node, resolve=True))  # a DictConfig gives a dict


def check_compression(cfg: DictConfig) -> None:
    """The compression mistakes that need more than one key, found before anything trains."""
    node = cfg.compression
    scheme = node.get("name") or node.get("_target_")
    precision = cfg.precision.get("name")
    if scheme != "none" and cfg.keras != 2:
        raise ConfigError(
            "keras",
            cfg.keras,
            f"keras=2 with compression={scheme}, or compression=none",
            "the Model Optimization Toolkit supports no Keras 3 (tensorflow/model-optimization#1119): compression "
            "runs on tf_keras only",
        )
    if scheme != "none" and precision != "fp32":
        raise ConfigError(
            "precision",
            precision,
            f"precision=fp32 with compression={scheme}, or compression=none",
            "the Model Optimization Toolkit does not support float16/bfloat16 policies; compression "
            "trains in float32 only",
        )
    if node.start_epoch >= cfg.trainer.epochs:
        raise ConfigError(
            "compression.start_epoch",
            node.start_epoch,
            f"an integer below trainer.epochs ({cfg.trainer.epochs})",
            "no epochs left to train compressed",
        )
    left = cfg.trainer.epochs - max(node.start_epoch, cfg.trainer.finetune.head_epochs)
    if scheme in TRAINED_FIRST and node.quantize_epochs > left:
        raise ConfigError(
            "compression.quantize_epochs",
            node.quantize_epochs,
            f"at most {left} (trainer.epochs - compression.start_epoch or trainer.finetune.head_epochs)",
            "more epochs than the run trains",
        )
    check_tflite_export(cfg, scheme)
    if node.from_run:
        check_run(Path(node.from_run).expanduser(), cfg.model)


def check_tflite_export(cfg: DictConfig, scheme: str) -> None:
    """The TFLite export's quantization against the compression scheme: a quantization-aware scheme's file is int8
    from its learned ranges; a float model's int8 file needs calibration data, and int8 input/output an int8 model."""
    tflite = cfg.export.get("tflite") or {}
    if "tflite" in cfg.export.formats and tflite.get("quantization") == "float16" and scheme in QUANTIZATION_AWARE:
        raise ConfigError(
            "export.tflite.quantization",
            "float16",
            "none or int8 (or compression=none|prune|cluster)",
            f"compression={scheme} trains for int8: its TFLite file is int8 from the learned ranges",
        )
    if (
        "tflite" in cfg.export.formats
        and tflite.get("quantization") == "int8"
        and tflite.get("calibration_samples") == 0
        and scheme not in QUANTIZATION_AWARE
    ):
        raise ConfigError(
            "export.tflite.calibration_samples",
            0,
            "a number of training examples >= 1 (e.g. 200), or a "
            "quantization-aware compression (quantize, prune_quantize, cluster_quantize)",
            "int8 export of a float model needs data to calibrate its activation ranges",
        )
    if (
        "tflite" in cfg.export.formats
        and tflite.get("integer_io")
        and tflite.get("quantization") != "int8"
        and scheme not in QUANTIZATION_AWARE
    ):
        raise ConfigError(
            "export.tflite.integer_io",
            True,
            "false, or export.tflite.quantization=int8 (or a quantization-aware compression)",
            "int8 input and output need an int8 model",
        )


def check_run(run: Path, cfg_model: DictConfig) -> None:
    """`compression.from_run`: a completed run of the same model config whose trained model is float."""
    saved = saved_run_config(run)
    # which layers trained and where they started do not change the weights' layout: a head phase may be continued
    differing = [
        d for d in config_differences(saved.model, cfg_model, "model.") if d not in ("model.freeze", "model.weights")
    ]
    if differing:
        raise ConfigError(
            "compression.from_run",
            str(run),
            "a run of the same model config",
            f"its model config differs in {', '.join(differing)}",
        )


def saved_run_config(run: Path, own_phase: bool = False) -> DictConfig:
    """The saved config of a completed run whose trained model `load_run_model` can rebuild.

    That config names the scheme to rebuild, so only built-in float schemes are taken: a `_target_`
    there would import and call whatever the run directory names. It is read through the trust boundary
    (tfhydra/trust) and comes back inert: an interpolation in it is text, never resolved; and the scheme's
    settings must be plain values. `own_phase`: `run` is an earlier phase of the run being trained (written by this
    run from the user's own command line, so its callbacks and their `_target_`s are the user's, not a stranger's).
    """
    from tfhydra.trust.readers import completed_run

    paths = RunPaths(run)
    saved = completed_run(
        run,
        "compression.from_run",
        str(run),
        FROM_RUN_ACCEPTED,
        needs=[paths.relative(paths.last_weights)],
        composed=False,
        flag="a compression.from_run of your own (there is no flag to trust another's)",
        trusted=own_phase,
    )
    scheme = saved.compression.get("name")
    if scheme in QUANTIZATION_AWARE:
        raise ConfigError(
            "compression.from_run",
            str(run),
            "a run whose compression is none, prune or cluster",
            f"its model was trained quantization-aware (compression={scheme})",
        )
    if "_target_" in saved.compression or scheme not in FROM_RUN_SCHEMES:
        shown = scheme or saved.compression.get("_target_")
        raise ConfigError(
            "compression.from_run",
            str(run),
            "a run whose compression is none, prune or cluster",
            f"its compression is {shown}, which is not rebuilt from a run directory",
        )
    for key, value in cast(dict, OmegaConf.to_container(saved.compression, resolve=False)).items():
        if isinstance(value, dict) or "${" in str(value):
            raise ConfigError(
                "compression.from_run",
                str(run),
                "a run whose compression settings are plain values",
                f"its compression.{key} is {value}",
            )
    return saved


CHECKS = (check_compression, check_model_support)


# The compression section's ranges and choices, read by the schema's checks (tfhydra/config/schema.py).
RULES: dict[str, Rule] = {
    "compression.start_epoch": integer(0),
    "compression.from_run": Rule("null or the directory of a completed run", is_run_dir, refusal="no such directory"),
    "compression.schedule": choice("polynomial", "constant"),
    "compression.target_sparsity": number(0, 1, low_open=False),
    "compression.initial_sparsity": number(0, 1, low_open=False),
    "compression.begin_step": optional(integer(0)),
    "compression.end_step": optional(integer(1)),
    "compression.begin_epoch": optional(number(0, low_open=False)),
    "compression.end_epoch": optional(number(0)),
    "compression.frequency": integer(1),
    "compression.block_size": optional(Rule("[rows, cols], integers >= 1", is_block)),
    "compression.number_of_clusters": integer(2),
    "compression.centroids_init": choice("kmeans_plus_plus", "linear", "density_based", "random"),
    "compression.quantize_epochs": integer(1),
}
