"""One training job from a composed config: the only module that knows the order of things.

validate -> threads, precision policy -> strategy (chief or not) -> seeds -> data -> [strategy scope] model ->
compression -> optimizer, loss, metrics -> training loop -> export -> metrics.json.
Every other module builds one thing from one config node.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import tensorflow as tf
import tf_keras as keras
from omegaconf import DictConfig

from tfhydra.cli import resume_command
from tfhydra.compression import Phase, compress_model, prepare_phases
from tfhydra.data import build_datasets, limit_steps
from tfhydra.errors import ConfigError
from tfhydra.export import export_model
from tfhydra.model import build_model
from tfhydra.optimizer import build_optimizer, plateau_callback
from tfhydra.precision import float32_output, loss_scale, policy_scope
from tfhydra.report import epoch_summary, write_json
from tfhydra.schema import validate
from tfhydra.sweep import auto_threads
from tfhydra.strategy import build_strategy, describe_devices, is_chief, shard
from tfhydra.trainer import LoopContext, state_dir, train
from tfhydra.trainer.callbacks import RunRecorder, best_checkpoint_path, build_callbacks, loss_bound
from tfhydra.trainer.objectives import build_loss, build_metrics
from tfhydra.trainer.state import StopOnSignal, save_weights_atomically

log = logging.getLogger("tfhydra")
for _noisy in ("absl", "tensorflow"):  # their INFO lines (export details, asset paths) drown train.log
    logging.getLogger(_noisy).setLevel(logging.WARNING)


def run_job(cfg: DictConfig, run_dir: str | Path | None = None) -> float:
    """Train, export and record one run; returns the best monitored metric (NaN if none)."""
    started = time.perf_counter()
    validate(cfg)
    run_dir = Path(run_dir) if run_dir is not None else hydra_run_dir()
    run_dir.mkdir(parents=True, exist_ok=True)
    # compression.start_epoch and collaborative schemes: earlier phases train first, each its own run in <run>/phases/
    cfg = prepare_phases(cfg, run_dir, run_job)
    record = {"status": "running", "run_dir": str(run_dir), "overrides": hydra_overrides(),
              "monitor": cfg.trainer.monitor, "monitor_mode": cfg.trainer.monitor_mode}

    keras.backend.clear_session()  # jobs of one sweep may share this process
    record["threads"] = set_threads(cfg.trainer.threads or auto_threads())  # 0: auto (tfhydra/sweep: parallel jobs)
    # SIGTERM/SIGINT: during training, save the state and stop (tfhydra/trainer/state.py); otherwise stop at once.
    with policy_scope(cfg.precision) as policy, StopOnSignal() as stop:
        strategy = build_strategy(cfg.strategy)  # first: multi_worker sets up collectives before any op runs
        record.update(describe_devices(strategy), policy=policy.name)
        log.info("devices: %s (%d replica(s)), policy %s", record["devices"], record["replicas"], policy.name)
        if not is_chief(strategy):  # every worker runs the same steps; only the chief keeps what it writes
            with tempfile.TemporaryDirectory(prefix="tfhydra-worker-") as scratch:
                return _train_and_record(cfg, strategy, stop, Path(scratch), record, started, write_record=False)
        return _train_and_record(cfg, strategy, stop, run_dir, record, started)


def _train_and_record(cfg: DictConfig, strategy, stop: StopOnSignal, run_dir: Path, record: dict, started: float,
                      write_record: bool = True) -> float:
    seed_everything(cfg.trainer.seed, cfg.trainer.deterministic)
    prepare_resume(cfg.trainer, run_dir)
    datasets = build_datasets(cfg.data, cfg.trainer.seed)
    datasets = limit_steps(datasets, cfg.trainer.steps_per_epoch, cfg.trainer.validation_steps)  # debug=fast
    check_replica_batch(cfg.data.batch_size, strategy.num_replicas_in_sync)
    datasets.train, datasets.validation = (shard(d, cfg.strategy) for d in (datasets.train, datasets.validation))
    with strategy.scope():
        model = float32_output(build_model(cfg.model, datasets.spec))
        tensorboard = run_dir / "tensorboard" if cfg.logging.tensorboard else None
        phase = Phase(datasets.steps_per_epoch, cfg.trainer.epochs, tensorboard)
        compression = compress_model(cfg.compression, model, datasets.spec, phase)
        model = compression.model
        clipping = {"clipnorm": cfg.trainer.clip_norm, "clipvalue": cfg.trainer.clip_value,
                    "global_clipnorm": cfg.trainer.clip_global_norm}
        optimizer = build_optimizer(cfg.optimizer, datasets.steps_per_epoch, cfg.trainer.epochs, clipping)
        model.compile(optimizer=optimizer, loss=build_loss(cfg.trainer.loss),
                      metrics=build_metrics(cfg.trainer.metrics),
                      steps_per_execution=cfg.trainer.steps_per_execution,
                      jit_compile=cfg.trainer.jit_compile is True)
    check_monitor(cfg.trainer.monitor, cfg.trainer.metrics)
    record.update(model=model.name, params=int(model.count_params()),
                  data={"name": cfg.data.get("name"), **datasets.spec.as_dict()})
    log.info("model %s: %d parameters; data %s: %d train / %d validation examples", model.name,
             record["params"], cfg.data.get("name"), datasets.spec.train_size, datasets.spec.val_size)

    recorder = RunRecorder(run_dir / "checkpoints" / "history.json", max_loss=loss_bound(cfg.trainer))
    recorder.best_from = compression.settled_epoch  # e.g. pruning: the export is an epoch at the target sparsity
    extra = plateau_callback(cfg.optimizer.get("schedule", {"name": "constant"}), cfg.trainer.monitor,
                             cfg.trainer.monitor_mode) + compression.callbacks
    callbacks = build_callbacks(cfg.trainer, cfg.logging, run_dir, recorder, extra)
    recorder.load()
    last_weights = run_dir / "checkpoints" / "last.weights.h5"
    if recorder.finished and last_weights.is_file():  # killed after training, e.g. during export: redo the rest
        log.info("training ended in an earlier attempt (%d epochs): redoing what came after it", len(recorder.epochs))
        load_weights(model, last_weights, strategy)
    else:
        stop.training = True
        try:
            train(cfg.trainer, model, datasets, callbacks, LoopContext(strategy, run_dir, cfg.logging.histogram_freq, stop))
        except BaseException as error:
            status = "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"
            record.update(_training_figures(recorder, cfg, datasets.examples_per_epoch), status=status,
                          error=f"{type(error).__name__}: {error}", wall_seconds=time.perf_counter() - started)
            if write_record:
                write_json(run_dir / "metrics.json", record)
            raise
        finally:
            stop.training = False
        with after_training(run_dir, record if write_record else None):
            save_weights_atomically(model, last_weights)
            recorder.mark_finished()

    record.update(_training_figures(recorder, cfg, datasets.examples_per_epoch))
    if recorder.diverged:
        record.update(status="diverged", diverged=recorder.diverged)
    else:
        with after_training(run_dir, record if write_record else None):
            restore_best(model, run_dir, strategy)
            record["exports"], record["compression"] = export_model(cfg.export, compression, model, datasets, run_dir)
        record["status"] = "completed"
    record["loss_scale"] = loss_scale(model.optimizer)
    record["wall_seconds"] = time.perf_counter() - started
    if write_record:
        write_json(run_dir / "metrics.json", record)
    shutil.rmtree(state_dir(run_dir), ignore_errors=True)  # recorded: nothing left to resume
    log.info("%s: %s; run directory %s", record["status"], _monitored(record), run_dir)
    best = (record.get("best") or {}).get(cfg.trainer.monitor)
    return float("nan") if best is None or record["status"] != "completed" else float(best)


@contextlib.contextmanager
def after_training(run_dir: Path, record: dict | None):
    """A full disk or an unwritable directory after training is one line, and costs no training:
    the trained state stays in checkpoints/, and the same command finishes the run."""
    try:
        yield
    except OSError as error:
        where, reason = write_failure(error, run_dir)
        failure = ConfigError(where, None, "a writable run directory with free space (the trained state is kept in "
                              f"{run_dir / 'checkpoints'}; finish the run with: {resume_command(run_dir)})",
                              f"cannot write it ({reason})")
        if record is not None:
            try:  # the disk may still be full
                write_json(run_dir / "metrics.json", {**record, "status": "failed", "error": str(failure)})
            except OSError:
                pass
        raise failure from error


def write_failure(error: OSError, run_dir: Path) -> tuple[str, str]:
    """(file, reason) of a failed write; h5py reports errno and file name only inside its message."""
    text = str(error)
    errno = error.errno or int((re.search(r"errno = (\d+)", text) or [0, 0])[1])
    named = re.search(r"filename = '([^']+)'", text)
    where = error.filename or (named and named[1]) or run_dir
    return str(where), os.strerror(errno) if errno else " ".join(text.split())[:160]


def _training_figures(recorder: RunRecorder, cfg: DictConfig, examples_per_epoch: int) -> dict:
    # The first epoch pays for tracing; steady-state throughput leaves it out when there are more.
    timed = recorder.train_seconds[1:] or recorder.train_seconds
    return {**epoch_summary(recorder.epochs, cfg.trainer.monitor, cfg.trainer.monitor_mode, recorder.best_from),
            "epochs_run": len(recorder.epochs),
            "examples_per_second": examples_per_epoch * len(timed) / sum(timed) if timed else None,
            "train_seconds_per_epoch": recorder.train_seconds,
            "time_to_first_step_seconds": recorder.first_step_seconds,
            "first_step_unix_time": recorder.first_step_unix,
            "history": recorder.epochs}


def _monitored(record: dict) -> str:
    best = record.get("best") or {}
    return f"best {record['monitor']}={best.get(record['monitor'])} at epoch {best.get('epoch')}"


def check_monitor(monitor: str, metrics) -> None:
    names = ["loss"] + [m if isinstance(m, str) else m.get("name", m._target_.rsplit(".", 1)[-1]) for m in metrics]
    accepted = names + [f"val_{n}" for n in names]
    if monitor not in accepted:
        raise ConfigError("trainer.monitor", monitor, accepted, "not a metric this run logs")


def seed_everything(seed: int, deterministic: bool) -> None:
    keras.utils.set_random_seed(seed)
    tf.random.set_global_generator(tf.random.Generator.from_seed(seed))  # checkpointed by the custom loop
    if deterministic:
        tf.config.experimental.enable_op_determinism()
        # Dropout & co. then draw from tf.random.Generator variables, which checkpoints track.
        keras.backend.experimental.enable_tf_random_generator()
    else:  # both are process-wide: an earlier job of an in-process sweep must not leave them on
        from tensorflow.python.framework import config as tf_config  # disable_op_determinism is not public API

        if tf_config.is_op_determinism_enabled():
            tf_config.disable_op_determinism()
        keras.backend.experimental.disable_tf_random_generator()


def check_replica_batch(batch_size: int, replicas: int) -> None:
    if batch_size % replicas:
        raise ConfigError("data.batch_size", batch_size, f"a multiple of the {replicas} replicas (it is the global "
                          f"batch; each replica gets batch_size / {replicas})", "not divisible by the replica count")


def prepare_resume(cfg_trainer, run_dir: Path) -> None:
    """Resume what an earlier, unfinished run in this directory saved; or start it over if asked.

    The state is deleted only once metrics.json is written, so a record without state means the
    earlier attempt was killed before its first save (within its first epoch or save interval):
    that attempt is started over.
    """
    state, history = state_dir(run_dir), run_dir / "checkpoints" / "history.json"
    if not cfg_trainer.resume:
        shutil.rmtree(state, ignore_errors=True)
        history.unlink(missing_ok=True)
    elif state.exists():
        log.info("resuming from the saved state in %s", state)
    elif history.exists() and not json.loads(history.read_text()).get("finished"):
        log.warning("%s records epochs but no state was saved before the earlier attempt ended: starting over", history)
        history.unlink()


def restore_best(model: keras.Model, run_dir: Path, strategy: tf.distribute.Strategy) -> None:
    """Export the best epoch's weights, not the last one's (the last ones if the best file is damaged)."""
    best = best_checkpoint_path(run_dir)
    if not best.exists():
        return
    try:
        load_weights(model, best, strategy)
    except (OSError, ValueError) as error:
        log.warning("%s cannot be read (%s): exporting the last epoch's weights instead", best, error)
        load_weights(model, run_dir / "checkpoints" / "last.weights.h5", strategy)


def load_weights(model: keras.Model, path: Path, strategy: tf.distribute.Strategy) -> None:
    if not tf.distribute.has_strategy() and strategy is tf.distribute.get_strategy():
        model.load_weights(str(path))
        return
    # Mirrored variables cannot be assigned from the .h5 file directly: read it into a plain copy.
    copy = keras.models.clone_model(model)
    copy.load_weights(str(path))
    model.set_weights(copy.get_weights())


def set_threads(threads: int) -> int:
    """Returns the intra-op threads in effect (0: TensorFlow decides)."""
    if threads > 0:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        except RuntimeError:  # the runtime is already up in this process (e.g. an earlier sweep job)
            if tf.config.threading.get_intra_op_parallelism_threads() != threads:
                log.warning("trainer.threads=%d ignored: TensorFlow was already initialised in this process", threads)
    return tf.config.threading.get_intra_op_parallelism_threads()


def hydra_run_dir() -> Path:
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        raise ConfigError("run_dir", None, "a run directory (pass run_dir= when calling tfhydra.run outside Hydra)",
                          "no Hydra run directory")
    return Path(HydraConfig.get().runtime.output_dir)


def hydra_overrides() -> list[str]:
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
