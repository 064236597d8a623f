"""The one tf.data pipeline every source goes through, configured by the `data:` section
of conf/tfhydra.yaml (shared by every data option):

    source -> fraction (stratified, seeded; before decoding) -> decode (parallel map, to the stored dtype)
           -> [snapshot] -> cache (auto | memory | file | off) -> shuffle (train) -> prepare (float scaling,
           resizing) -> [tf.data service] -> batch (GLOBAL batch size, summed over replicas)
           -> augment (train batches) -> prefetch

The cache holds what the source stores (uint8 images stay uint8), so a memory cache costs the stored
size; `auto` keeps a split in memory only when that fits the budget (tfhydra/data/caching.py). The
decision, the sharding and the read order are logged and recorded under the record's `data.pipeline`.
Augmentation comes after the cache so every epoch sees new random transforms.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np
import tensorflow as tf

from tfhydra.config.errors import ConfigError
from tfhydra.data.augment import Augmentation, build_augmentation
from tfhydra.data.caching import CacheBudget, Reads
from tfhydra.data.features import is_feature_vector, standardize_features
from tfhydra.data.file_cache import cached, config_digest
from tfhydra.data.inputs import PREPARED, giving_inputs
from tfhydra.data.label_checks import check_classes, check_label_kind
from tfhydra.data.labels import LabelReader, reading_labels, strata
from tfhydra.data.service import distribute
from tfhydra.data.source import (
    AUTOTUNE,
    DATA,
    DataSpec,
    Serving,
    Source,
    deterministic_reads,
    stratified_subset,
    take_examples,
)
from tfhydra.data.splits import shuffle_split
from tfhydra.platform.runtime import cluster_size, data_threads
from tfhydra.record.rundir import check_creatable

log = logging.getLogger("tfhydra")


@dataclass
class Datasets:
    train: tf.data.Dataset  # batched with the global batch size; not yet prefetched (see `prefetched`)
    validation: tf.data.Dataset
    spec: DataSpec
    batch_size: int
    test: tf.data.Dataset | None = None  # batched like validation; read once, after training (tfhydra/data/splits.py)
    drop_remainder: bool = False  # training batches only: validation always covers every example
    prefetch: int | None = None  # batches prepared ahead (tf.data.AUTOTUNE = -1); None = off
    serving: Serving | None = None  # how the export takes the data as stored (tfhydra/data/source.py)
    # data.augment's mixup/cutmix: training targets are mixed one-hot rows (validation and test: class indices)
    mixed_targets: bool = False
    # feature vectors: the training split as the model takes it, in its stored order (no shuffle, no augmentation),
    # batched; read once before training by a regression's linear start (tfhydra/model/linear_start.py)
    train_rows: tf.data.Dataset | None = None
    steps_per_epoch: int = field(init=False)
    examples_per_epoch: int = field(init=False)  # training examples one epoch sees (throughput figures)

    def __post_init__(self) -> None:
        full, partial = divmod(self.spec.train_size, self.batch_size)
        self.steps_per_epoch = full + (1 if partial and not self.drop_remainder else 0)
        self.examples_per_epoch = self.spec.train_size

    def prefetched(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """`data.prefetch`, applied by the consumer as the very last step: after `repeat()` in the custom
        loop, because a checkpointed iterator with a prefetch *before* the repeat resumes the rest of its
        epoch exactly but reshuffles the next epoch differently from an uninterrupted run."""
        return dataset if self.prefetch is None else dataset.prefetch(self.prefetch)


def build_datasets(
    cfg_data, seed: int, reads: Reads | None = None, task: LabelReader | None = None, inputs: str = PREPARED
) -> Datasets:
    """The run's splits through the one pipeline; `reads` (how often the run reads each split) lets
    `data.cache=auto` leave a split read once uncached (tfhydra/data/caching.py). `task` reads the labels and
    chooses the model's head (tfhydra/task/; None: class indices and a softmax). `inputs`: what the model takes
    (tfhydra/data/inputs.py; RAW_TEXT: the texts themselves, for a model with its own tokenizer)."""
    with reading_labels(task) as reading, giving_inputs(inputs):
        source = DATA.build(cfg_data, seed=seed)
        if "_target_" in cfg_data:  # a user's feature vectors standardised as csv's and npz's (features.py)
            source = standardize_features(source)
        check_label_kind(source, task, cfg_data, reading.asked)
        check_classes(source, cfg_data.get("name"))
        if task is not None:
            source.spec = replace(source.spec, head=task.head(source.spec, source.train_labels))
        train, spec = training_share(source, cfg_data, seed)
    augment = build_augmentation(cfg_data.augment, spec, seed)
    budget, service = CacheBudget(cfg_data.cache_budget, reads, cfg_data.batch_size), cfg_data.service
    train, train_plan, train_done = stored_split(
        train, source, cfg_data, seed, "train", spec.train_size, budget, remote=bool(service.address)
    )
    validation, val_plan, val_done = stored_split(
        source.validation, source, cfg_data, seed, "validation", spec.val_size, budget
    )
    log.info("data.cache=%s: %s", cfg_data.cache, said_plans({"train": train_plan, "validation": val_plan}))
    in_order = prepared(train, source, train_done).batch(4096) if is_feature_vector(spec) else None
    if cfg_data.shuffle_buffer > 0:
        train = train.shuffle(cfg_data.shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    train, validation = prepared(train, source, train_done), prepared(validation, source, val_done)
    if service.address:
        train = distribute(train, service, cfg_data.batch_size, spec.train_size)
    train = train.batch(cfg_data.batch_size, drop_remainder=cfg_data.drop_remainder)
    if augment is not None:
        train = augmented(train, augment, seed)
    validation = validation.batch(cfg_data.batch_size)
    sharding = shard_policy(source)
    train = with_pipeline_options(train, sharding[0], deterministic_reads())
    validation = with_pipeline_options(validation, sharding[0], True)  # in the order Serving.raw_validation has
    recorded = {
        "train": train_plan.as_dict(),
        "validation": val_plan.as_dict(),
        "sharding": sharding[1],
        "service": service.address,
        "deterministic_reads": deterministic_reads(),
    }
    test = None  # read like validation: in order, every example, never shuffled or augmented
    if source.test is not None:
        test, recorded["test"], done = stored_split(source.test, source, cfg_data, seed, "test", spec.test_size, budget)
        test = with_pipeline_options(prepared(test, source, done).batch(cfg_data.batch_size), sharding[0], True)
        recorded["test"] = recorded["test"].as_dict()
    spec = RecordedSpec(**{f.name: getattr(spec, f.name) for f in fields(DataSpec)}, pipeline=recorded)
    buffer = None if cfg_data.prefetch == 0 else AUTOTUNE if cfg_data.prefetch == "auto" else cfg_data.prefetch
    mixed = augment is not None and augment.mixes_labels
    served = (source.serving, mixed, in_order)  # how the export takes the data; mixup's targets; the rows in order
    return Datasets(train, validation, spec, cfg_data.batch_size, test, cfg_data.drop_remainder, buffer, *served)


def training_share(source: Source, cfg_data, seed: int) -> tuple[tf.data.Dataset, DataSpec]:
    """The training split `data.fraction` keeps (stratified, seeded, before decoding) and the spec that counts it;
    refused when `data.drop_remainder=true` leaves no complete batch of it."""
    spec, train = source.spec, source.train
    if cfg_data.fraction < 1:
        labels = training_labels(source)
        grouped = strata(labels)  # None: a task without classes, a seeded share of the rows
        keep = (
            stratified_subset(grouped, cfg_data.fraction, seed)
            if grouped is not None
            else np.sort(shuffle_split(len(labels), 1 - cfg_data.fraction, seed)[1])
        )
        train = source.subset(keep) if source.subset else take_examples(train, keep, len(labels))
        spec = replace(spec, train_size=len(keep))
    if cfg_data.drop_remainder and spec.train_size < cfg_data.batch_size:
        raise ConfigError(
            "data.batch_size",
            cfg_data.batch_size,
            f"at most {spec.train_size} (the training examples) with data.drop_remainder=true",
            "no complete training batch",
        )
    return train, spec


CACHED = {"off": "not cached", "memory": "cached in memory", "file": "cached in files"}  # a CachePlan's kind, said


def said_plans(plans: dict) -> str:
    """The splits' cache decisions in one line, each decision once: `train and validation not cached: <reason>`."""
    said: dict[str, list[str]] = {}
    for split, plan in plans.items():
        said.setdefault(f"{CACHED[plan.kind]}: {plan.reason}", []).append(split)
    return "; ".join(f"{' and '.join(splits)} {decision}" for decision, splits in said.items())


