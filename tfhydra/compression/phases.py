"""What trains before the compression scheme, each part a complete run of its own under `<run>/phases/`.

- `compression.start_epoch=N`: the first N epochs train the model uncompressed (`phases/0_pretrain`).
- A collaborative scheme (prune_quantize, cluster_quantize) first trains its float scheme (prune,
  cluster) for the epochs before the last `compression.quantize_epochs` (`phases/<i>_prune`).
- `compression.from_run=<dir>`: the first of these, or the scheme itself, starts from that
  completed run's trained model.

A phase is a run like any other (checkpoints, TensorBoard, metrics.json, `.hydra/config.yaml`;
no export), so an interrupted run continues inside the phase it was in and skips the completed
ones, and a phase directory can be a later run's `compression.from_run`. The scheme's own phase
is the run itself: `prepare_phases` returns its config, with `trainer.epochs` reduced to its
share and `compression.from_run` at the last earlier phase.
"""
from __future__ import annotations

import copy
import json
import logging
import shutil
from pathlib import Path
from typing import Callable

import tf_keras as keras
from omegaconf import DictConfig, OmegaConf, open_dict

from tfhydra.cli import config_differences
from tfhydra.compression import Phase, build_scheme
from tfhydra.compression.schemes import QUANTIZATION_AWARE, TRAINED_FIRST
from tfhydra.errors import ConfigError
from tfhydra.report import completed_run_config, run_status

log = logging.getLogger("tfhydra")


def prepare_phases(cfg: DictConfig, run_dir: Path, run_job: Callable[[DictConfig, Path], float]) -> DictConfig:
    """Check the compression config, run the phases before the scheme's, return the config of the scheme's phase."""
    check_compression(cfg)
    phases = plan_phases(cfg)
    start = cfg.compression.from_run
    if len(phases) > 1 and not cfg.trainer.resume:
        shutil.rmtree(run_dir / "phases", ignore_errors=True)
    for index, (label, node, epochs) in enumerate(phases[:-1]):
        phase_dir = run_dir / "phases" / f"{index}_{label}"
        if run_status(phase_dir) != "completed":
            log.info("phase %d (%s): %d epoch(s) in %s", index, label, epochs, phase_dir)
            phase_cfg = phase_config(cfg, node, epochs, start, formats=[])
            (phase_dir / ".hydra").mkdir(parents=True, exist_ok=True)  # what from_run reads back
            OmegaConf.save(phase_cfg, phase_dir / ".hydra" / "config.yaml")
            run_job(phase_cfg, phase_dir)
            if run_status(phase_dir) != "completed":
                raise RuntimeError(f"phase {phase_dir} ended {run_status(phase_dir)}: nothing to continue from")
        start = str(phase_dir)
    label, node, epochs = phases[-1]
    if len(phases) > 1:
        log.info("phase %d (%s): %d epoch(s) in %s", len(phases) - 1, label, epochs, run_dir)
    return phase_config(cfg, node, epochs, start)


def plan_phases(cfg: DictConfig) -> list[tuple[str, DictConfig, int]]:
    """(label, compression node, epochs) of each phase; the last one is the scheme's own."""
    node = cfg.compression
    scheme, left = node.get("name") or "scheme", cfg.trainer.epochs - node.start_epoch
    phases = [("pretrain", OmegaConf.create({"name": "none"}), node.start_epoch)] if node.start_epoch else []
    first = TRAINED_FIRST.get(scheme)
    if first and left > node.quantize_epochs:
        phases.append((first, OmegaConf.merge(node, {"name": first}), left - node.quantize_epochs))
        left = node.quantize_epochs
    return phases + [(scheme, node, left)]


def phase_config(cfg: DictConfig, node: DictConfig, epochs: int, start: str | None,
                 formats: list[str] | None = None) -> DictConfig:
    phase = copy.deepcopy(cfg)
    with open_dict(phase):
        phase.compression = OmegaConf.merge(node, {"start_epoch": 0, "from_run": start})
        phase.trainer.epochs = epochs
        if formats is not None:
            phase.export.formats = formats
    return phase


