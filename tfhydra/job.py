"""One training job from a composed config: the only module that knows the order of things.

plan (config checks, phases; no TensorFlow) -> run directory -> each earlier phase as a run of its own ->
threads, precision policy -> strategy (chief or not) -> seeds -> data -> [strategy scope] model ->
compression -> optimizer, loss, metrics -> training loop -> export -> run record.
Every other module builds one thing from one config node; this one reads as the recipe.
"""
from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Sequence

import tf_keras as keras
from omegaconf import DictConfig, OmegaConf

from tfhydra.runtime import limit_gpu_memory, seed_everything, set_threads, worker_record
from tfhydra.lifecycle import check_continuable, is_complete, record_stopped
from tfhydra.compression.plan import phase_config
from tfhydra.compression.phases import compress_model
from tfhydra.contracts import Phase, PhasePlan
from tfhydra.data import Reads, build_datasets, limit_steps
from tfhydra.data.service_watch import watch_service
from tfhydra.data.splits import sizes as split_sizes
from tfhydra.dirlock import check_free, writing
from tfhydra.hydra_files import hydra_overrides, hydra_run_dir, under_hydra, without_hydra, write_hydra_files
from tfhydra.job_errors import one_line_tensorflow_errors, run_directory_writes
from tfhydra.export import export_model
from tfhydra.logger.callback import epoch_loggers
from tfhydra.logger.start import start_trackers
from tfhydra.logger.trackers import RunInfo, Trackers
from tfhydra.model import build_model
from tfhydra.model.memory import check_model_fits
from tfhydra.optimizer import build_optimizer, plateau_callback
from tfhydra.plan import plan_run
from tfhydra.precision import float32_output, loss_scale, policy_scope
from tfhydra.record import RunRecord, Status, provenance, read_record, run_status, test_name
from tfhydra.report import epoch_summary
from tfhydra.rundir import RunPaths
from tfhydra.startclock import mark, start_job, startup
from tfhydra.strategy import build_strategy, describe_devices, is_chief, shard
from tfhydra.strategy.checks import check_replica_batch
from tfhydra.terminal import figure
from tfhydra.trainer import LoopContext
from tfhydra.terminal import QUIET
from tfhydra.trainer.callbacks import RunRecorder, build_callbacks, epoch_progress, loss_bound
from tfhydra.trainer.debugging import numeric_checks
from tfhydra.trainer.ema import ema_options
from tfhydra.trainer.recovery import scale_for_recovery, train_with_recovery
from tfhydra.trainer.weights import load_last_weights, measure_test, prepare_resume, restore_best
from tfhydra.trainer.objectives import build_loss, build_metrics
from tfhydra.trainer.state import Interrupted, StopOnSignal, save_weights_atomically

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
    paths = RunPaths(run_dir) if run_dir is not None else RunPaths(hydra_run_dir())
    if under_hydra():  # the command's Hydra callback holds the run's (or its sweep's) directory: tfhydra/dirlock.py
        return run_phases(cfg, plan, paths, threads, started, callbacks)
    job_cfg = without_hydra(cfg)  # started from Python: one writer, and .hydra/ kept as Hydra would keep it
    check_free(paths.root)  # as the command's pre-flight: another writer is the answer, not its half-written config
    check_continuable(paths.root, job_cfg, key="run_dir")
    with writing(paths.root, "run"):
        write_hydra_files(paths, job_cfg, cfg)
        return run_phases(cfg, plan, paths, threads, started, callbacks)


def run_phases(cfg: DictConfig, plan, paths: RunPaths, threads: int, started: float, callbacks: Sequence) -> float:
    """Each earlier phase (a run of its own in phases/, kept once completed), then the run's own phase."""
    paths.root.mkdir(parents=True, exist_ok=True)
    start = cfg.compression.from_run
    if plan.earlier_phases and not cfg.trainer.resume:
        shutil.rmtree(paths.phases, ignore_errors=True)
    for phase in plan.earlier_phases:  # each a complete run in <run>/phases/<i>_<label>; completed ones are kept
        phase_paths = paths.phase(phase.directory)
        if not is_complete(phase_paths.root):
            log.info("phase %d (%s): %d epoch(s) in %s", phase.index, phase.label, phase.epochs, phase_paths.root)
            phase_cfg = phase_config(cfg, phase, start, formats=[])
            phase_paths.hydra.mkdir(parents=True, exist_ok=True)  # what compression.from_run reads back
            OmegaConf.save(phase_cfg, phase_paths.config)
            train_phase(phase_cfg, phase_paths, threads, time.perf_counter(), test=False)
            if not is_complete(phase_paths.root):
                raise RuntimeError(f"phase {phase_paths.root} ended {run_status(phase_paths.root)}: "
                                   "nothing to continue from")
        start = str(phase_paths.root)
    if plan.earlier_phases:
        final = plan.final_phase
        log.info("phase %d (%s): %d epoch(s) in %s", final.index, final.label, final.epochs, paths.root)
    return train_phase(phase_config(cfg, plan.final_phase, start), paths, threads, started,
                       earlier=plan.earlier_phases, callbacks=callbacks, track=True)


