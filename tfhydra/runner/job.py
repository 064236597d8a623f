"""One training job from a composed config: the only module (with the runner it hands each phase to) that knows
the order of things.

plan (config checks, phases; no TensorFlow) -> run directory -> each earlier phase as a run of its own, then the
run's own phase: how it starts (tfhydra/record/resume.py, decided once) -> tfhydra/runner/phase.py's `PhaseRunner`:
threads, precision policy -> strategy (chief or not) -> seeds -> data -> [strategy scope] model -> compression ->
optimizer, loss, metrics -> training loop -> export -> run record. Every other module builds one thing from one config
node; this one and the runner read as the recipe.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from tfhydra.compression.plan import phase_config
from tfhydra.platform.quiet import keep_in
from tfhydra.platform.startclock import mark, start_job
from tfhydra.platform.versions import older_than_floors
from tfhydra.record.lifecycle import is_complete
from tfhydra.record.resume import KEPT, start_phase
from tfhydra.record.run_record import RunRecord, read_record, run_status
from tfhydra.record.rundir import RunPaths
from tfhydra.runner.hydra_files import hydra_run_dir, under_hydra, without_hydra, write_hydra_files
from tfhydra.runner.phase import OwnPhase, PhaseRunner
from tfhydra.runner.phase_report import returned
from tfhydra.runner.plan import plan_run
from tfhydra.runner.run_config import RunConfig, as_dict_config, as_run_config
from tfhydra.trust.continuation import check_continuable
from tfhydra.trust.locks import check_free, writing

log = logging.getLogger("tfhydra")
for _noisy in ("absl", "tensorflow"):  # their INFO lines (export details, asset paths) drown train.log
    logging.getLogger(_noisy).setLevel(logging.WARNING)


def run_job(cfg: DictConfig, run_dir: str | Path | None = None, threads: int = 0, callbacks: Sequence = ()) -> float:
    """Train, export and record one run; returns the best monitored metric (NaN if none).

    `run_dir`: where to run when not under Hydra (a run started from Python); `threads`: the
    intra-op threads when `trainer.threads` is 0 (auto), chosen by whoever knows how many jobs
    share the machine (tfhydra.run); `callbacks`: Keras callbacks a sweep adds to the run's own phase
    (an Optuna trial's reporter: one with a `pruned_at` epoch ends the run as `pruned`).
    """
    started = time.perf_counter()
    start_job()  # the wait a user sees starts at the command's start (its first job) or at this job's
    mark("tensorflow")  # imported with this module
    plan = plan_run(cfg)
    run_cfg = as_run_config(cfg)  # read through its schema's types from here on
    old = older_than_floors(run_cfg.keras)
    if old:
        log.warning(old)
    paths = RunPaths(Path(run_dir)) if run_dir is not None else RunPaths(hydra_run_dir())
    own = OwnPhase(started, plan.phases, tuple(callbacks))
    if under_hydra():  # the command's Hydra callback holds the run's (or its sweep's) directory: tfhydra/trust/locks.py
        return run_phases(run_cfg, plan, paths, threads, own)
    job_cfg = without_hydra(cfg)  # started from Python: one writer, and .hydra/ kept as Hydra would keep it
    check_free(paths.root)  # as the command's pre-flight: another writer is the answer, not its half-written config
    check_continuable(paths.root, job_cfg, key="run_dir")
    with writing(paths.root, "run"):
        write_hydra_files(paths, job_cfg, cfg)
        return run_phases(run_cfg, plan, paths, threads, own)


def run_phases(cfg: RunConfig, plan, paths: RunPaths, threads: int, own: OwnPhase) -> float:
    """Each earlier phase (a run of its own in phases/, kept once completed), then the run's own phase; each
    starts as tfhydra/record/resume.py decides at its top (fresh, from its saved state, after training, kept)."""
    paths.root.mkdir(parents=True, exist_ok=True)
    keep_in(paths.train_log)  # TensorFlow's lines the console filter holds back (tfhydra/platform/quiet.py)
    start = cfg.compression.from_run
    if plan.earlier_phases and not cfg.trainer.resume:  # the whole run starts over, its earlier phases too
        shutil.rmtree(paths.phases, ignore_errors=True)
    for phase in plan.earlier_phases:  # each a complete run in <run>/phases/<i>_<label>; completed ones are kept
        phase_paths = paths.phase(phase.directory)
        log.info("phase %d (%s): %d epoch(s) in %s", phase.index, phase.label, phase.epochs, phase_paths.root)
        phase_cfg = phase_config(as_dict_config(cfg), phase, start, formats=[])
        train_phase(as_run_config(phase_cfg), phase_paths, threads)
        if not is_complete(phase_paths.root):
            raise RuntimeError(
                f"phase {phase_paths.root} ended {run_status(phase_paths.root)}: nothing to continue from"
            )
        start = str(phase_paths.root)
    if plan.earlier_phases:
        final = plan.final_phase
        log.info("phase %d (%s): %d epoch(s) in %s", final.index, final.label, final.epochs, paths.root)
    return train_phase(as_run_config(phase_config(as_dict_config(cfg), plan.final_phase, start)), paths, threads, own)


def train_phase(cfg: RunConfig, paths: RunPaths, threads: int, own: OwnPhase | None = None) -> float:
    """One phase in `paths`, started as decided once at its top (a kept, completed phase is not rerun); `own`:
    the run's own phase (None: an earlier one, whose config is saved for compression.from_run to read back)."""
    start = start_phase(paths, cfg.trainer.resume)
    if start.kind == KEPT:
        return returned(read_record(paths.root) or RunRecord())
    if own is None:
        paths.hydra.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(cfg, paths.config)
    return PhaseRunner(cfg, paths, start, threads, own).run()