@dataclass(frozen=True)
class RecordedSpec(DataSpec):
    """The data spec plus what the pipeline decided (cache per split and why, sharding): the record's `data`."""

    pipeline: dict = field(default_factory=dict, compare=False)

    def as_dict(self) -> dict:
        return {**super().as_dict(), "pipeline": self.pipeline}


def stored_split(
    dataset, source: Source, cfg_data, seed: int, split: str, size: int, budget: CacheBudget, remote: bool = False
):
    """A split decoded to its stored dtype, snapshotted and cached as configured: (dataset, its CachePlan, whether
    `prepare` is applied already: a split that is neither cached nor snapshotted is decoded and prepared in one
    parallel map, one pass over each example less). `remote`: it runs on tf.data service workers, each with a
    share of the examples, so the count is asserted on the trainer (service.py), not here."""
    counted = (lambda d, n: d) if remote else sized
    stored = counted(decoded(dataset, source, size), size)
    decodes = source.decode is not None or source.decode_all is not None
    plan = budget.plan(cfg_data.cache, stored, split, size, decodes)
    snapshot = cfg_data.snapshot
    if plan.kind == "off" and not snapshot and source.decode and source.prepare and source.decode_all is None:
        decode, prepare = source.decode, source.prepare
        return counted(dataset.map(lambda *e: prepare(*decode(*e)), num_parallel_calls=AUTOTUNE), size), plan, True
    if snapshot:
        stored = stored.snapshot(f"{snapshot_dir(cfg_data, seed)}/{split}")
    if plan.kind == "memory":
        stored = stored.cache()
    elif plan.kind == "file":
        stored = cached(stored, cfg_data, seed, split)
    return stored, plan, False


