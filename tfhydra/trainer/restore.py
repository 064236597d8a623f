"""Which saved state a resumed run restores: the newest checkpoint that can be read back, and under
`multi_worker` the newest one that every worker can read, agreed through all-reduces so the whole cluster
resumes from one step (a worker whose newest file is damaged takes the others back one save with it)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import tensorflow as tf

from tfhydra.config.errors import ConfigError, clip

log = logging.getLogger("tfhydra")


def checkpoint_candidates(directory: Path) -> list[str]:
    """Checkpoint prefixes in `directory`, newest first, found from the files themselves (the
    `checkpoint` index file may be the damaged one)."""
    numbered = []
    for index in Path(directory).glob("*.index"):
        match = re.search(r"-(\d+)$", index.stem)
        if match:
            numbered.append((int(match.group(1)), str(index.with_suffix(""))))
    return [prefix for _, prefix in sorted(numbered, reverse=True)]


def unreadable(prefix: str) -> str | None:
    """Why the checkpoint at `prefix` cannot be restored (every tensor is read, checksums checked), or None."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        for name, dtype in reader.get_variable_to_dtype_map().items():
            if dtype != tf.variant:  # a data iterator's state: not readable as an array, checked by the restore
                reader.get_tensor(name)
    except Exception as error:  # noqa: BLE001 (a damaged file shows as OpError, IndexError, ValueError ...)
        return clip(str(error), 200)
    return None


def restore_newest_readable(
    checkpoint: tf.train.Checkpoint, directory: Path, strategy: tf.distribute.Strategy | None = None
) -> str | None:
    """Restore the newest checkpoint that reads back whole, saying so when a newer one was damaged; under a
    multi-worker cluster, the newest one that every worker can read (`restore_agreed`)."""
    if cluster_workers(strategy) > 1:
        return restore_agreed(checkpoint, directory, strategy)
    candidates = checkpoint_candidates(directory)
    for prefix in candidates:
        problem = unreadable(prefix)
        if problem is None:
            try:
                checkpoint.restore(prefix).expect_partial()
            except Exception as error:  # noqa: BLE001 (the next, older checkpoint overwrites what this one restored)
                problem = clip(str(error), 200)
        if problem is None:
            if prefix != candidates[0]:
                log.warning("resuming from the previous checkpoint %s instead", prefix)
            return prefix
        log.warning("checkpoint %s is damaged (%s): falling back to the previous one", prefix, problem)
    if candidates:
        raise ConfigError(
            str(directory),
            None,
            "trainer.resume=false to start the run over",
            f"none of its {len(candidates)} checkpoints can be read back",
        )
    return None


def restore_agreed(checkpoint: tf.train.Checkpoint, directory: Path, strategy: tf.distribute.Strategy) -> str | None:
    """Under multi_worker, restore the newest checkpoint number that every worker can read back, so that all resume
    from one step. Each worker keeps its own directory: one whose newest checkpoint is damaged would otherwise resume
    a save earlier than the others, and the cluster's all-reduces would pair different steps. The workers save
    together, so one number is one step on all of them. They agree through all-reduces (the same calls, in the same
    order, on every worker): each offers its newest readable number not above the bound, all take the smallest
    offer, and keep it if every worker can read it (else the bound goes below it and they offer again)."""
    readable = {}
    candidates = checkpoint_candidates(directory)
    for prefix in candidates:
        problem = unreadable(prefix)
        if problem is None:
            readable[int(prefix.rsplit("-", 1)[1])] = prefix
        else:
            log.warning("checkpoint %s is damaged (%s)", prefix, problem)
    newest = [n - 1 for n in per_worker(strategy, max(readable, default=-1) + 1)]  # -1: none readable
    bound = max(newest)
    while min(newest) >= 0:
        agreed = min(n - 1 for n in per_worker(strategy, max((n for n in readable if n <= bound), default=-1) + 1))
        if agreed < 0:
            break
        if min(per_worker(strategy, int(agreed in readable))):
            if readable[agreed] != candidates[0]:
                log.warning(
                    "resuming from checkpoint %s, the newest that every worker can read back (newest readable: %s)",
                    readable[agreed],
                    said(newest),
                )
            try:
                checkpoint.restore(readable[agreed]).expect_partial()
            except Exception as error:  # noqa: BLE001 (read back whole, yet does not fit this model)
                raise ConfigError(
                    readable[agreed],
                    None,
                    "trainer.resume=false on every worker to start the run over",
                    f"it cannot be restored ({clip(str(error), 200)})",
                ) from error
            return readable[agreed]
        bound = agreed - 1
    if not max(per_worker(strategy, len(candidates))):
        return None  # a new run on every worker
    raise ConfigError(
        str(directory),
        None,
        "trainer.resume=false on every worker to start the run over",
        f"the workers have no checkpoint in common that each can read back (newest readable: "
        f"{said(newest)}): they cannot resume from one step",
    )


def said(newest: list[int]) -> str:
    return ", ".join(f"worker {i} step {n}" if n >= 0 else f"worker {i} none" for i, n in enumerate(newest))


def per_worker(strategy: tf.distribute.Strategy, value: int) -> list[int]:
    """`value` (an int) of every worker, in task order (the chief, if the cluster has one, first): an all-reduce
    (SUM) of a vector in which each replica fills its own place; every worker gets the same list."""
    replicas = strategy.num_replicas_in_sync

    def own_place():
        place = tf.distribute.get_replica_context().replica_id_in_sync_group
        return tf.one_hot(place, replicas, on_value=tf.constant(value, tf.int64), off_value=tf.constant(0, tf.int64))

    total = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(own_place), axis=None).numpy()
    return [int(v) for v in total[:: replicas // cluster_workers(strategy)]]  # a worker's replicas are consecutive


def cluster_workers(strategy: tf.distribute.Strategy | None) -> int:
    """How many workers (the chief included) train together; 0 outside a multi-worker cluster."""
    resolver = getattr(strategy, "cluster_resolver", None)
    spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    return sum(len(spec.get(task, ())) for task in ("chief", "worker"))
