"""What a phase tells others: the experiment trackers (`run_info`), the record's `compression` section (what each
earlier phase trained), the recipe (`returned`: the figure a sweep ranks by) and the terminal (`monitored`: the end
line's validation and test figures). Read by tfhydra/runner/phase.py and tfhydra/runner/job.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from omegaconf import OmegaConf

from tfhydra.config.contracts import PhasePlan
from tfhydra.logger.trackers import RunInfo
from tfhydra.record.headline import best_in_words, tested_in_words
from tfhydra.record.run_record import RunRecord, Status, read_record
from tfhydra.record.rundir import RunPaths
from tfhydra.runner.hydra_files import under_hydra, without_hydra
from tfhydra.runner.run_config import RunConfig, as_dict_config


def run_info(cfg: RunConfig, paths: RunPaths) -> RunInfo:
    """What the experiment trackers are told about this run: its config, and tags for model, data and sweep."""
    sweep = None
    if under_hydra():
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        if HydraConfig.get().mode == RunMode.MULTIRUN:
            sweep = Path(HydraConfig.get().sweep.dir).name
    tags = {
        "model": cfg.model.get("name") or cfg.model.get("_target_"),
        "data": cfg.data.get("name") or cfg.data.get("_target_"),
        "sweep": sweep,
    }
    return RunInfo(
        name=paths.root.name,
        config=cast(dict, OmegaConf.to_container(without_hydra(as_dict_config(cfg)), resolve=True)),
        tags=tags,
        resume=bool(cfg.trainer.resume),
        sweep=sweep,
    )


def phase_summaries(paths: RunPaths, earlier: tuple[PhasePlan, ...]) -> list[dict]:
    """What each earlier phase of this run trained, read from its record (for the `compression` section)."""
    summaries = []
    for phase in earlier:
        assert phase.directory is not None  # an earlier phase is a run of its own, in its directory
        phase_record = read_record(paths.phase(phase.directory).root) or RunRecord()
        summaries.append({"run_dir": phase.directory, "epochs": phase_record.epochs_run, "best": phase_record.best})
    return summaries


def phase_records(paths: RunPaths, phases: tuple[PhasePlan, ...], own: RunRecord, lr: float) -> list[dict]:
    """The record's `phases`: each phase of the run in order, this one (`own`, trained at `lr`) last: what trained
    in it (`layers`) and at which rate, so a two-stage fine-tuning says what each stage did."""
    found = []
    for phase in phases:
        record = own if phase.directory is None else read_record(paths.phase(phase.directory).root) or RunRecord()
        found.append(
            {
                "index": phase.index,
                "label": phase.label,
                "run_dir": phase.directory or ".",
                "epochs": record.epochs_run,
                "best": record.best,
                "layers": record.layers,
                "lr": phase.overrides.get("optimizer.lr", lr),
            }
        )
    return found


def returned(record: RunRecord) -> float:
    """What a phase returns: its best monitored figure when it completed, else NaN."""
    best = record.best_monitored
    return float("nan") if best is None or record.status != Status.COMPLETED else float(best)


def monitored(record: RunRecord) -> str:
    """The end line: the chosen epoch's validation figures beside the kept weights' test figures (the same metrics),
    the task's headline first (tfhydra/record/headline.py: `best val_rmse=60.01 val_r2=0.41 at epoch 12 (chosen by
    val_loss=3601); test rmse=58.3 r2=0.44 (...)`), and the tie the best epoch was chosen from, if any."""
    metrics = (record.test or {}).get("metrics") or {}
    said = best_in_words(record.task, record.best, metrics, record.monitor)
    test = tested_in_words(record.task, record.best, metrics, record.monitor)
    if test:
        return f"{said}; {test} ({(record.test or {})['examples']} examples, not used to choose)"
    none = record.status == Status.COMPLETED and not (record.data or {}).get("test_size")
    return f"{said}; no test split (data.test_fraction=0)" if none else said