def check_compression(cfg: DictConfig) -> None:
    """The compression mistakes that need more than one key, found before anything trains."""
    node = cfg.compression
    scheme = node.get("name") or node.get("_target_")
    precision = cfg.precision.get("name")
    if scheme != "none" and precision != "fp32":
        raise ConfigError("precision", precision, f"precision=fp32 with compression={scheme}, or compression=none",
                          "the Model Optimization Toolkit does not support float16/bfloat16 policies; compression "
                          "trains in float32 only")
    if node.start_epoch >= cfg.trainer.epochs:
        raise ConfigError("compression.start_epoch", node.start_epoch, f"an integer below trainer.epochs "
                          f"({cfg.trainer.epochs})", "no epochs left to train compressed")
    left = cfg.trainer.epochs - node.start_epoch
    if scheme in TRAINED_FIRST and node.quantize_epochs > left:
        raise ConfigError("compression.quantize_epochs", node.quantize_epochs, f"at most {left} (trainer.epochs - "
                          "compression.start_epoch)", "more epochs than the run trains")
    tflite = cfg.export.get("tflite") or {}
    if "tflite" in cfg.export.formats and tflite.get("quantization") == "float16" and scheme in QUANTIZATION_AWARE:
        raise ConfigError("export.tflite.quantization", "float16", "none or int8 (or compression=none|prune|cluster)",
                          f"compression={scheme} trains for int8: its TFLite file is int8 from the learned ranges")
    if ("tflite" in cfg.export.formats and tflite.get("quantization") == "int8"
            and tflite.get("calibration_samples") == 0 and scheme not in QUANTIZATION_AWARE):
        raise ConfigError("export.tflite.calibration_samples", 0, "a number of training examples >= 1 (e.g. 200), or a "
                          "quantization-aware compression (quantize, prune_quantize, cluster_quantize)",
                          "int8 export of a float model needs data to calibrate its activation ranges")
    if node.from_run:
        check_run(Path(node.from_run).expanduser(), cfg.model)


FROM_RUN_ACCEPTED = ("the directory of a completed run (metrics.json with status completed, .hydra/config.yaml, "
                     "checkpoints/last.weights.h5)")
FROM_RUN_SCHEMES = ("none", "prune", "cluster")  # built-in float schemes: what load_run_model may rebuild


def check_run(run: Path, cfg_model: DictConfig) -> None:
    """`compression.from_run`: a completed run of the same model config whose trained model is float."""
    saved = saved_run_config(run)
    differing = config_differences(saved.model, cfg_model, "model.")
    if differing:
        raise ConfigError("compression.from_run", str(run), "a run of the same model config",
                          f"its model config differs in {', '.join(differing)}")


def saved_run_config(run: Path) -> DictConfig:
    """The saved config of a completed run whose trained model `load_run_model` can rebuild.

    That config names the scheme to rebuild, so only built-in float schemes are taken: a `_target_`
    there would import and call whatever the run directory names.
    """
    saved = completed_run_config(run, "compression.from_run", str(run), FROM_RUN_ACCEPTED,
                                 needs=["checkpoints/last.weights.h5"])
    scheme = saved.compression.get("name")
    if scheme in QUANTIZATION_AWARE:
        raise ConfigError("compression.from_run", str(run), "a run whose compression is none, prune or cluster",
                          f"its model was trained quantization-aware (compression={scheme})")
    if "_target_" in saved.compression or scheme not in FROM_RUN_SCHEMES:
        shown = scheme or saved.compression.get("_target_")
        raise ConfigError("compression.from_run", str(run), "a run whose compression is none, prune or cluster",
                          f"its compression is {shown}, which is not rebuilt from a run directory")
    return saved


def load_run_model(run: Path, model: keras.Model, spec, steps_per_epoch: int) -> keras.Model:
    """A completed run's trained model, built by code and filled from its weights file (nothing from the run runs).

    `model` is a fresh model of the same config (checked by `check_run`); the run's own scheme
    wraps it so the weights file's variables line up, and that scheme's strip gives the model
    to continue from.
    """
    saved = saved_run_config(run)
    phase = Phase(steps_per_epoch, saved.trainer.epochs - saved.compression.get("start_epoch", 0))
    earlier = build_scheme(saved.compression, model, spec, phase)
    weights = run / "checkpoints" / "best.weights.h5"
    if not weights.is_file():
        weights = run / "checkpoints" / "last.weights.h5"
    try:
        earlier.model.load_weights(str(weights))
    except (ValueError, OSError, KeyError) as error:
        raise ConfigError("compression.from_run", str(run), "a run of this model and data config",
                          f"its weights do not fit this model ({str(error).splitlines()[0]})") from error
    log.info("starting from %s (%s)", weights, saved.compression.get("name"))
    return earlier.strip(earlier.model)


def phase_records(run_dir: Path) -> list[dict]:
    """What each earlier phase of this run trained, read from its metrics.json (for the `compression` section)."""
    records = []
    for phase_dir in sorted((run_dir / "phases").glob("*/"), key=lambda p: int(p.name.split("_", 1)[0])):
        metrics = json.loads((phase_dir / "metrics.json").read_text())
        records.append({"run_dir": str(phase_dir.relative_to(run_dir)), "epochs": metrics.get("epochs_run"),
                        "best": metrics.get("best")})
    return records