def train_phase(cfg: DictConfig, paths: RunPaths, threads: int, started: float,
                earlier: tuple[PhasePlan, ...] = (), callbacks: Sequence = (), track: bool = False,
                test: bool = True) -> float:
    """One phase, trained in `paths`: the whole run when there are no earlier phases. `test`: measure the kept
    weights on the test split at the end (the run's last phase only: the test split is measured once).

    Every way it ends writes the record: completed, diverged, failed (export included), interrupted; then
    the experiment trackers (`track`: the run's own phase; earlier phases are part of it) end with its status.
    """
    record = RunRecord(run_dir=str(paths.root), overrides=hydra_overrides(cfg), monitor=cfg.trainer.monitor,
                       monitor_mode=cfg.trainer.monitor_mode, **provenance())
    recorder = RunRecorder(paths.history, max_loss=loss_bound(cfg.trainer))
    examples_per_epoch = [0]  # known once the data are built; the record of a failure still reports throughput
    chief, trackers = True, Trackers()  # the chief starts the trackers once the strategy says who that is
    try:
        keras.backend.clear_session()  # jobs of one sweep may share this process
        limit_gpu_memory()  # both before the runtime starts: the first job of a process sets what all keep
        record.threads = set_threads(cfg.trainer.threads or threads)
        record.worker = worker_record(record.threads)

        def end(error: BaseException, interrupted: bool) -> None:  # the service watchdog's way out: the record first
            if chief:
                _record_ending(record, recorder, cfg, examples_per_epoch[0], error, started, paths)

        # SIGTERM/SIGINT: save the state and stop (trainer/state.py); a dead tf.data service: data/service_watch.py
        with policy_scope(cfg.precision) as policy, StopOnSignal() as stop, numeric_checks(cfg.trainer), \
                watch_service(cfg.data.get("service"), stop, end):
            strategy = build_strategy(cfg.strategy)  # first: multi_worker sets up collectives before any op runs
            stop.reinstall()
            record.update(**describe_devices(strategy), policy=policy.name)
            log.info("devices: %s (%d replica(s)), policy %s", record.devices, record.replicas, policy.name)
            chief = is_chief(strategy)
            if not chief:  # every worker runs the same steps; only the chief keeps what it writes ...
                with tempfile.TemporaryDirectory(prefix="tfhydra-worker-") as scratch:  # ... but its checkpoints/
                    # stay in its run directory: a stopped cluster resumes every worker from the same step
                    worker = RunPaths(scratch, checkpoints_root=paths.root)
                    recorder = RunRecorder(worker.history, max_loss=loss_bound(cfg.trainer))
                    with run_directory_writes(worker, "the state saved last"):
                        train_and_export(cfg, strategy, stop, worker, record, recorder, examples_per_epoch,
                                         earlier, callbacks, test=test)
                shutil.rmtree(worker.checkpoints, ignore_errors=True)  # the chief's record is final
                return _returned(record)
            if track:
                trackers = start_trackers(cfg.get("logger"), paths, run_info(cfg, paths))
            with run_directory_writes(paths, "the state saved last"):  # resuming, training, exporting
                train_and_export(cfg, strategy, stop, paths, record, recorder, examples_per_epoch, earlier,
                                 callbacks, trackers, test=test)
        record.update(wall_seconds=time.perf_counter() - started)
        record.write(paths.root)
    except BaseException as error:
        if chief:
            _record_ending(record, recorder, cfg, examples_per_epoch[0], error, started, paths)
            trackers.end(record.status, record.history)
        if isinstance(error, Interrupted):
            error.hand_over()  # a scheduler's own handler (submitit: requeue), now that the record says interrupted
        raise
    trackers.end(record.status, record.history)
    shutil.rmtree(paths.state, ignore_errors=True)  # recorded: nothing left to resume
    log.info("%s: %s; run directory %s", record.status, _monitored(record), paths.root)
    return _returned(record)