def prepared(dataset, source: Source, done: bool) -> tf.data.Dataset:
    """`Source.prepare` after the cache and the shuffle (whose buffer then holds the stored dtype too)."""
    return dataset.map(source.prepare, num_parallel_calls=AUTOTUNE) if source.prepare and not done else dataset


def shard_policy(source: Source) -> tuple[tf.data.experimental.AutoShardPolicy, str]:
    """Under multi-worker (`TF_CONFIG` with several tasks): by file when every worker gets a shard, else by
    example; logged. (`strategy.auto_shard` other than auto overrides it.)"""
    workers = cluster_size()
    if workers < 2:
        return tf.data.experimental.AutoShardPolicy.AUTO, "single worker"
    files = len(source.files or ())
    if files >= workers:
        reason = f"by file: {files} training shards for {workers} workers"
        policy = tf.data.experimental.AutoShardPolicy.FILE
    else:
        reason = (
            f"by example: {files} training shard(s) for {workers} workers"
            if files
            else f"by example: the source reads no files ({workers} workers)"
        )
        policy = tf.data.experimental.AutoShardPolicy.DATA
    log.info("data: sharding between workers %s", reason)
    return policy, reason


def augmented(train: tf.data.Dataset, augment: Augmentation, seed: int) -> tf.data.Dataset:
    """Training batches through `data.augment`. Each batch gets its own stateless seed, (run seed, a draw of
    `Dataset.random`, new every epoch), which a checkpointed iterator saves with the data order. The Keras layers'
    random generator is state outside the pipeline, which a checkpointed iterator (the custom loop's resumable
    state) refuses by default: it is left out instead, so a resumed run continues the data order exactly and the
    layers' draws from their seed."""
    options = tf.data.Options()
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    draws = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    return (
        tf.data.Dataset.zip(train, draws)
        .map(lambda batch, draw: augment(batch[0], batch[1], tf.stack([tf.constant(seed, tf.int64), draw])), AUTOTUNE)
        .with_options(options)
    )


