"""One phase of a run, trained, exported and recorded by one object (Model Garden's `OrbitExperimentRunner`).

`PhaseRunner` holds what the phase's steps share (its config, paths, how it starts, record, recorder, strategy,
trackers, signal handling) so that its methods read as the recipe: threads and precision policy -> strategy
(chief or not) -> seeds -> data -> [strategy scope] model, compression, optimizer -> training loop -> best
weights -> test -> export -> record. tfhydra/runner/job.py decides the phases and hands each to a runner.

A non-chief worker of a multi-worker cluster runs the same steps; the difference is data chosen once
(`is_chief`, and `target`: the run directory, or a scratch one whose checkpoints stay in the run's), not a
second copy of the recipe.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfhydra.config.contracts import PhasePlan
from tfhydra.config.errors import one_line_tensorflow_errors, run_directory_writes
from tfhydra.data.caching import Reads
from tfhydra.data.digest import data_digest
from tfhydra.data.pipeline import build_datasets, limit_steps
from tfhydra.data.service_watch import watch_service
from tfhydra.data.splits import sizes as split_sizes
from tfhydra.export.card import write_card
from tfhydra.export.write import export_model
from tfhydra.logger.callback import epoch_loggers
from tfhydra.logger.start import start_trackers
from tfhydra.logger.trackers import Trackers
from tfhydra.model.auto import model_choice
from tfhydra.model.build import model_in_words, model_inputs
from tfhydra.model.freeze import trained_layers
from tfhydra.model.memory import check_model_fits
from tfhydra.optimizer.build import plateau_callback
from tfhydra.platform.command import reproduce_command
from tfhydra.platform.keras_lib import clear_session, keras_record
from tfhydra.platform.quiet import QUIET
from tfhydra.platform.runtime import limit_gpu_memory, seed_everything, set_threads, worker_record
from tfhydra.platform.startclock import mark, startup
from tfhydra.platform.terminal import shown_path
from tfhydra.precision.build import loss_scale, policy_scope
from tfhydra.record.lifecycle import record_stopped, resume_command
from tfhydra.record.report import epoch_summary, validation_summary
from tfhydra.record.resume import Start, clear_for
from tfhydra.record.run_record import RunRecord, Status, provenance
from tfhydra.record.rundir import RunPaths
from tfhydra.runner.compiled_model import build_model_and_optimizer
from tfhydra.runner.hydra_files import hydra_overrides
from tfhydra.runner.phase_report import monitored, phase_records, phase_summaries, returned, run_info
from tfhydra.runner.run_config import RunConfig, as_dict_config
from tfhydra.strategy.build import build_strategy, describe_devices, is_chief, shard
from tfhydra.strategy.checks import check_replica_batch
from tfhydra.task.build import build_task
from tfhydra.trainer.base import LoopContext
from tfhydra.trainer.callbacks import RunRecorder, build_callbacks, loss_bound
from tfhydra.trainer.debugging import numeric_checks
from tfhydra.trainer.progress import epoch_progress
from tfhydra.trainer.recovery import train_with_recovery
from tfhydra.trainer.state import Interrupted, StopOnSignal, save_weights_atomically
from tfhydra.trainer.stopping import stop_figures
from tfhydra.trainer.weights import load_last_weights, measure_per_label, measure_test, restore_best

log = logging.getLogger("tfhydra")


@dataclass(frozen=True)
class OwnPhase:
    """What the run's own (last) phase has that an earlier phase has not: the job's start (its wall time counts
    from there), the run's phases (the ones before it put their figures in its record), a sweep's callbacks (an
    Optuna trial's reporter: one with a `pruned_at` epoch ends the run as `pruned`); and it alone has trackers and
    the test."""

    started: float
    phases: tuple[PhasePlan, ...] = ()  # every phase of the run, this one last
    callbacks: Sequence = ()

    @property
    def earlier(self) -> tuple[PhasePlan, ...]:
        return self.phases[:-1]


class PhaseRunner:
    """Train, export and record one phase in `paths`, started as `start` says (tfhydra/record/resume.py decided it).
    `threads`: the intra-op threads when `trainer.threads` is 0; `own`: None for an earlier phase."""

    def __init__(self, cfg: RunConfig, paths: RunPaths, start: Start, threads: int, own: OwnPhase | None = None):
        self.cfg, self.paths, self.start, self.threads = cfg, paths, start, threads
        self.own = own or OwnPhase(time.perf_counter())
        self.final = own is not None  # trackers, the test split (measured once: on the weights the run keeps)
        self.record = RunRecord(
            run_dir=str(paths.root),
            overrides=hydra_overrides(as_dict_config(cfg)),
            monitor=cfg.trainer.monitor,
            monitor_mode=cfg.trainer.monitor_mode,
            resumed=start.as_record(),
            **provenance(),
        )
        self.recorder = RunRecorder(paths.history, max_loss=loss_bound(cfg.trainer))
        self.examples_per_epoch = 0  # known once the data are built; the record of a failure reports throughput
        self.is_chief, self.target, self.trackers = True, paths, Trackers()  # until the strategy says who is chief
        self.strategy: Any = None  # a tf.distribute.Strategy, built in train_in_strategy
        self.task: Any = None  # the run's tfhydra.task.base.Task, built with the data
        self.stop: StopOnSignal | None = None

    def run(self) -> float:
        """The phase, whatever way it ends: completed, diverged, failed (export included) and interrupted each
        write the record (the chief's), then the trackers end with its status. Returns `returned(record)`."""
        try:
            clear_session()  # jobs of one sweep may share this process
            limit_gpu_memory()  # both before the runtime starts: the first job of a process sets what all keep
            self.record.threads = set_threads(self.cfg.trainer.threads or self.threads)
            self.record.worker = worker_record(self.record.threads)
            self.train_in_strategy()
            self.conclude()
        except BaseException as error:
            if self.is_chief:
                self.record_ending(error)
                self.trackers.end(self.record.status, self.record.history)
            if isinstance(error, Interrupted):
                error.hand_over()  # a scheduler's own handler (submitit: requeue), now the record says interrupted
            raise
        return returned(self.record)

    def train_in_strategy(self) -> None:
        """SIGTERM/SIGINT: save the state and stop (trainer/state.py); a dead tf.data service: data/service_watch.py."""
        cfg = self.cfg
        with (
            policy_scope(cfg.precision) as policy,
            StopOnSignal() as self.stop,
            numeric_checks(cfg.trainer),
            watch_service(cfg.data.get("service"), self.stop, self.service_lost),
            contextlib.ExitStack() as scratch,
        ):
            self.strategy = build_strategy(cfg.strategy)  # first: multi_worker sets up collectives before any op
            self.stop.reinstall()
            self.record.update(**describe_devices(self.strategy), policy=policy.name, keras=keras_record())
            log.info("devices: %s (%d replica(s)), policy %s", self.record.devices, self.record.replicas, policy.name)
            self.choose_target(scratch)
            with run_directory_writes(
                self.target, "the state saved last", resume_command(self.target.root)
            ):  # resuming, training, exporting
                self.train_and_export()

    def choose_target(self, scratch: contextlib.ExitStack) -> None:
        """Every worker runs the same steps; only the chief keeps what it writes (and starts the trackers). A
        non-chief worker writes into a scratch directory, but its checkpoints/ stay in its run directory: a
        stopped cluster resumes every worker from the same step."""
        self.is_chief = is_chief(self.strategy)
        if not self.is_chief:
            directory = scratch.enter_context(tempfile.TemporaryDirectory(prefix="tfhydra-worker-"))
            self.target = RunPaths(Path(directory), checkpoints_root=self.paths.root)
        elif self.final:
            info = run_info(self.cfg, self.paths)
            self.trackers = start_trackers(as_dict_config(self.cfg).get("logger"), self.paths, info, self.stop)

    def train_and_export(self) -> None:
        """The recipe: seeds, data, model, compression, optimizer, training, export; each room's section into
        the record."""
        seed_everything(self.cfg.trainer.seed, self.cfg.trainer.deterministic)
        clear_for(self.start, self.target)  # a fresh start: what an earlier attempt saved is deleted
        datasets = self.build_data()
        model, compression = self.build_model(datasets)
        callbacks = self.build_callbacks(datasets, compression)
        self.train(model, datasets, callbacks)
        self.record.update(**self.training_figures(), **stop_figures(callbacks))
        pruned = next((c.pruned_at for c in callbacks if getattr(c, "pruned_at", None)), None)
        if self.recorder.diverged:
            self.record.update(status=Status.DIVERGED, diverged=self.recorder.diverged)
        elif pruned:  # an Optuna pruner stopped it: a search's answer, not a model to deploy
            self.record.update(status=Status.PRUNED)
        else:
            with run_directory_writes(self.target, "the trained state", resume_command(self.target.root)):
                self.export(model, datasets, compression)
        self.record.update(loss_scale=loss_scale(model.optimizer))

    def build_data(self):
        """The phase's data: built, capped for debugging (debug=fast), each split sharded for the strategy. The
        test split only in the run's last phase (an earlier phase's weights are not the ones kept)."""
        cfg, strategy = self.cfg, self.strategy
        reads = Reads(cfg.trainer.epochs, cfg.trainer.steps_per_epoch, cfg.trainer.validation_steps)  # data.cache=auto
        self.task = task = build_task(cfg.task)  # what the labels are and the head (tfhydra/task/)
        datasets = build_datasets(cfg.data, cfg.trainer.seed, reads, task, model_inputs(cfg.model))
        self.record.update(task=task.record())
        datasets = limit_steps(datasets, cfg.trainer.steps_per_epoch, cfg.trainer.validation_steps)
        check_replica_batch(cfg.data.batch_size, strategy.num_replicas_in_sync)  # auto, multi_worker: the machine's
        datasets.train, datasets.validation = (shard(d, cfg.strategy) for d in (datasets.train, datasets.validation))
        datasets.test = shard(datasets.test, cfg.strategy) if datasets.test is not None and self.final else None
        mark("data")
        self.examples_per_epoch = datasets.examples_per_epoch
        return datasets

    def build_model(self, datasets):
        """The model, its compression and optimizer (checked to fit before Keras allocates a weight)."""
        check_model_fits(as_dict_config(self.cfg), datasets.spec)  # a model too big is one line
        model, compression = build_model_and_optimizer(self.cfg, self.strategy, datasets, self.target)
        mark("model")
        self.record.update(
            model=model.name,
            model_choice=model_choice(self.cfg.model, datasets.spec),  # what model=auto built for this data
            params=int(model.count_params()),
            data={
                "name": self.cfg.data.get("name"),
                **datasets.spec.as_dict(),
                "digest": data_digest(self.cfg.data.get("path")),  # tfhydra-compare: did the data change?
            },
            effective_batch_size=self.cfg.data.batch_size * self.cfg.trainer.accumulate_steps,
            layers=trained_layers(model, self.cfg.model.get("freeze")),
        )
        log.info(
            "%s: %d parameters; data %s: %s",
            model_in_words(as_dict_config(self.cfg).model, model.name),
            self.record.params,
            self.cfg.data.get("name"),
            split_sizes(datasets.spec.train_size, datasets.spec.val_size, datasets.spec.test_size),
        )
        return model, compression

    def build_callbacks(self, datasets, compression) -> list:
        """The bar first (it clears its line before the recorder logs the epoch's), then the run's own callbacks,
        the schedule's plateau, the compression's and a sweep's."""
        cfg, recorder = self.cfg, self.recorder
        recorder.best_from = compression.settled_epoch  # e.g. pruning: the export is an epoch at the target sparsity
        extra = (
            plateau_callback(cfg.optimizer.get("schedule"), cfg.trainer.monitor, cfg.trainer.monitor_mode)
            + compression.callbacks
            + list(self.own.callbacks)
        )
        recorder.load()
        return [
            *epoch_progress(cfg.trainer.verbose, cfg.data.batch_size),
            *build_callbacks(
                cfg.trainer,
                cfg.logging,
                self.target,
                recorder,
                extra,
                writers=epoch_loggers(self.trackers, lambda: recorder.epochs),
                datasets=datasets,
            ),
        ]

    def train(self, model, datasets, callbacks: list) -> None:
        """Train as the start decided: after training, the last weights are loaded (if they read back; else the
        loop restores the same model from the state, kept until the record is final) and nothing is trained."""
        paths, stop = self.target, self.stop
        assert stop is not None  # train_in_strategy set it
        if self.start.trained and load_last_weights(model, paths, self.strategy):
            return
        stop.training = True
        try:
            with (
                one_line_tensorflow_errors(self.cfg),
                run_directory_writes(paths, "the state saved last", resume_command(paths.root)),
            ):
                train_with_recovery(
                    self.cfg.trainer,
                    model,
                    datasets,
                    callbacks,  # trainer.recovery: after a blow-up
                    LoopContext(self.strategy, paths, stop),
                    self.recorder,
                )
        finally:
            stop.training = False
        with run_directory_writes(paths, "the trained state", resume_command(paths.root)):
            save_weights_atomically(model, paths.last_weights)
            self.recorder.mark_finished()

    def export(self, model, datasets, compression) -> None:
        """The best epoch's weights restored, measured once on the test split (and per label, on validation too,
        for a task that has per-label figures), exported; the record completed."""
        cfg = self.cfg
        # the console filter ends with training: a converter failing under it hung (the TFLite runtime's refusal,
        # tests/record/test_record.py), so the export's lines pass as they come (tfhydra/platform/quiet.py)
        QUIET.release()
        exported = restore_best(model, self.target, self.strategy, self.record)
        ema, steps = cfg.trainer.ema.decay is not None, cfg.trainer.validation_steps
        test = measure_test(model, datasets, exported, ema, compression.scheme, steps, self.task)
        validation_labels, test_labels = measure_per_label(model, datasets, self.task) if self.final else (None, None)
        if validation_labels is not None and self.record.best:
            self.record.best = {**self.record.best, "per_label": validation_labels}
        if test_labels is not None and test is not None:
            test["per_label"] = test_labels
        self.record.update(test=test)
        exports, figures = export_model(cfg.export, compression, model, datasets, self.target.root)
        if self.own.earlier:
            figures["phases"] = phase_summaries(self.paths, self.own.earlier)
            self.record.phases = phase_records(self.paths, self.own.phases, self.record, cfg.optimizer.lr)
        self.record.update(exports=exports, exported=exported, compression=figures, status=Status.COMPLETED)

    def conclude(self) -> None:
        """The chief writes the record, ends the trackers, and drops the state (nothing left to resume); a
        non-chief worker drops its checkpoints (the chief's record is final)."""
        if not self.is_chief:
            shutil.rmtree(self.target.checkpoints, ignore_errors=True)
            return
        self.record.update(wall_seconds=time.perf_counter() - self.own.started)
        self.record.write(self.paths.root)
        write_card(self.paths.root, self.record, reproduce_command(list(self.record.overrides)))  # export/README.md
        self.trackers.end(self.record.status, self.record.history)
        shutil.rmtree(self.paths.state, ignore_errors=True)
        log.info("%s: %s; run directory %s", self.record.status, monitored(self.record), shown_path(self.paths.root))

    def service_lost(self, error: BaseException, interrupted: bool) -> None:
        """The tf.data service watchdog's way out: the record first."""
        if self.is_chief:
            self.record_ending(error)

    def record_ending(self, error: BaseException) -> None:
        """A run that stops early still says how far it got and why (tfhydra/record/lifecycle.py writes it)."""
        record_stopped(
            self.paths.root,
            error,
            self.record,
            **self.training_figures(),
            wall_seconds=time.perf_counter() - self.own.started,
        )

    def training_figures(self) -> dict:
        """The record's training section. The first epoch pays for tracing; steady-state throughput leaves it out."""
        recorder, trainer = self.recorder, self.cfg.trainer
        known = [s for s in recorder.train_seconds if s is not None]  # None: an epoch whose record was lost
        timed = known[1:] or known
        waited = startup(recorder.first_step_unix)  # from the command's start (tfhydra/platform/startclock.py)
        chosen = (trainer.monitor, trainer.monitor_mode, recorder.best_from)
        summary = epoch_summary(recorder.epochs, *chosen)
        if trainer.val_every_steps is not None and recorder.validations:  # the best is a validation's
            summary |= validation_summary(recorder.validations, *chosen)
        return {
            **summary,
            "val_every_steps": trainer.val_every_steps,
            "validations": recorder.validations,
            "epochs_run": len(recorder.epochs),
            "examples_per_second": self.examples_per_epoch * len(timed) / sum(timed) if timed else None,
            "train_seconds_per_epoch": recorder.train_seconds,
            "time_to_first_step_seconds": (waited or {}).get("seconds", recorder.first_step_seconds),
            "startup": waited,
            "first_step_unix_time": recorder.first_step_unix,
            "history": recorder.epochs,
            "recoveries": recorder.recoveries,
        }