def run_info(cfg: DictConfig, paths: RunPaths) -> RunInfo:
    """What the experiment trackers are told about this run: its config, and tags for model, data and sweep."""
    sweep = None
    if under_hydra():
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        if HydraConfig.get().mode == RunMode.MULTIRUN:
            sweep = Path(HydraConfig.get().sweep.dir).name
    tags = {"model": cfg.model.get("name") or cfg.model.get("_target_"),
            "data": cfg.data.get("name") or cfg.data.get("_target_"), "sweep": sweep}
    return RunInfo(name=paths.root.name, config=OmegaConf.to_container(without_hydra(cfg), resolve=True),
                   tags=tags, resume=bool(cfg.trainer.resume), sweep=sweep)


def _returned(record: RunRecord) -> float:
    best = record.best_monitored
    return float("nan") if best is None or record.status != Status.COMPLETED else float(best)


def train_and_export(cfg: DictConfig, strategy, stop: StopOnSignal, paths: RunPaths, record: RunRecord,
                     recorder: RunRecorder, examples_per_epoch: list[int], earlier: tuple[PhasePlan, ...],
                     callbacks: Sequence = (), trackers: Trackers | None = None, test: bool = True) -> None:
    """The recipe: seeds, data, model, compression, optimizer, training, export; each room's section into `record`."""
    seed_everything(cfg.trainer.seed, cfg.trainer.deterministic)
    prepare_resume(cfg.trainer, paths)
    datasets = prepared_data(cfg, strategy, test)
    examples_per_epoch[0] = datasets.examples_per_epoch
    check_model_fits(cfg, datasets.spec)  # before Keras allocates a weight: a model too big is one line
    model, compression = build_model_and_optimizer(cfg, strategy, datasets, paths)
    mark("model")
    record.update(model=model.name, params=int(model.count_params()),
                  data={"name": cfg.data.get("name"), **datasets.spec.as_dict()})
    log.info("model %s: %d parameters; data %s: %s", model.name, record.params, cfg.data.get("name"),
             split_sizes(datasets.spec.train_size, datasets.spec.val_size, datasets.spec.test_size))

    recorder.best_from = compression.settled_epoch  # e.g. pruning: the export is an epoch at the target sparsity
    extra = plateau_callback(cfg.optimizer.get("schedule"), cfg.trainer.monitor,
                             cfg.trainer.monitor_mode) + compression.callbacks + list(callbacks)
    recorder.load()
    QUIET.release()  # TensorFlow's start-up is over: descriptor 2 is the terminal's again (before asking if it is one)
    # The bar first: it clears its line before the recorder logs the epoch's.
    callbacks = [*epoch_progress(cfg.trainer.verbose, cfg.data.batch_size),
                 *build_callbacks(cfg.trainer, cfg.logging, paths, recorder, extra,
                                  writers=epoch_loggers(trackers or Trackers(), lambda: recorder.epochs),
                                  datasets=datasets)]
    if recorder.finished and paths.last_weights.is_file() and load_last_weights(model, paths, strategy):
        log.info("training ended in an earlier attempt (%d epochs): redoing what came after it", len(recorder.epochs))
    else:
        stop.training = True
        try:
            with one_line_tensorflow_errors(cfg), run_directory_writes(paths, "the state saved last"):
                train_with_recovery(cfg.trainer, model, datasets, callbacks,  # trainer.recovery: after a blow-up
                                    LoopContext(strategy, paths, stop), recorder)
        finally:
            stop.training = False
        with run_directory_writes(paths, "the trained state"):
            save_weights_atomically(model, paths.last_weights)
            recorder.mark_finished()

    record.update(**_training_figures(recorder, cfg, datasets.examples_per_epoch))
    pruned = next((c.pruned_at for c in callbacks if getattr(c, "pruned_at", None)), None)
    if recorder.diverged:
        record.update(status=Status.DIVERGED, diverged=recorder.diverged)
    elif pruned:  # an Optuna pruner stopped it: a search's answer, not a model to deploy
        record.update(status=Status.PRUNED)
    else:
        with run_directory_writes(paths, "the trained state"):
            exported = restore_best(model, paths, strategy, record)
            record.update(test=measure_test(model, datasets, exported, cfg.trainer.ema.decay is not None,
                                            compression.scheme, cfg.trainer.validation_steps))
            exports, figures = export_model(cfg.export, compression, model, datasets, paths.root)
            if earlier:
                figures["phases"] = phase_summaries(paths, earlier)
            record.update(exports=exports, exported=exported, compression=figures, status=Status.COMPLETED)
    record.update(loss_scale=loss_scale(model.optimizer))