def with_pipeline_options(dataset: tf.data.Dataset, shard, deterministic: bool) -> tf.data.Dataset:
    """tf.data's options, set once on each split: autotuned buffers and parallelism, a private thread pool
        (input work does not queue behind the model's ops), parallel maps delivering in the order they finish
    unless `deterministic` (trainer.deterministic for training; validation keeps its order)."""
    options = tf.data.Options()
    options.autotune.enabled = True
    options.threading.private_threadpool_size = data_threads()
    options.threading.max_intra_op_parallelism = 1
    options.deterministic = deterministic
    options.experimental_distribute.auto_shard_policy = shard
    return dataset.with_options(options)


def snapshot_dir(cfg_data, seed: int) -> str:
    """`data.snapshot`/<digest>: the digest of the data config (as for cache files) keeps other data apart."""
    check_creatable("data.snapshot", cfg_data.snapshot, Path(cfg_data.snapshot).expanduser())
    return f"{Path(cfg_data.snapshot).expanduser()}/{config_digest(cfg_data, seed)}"


def limit_steps(datasets: Datasets, steps_per_epoch: int | None, validation_steps: int | None) -> Datasets:
    """`trainer.steps_per_epoch` / `trainer.validation_steps` (None = the whole split).

    The training data is repeated before it is cut, so any step count works, and cut here
    (rather than passing `steps_per_epoch` to Keras) so both loops see an ordinary finite
    dataset of that many batches per epoch; each epoch still starts a fresh shuffle.
    """
    limited = replace(datasets)
    if steps_per_epoch:
        limited.train = datasets.train.repeat().take(steps_per_epoch)
        limited.steps_per_epoch = steps_per_epoch
        limited.examples_per_epoch = steps_per_epoch * datasets.batch_size
    if validation_steps:  # the test split too: a debugging cap measures fewer examples, and the record says how many
        limited.validation = datasets.validation.take(validation_steps)
        limited.test = datasets.test.take(validation_steps) if datasets.test is not None else None
    return limited


def training_labels(source: Source) -> np.ndarray:
    """The label of each training element, in order; read from the data when the source does not know them."""
    if source.train_labels is not None:
        return np.asarray(source.train_labels)
    labels = decoded(source.train, source, source.spec.train_size).map(lambda x, y: y, num_parallel_calls=AUTOTUNE)
    return np.concatenate([batch.numpy().reshape(-1) for batch in labels.batch(4096)])


def sized(dataset: tf.data.Dataset, size: int) -> tf.data.Dataset:
    """Tell tf.data how many examples a split has when it cannot know (files, `filter` for
    data.fraction): Keras needs the count to run `trainer.steps_per_execution` > 1 steps per call."""
    if int(dataset.cardinality()) != tf.data.UNKNOWN_CARDINALITY:
        return dataset
    return dataset.apply(tf.data.experimental.assert_cardinality(size))


def decoded(dataset: tf.data.Dataset, source: Source, size: int) -> tf.data.Dataset:
    if source.decode_all is not None:
        return source.decode_all(dataset, size)
    return dataset.map(source.decode, num_parallel_calls=AUTOTUNE) if source.decode else dataset