def prepared_data(cfg: DictConfig, strategy, test: bool):
    """The phase's data: built, capped for debugging (debug=fast), each split sharded for the strategy. The test
    split only in the run's last phase (an earlier phase's weights are not the ones kept); no callback gets it."""
    reads = Reads(cfg.trainer.epochs, cfg.trainer.steps_per_epoch, cfg.trainer.validation_steps)  # data.cache=auto
    datasets = build_datasets(cfg.data, cfg.trainer.seed, reads)
    datasets = limit_steps(datasets, cfg.trainer.steps_per_epoch, cfg.trainer.validation_steps)
    check_replica_batch(cfg.data.batch_size, strategy.num_replicas_in_sync)  # auto, multi_worker: the machine's count
    datasets.train, datasets.validation = (shard(d, cfg.strategy) for d in (datasets.train, datasets.validation))
    datasets.test = shard(datasets.test, cfg.strategy) if datasets.test is not None and test else None
    mark("data")
    return datasets


def build_model_and_optimizer(cfg: DictConfig, strategy, datasets, paths: RunPaths):
    """Inside the strategy's scope: the model from the data's spec, its compression, the optimizer, compiled.
    Returns (the model to train, its Compression)."""
    with strategy.scope():
        model = float32_output(build_model(cfg.model, datasets.spec))
        phase = Phase(datasets.steps_per_epoch, cfg.trainer.epochs,
                      paths.tensorboard_compression if cfg.logging.tensorboard else None)
        compression = compress_model(cfg.compression, model, datasets.spec, phase)
        model = compression.model
        options = {"clipnorm": cfg.trainer.clip_norm, "clipvalue": cfg.trainer.clip_value,
                   "global_clipnorm": cfg.trainer.clip_global_norm, **ema_options(cfg.trainer.ema)}
        optimizer = build_optimizer(cfg.optimizer, datasets.steps_per_epoch, cfg.trainer.epochs, options)
        optimizer = scale_for_recovery(optimizer, cfg.trainer.recovery)
        model.compile(optimizer=optimizer, loss=build_loss(cfg.trainer.loss, cfg.trainer.label_smoothing),
                      metrics=build_metrics(cfg.trainer.metrics),
                      steps_per_execution=cfg.trainer.steps_per_execution, jit_compile=cfg.trainer.jit_compile is True,
                      run_eagerly=cfg.trainer.run_eagerly)
    return model, compression


def _record_ending(record: RunRecord, recorder: RunRecorder, cfg: DictConfig, examples_per_epoch: int,
                   error: BaseException, started: float, paths: RunPaths) -> None:
    """A run that stops early still says how far it got and why (tfhydra/lifecycle.py writes it)."""
    record_stopped(paths.root, error, record, **_training_figures(recorder, cfg, examples_per_epoch),
                   wall_seconds=time.perf_counter() - started)


def phase_summaries(paths: RunPaths, earlier: tuple[PhasePlan, ...]) -> list[dict]:
    """What each earlier phase of this run trained, read from its record (for the `compression` section)."""
    summaries = []
    for phase in earlier:
        phase_record = read_record(paths.phase(phase.directory).root) or RunRecord()
        summaries.append({"run_dir": phase.directory, "epochs": phase_record.epochs_run, "best": phase_record.best})
    return summaries


def _training_figures(recorder: RunRecorder, cfg: DictConfig, examples_per_epoch: int) -> dict:
    # The first epoch pays for tracing; steady-state throughput leaves it out when there are more.
    known = [s for s in recorder.train_seconds if s is not None]  # None: an epoch whose record was lost
    timed = known[1:] or known
    waited = startup(recorder.first_step_unix)  # from the command's start (tfhydra/startclock.py)
    return {**epoch_summary(recorder.epochs, cfg.trainer.monitor, cfg.trainer.monitor_mode, recorder.best_from),
            "epochs_run": len(recorder.epochs),
            "examples_per_second": examples_per_epoch * len(timed) / sum(timed) if timed else None,
            "train_seconds_per_epoch": recorder.train_seconds,
            "time_to_first_step_seconds": (waited or {}).get("seconds", recorder.first_step_seconds),
            "startup": waited, "first_step_unix_time": recorder.first_step_unix,
            "history": recorder.epochs, "recoveries": recorder.recoveries}


def _monitored(record: RunRecord) -> str:
    """The end line: the chosen epoch's validation figure beside the kept weights' test figure (same metric)."""
    said = f"best {record.monitor}={figure(record.best_monitored)} at epoch {(record.best or {}).get('epoch')}"
    test, name = record.test_metric(record.monitor), test_name(record.monitor)
    if test is not None:
        return f"{said}; test {name}={figure(test)} ({record.test['examples']} examples, not used to choose)"
    none = record.status == Status.COMPLETED and not (record.data or {}).get("test_size")
    return f"{said}; no test split (data.test_fraction=0)" if none else said


