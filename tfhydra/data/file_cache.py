"""The file cache (`data.cache=<prefix>`): each split's file named after the data config and seed, and who may
write it. TensorFlow's file cache leaves a lockfile behind when its writer is killed, and the next run would fail
mid-epoch on it for ever; so before a split is cached here, a cache another live process is writing is refused,
and what a dead writer left is removed with a log line (docs/reliability.md, "A stale cache lockfile").
"""

from __future__ import annotations

import fcntl
import gc
import hashlib
import logging
import os
from pathlib import Path
from typing import cast

import tensorflow as tf
from omegaconf import OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.record.rundir import check_creatable

log = logging.getLogger("tfhydra")
# Pipeline keys that do not change which examples a source yields, so not part of a cache file's name.
_NOT_CACHED_KEYS = (
    "batch_size",
    "shuffle_buffer",
    "cache",
    "prefetch",
    "drop_remainder",
    "augment",
    "cache_budget",
    "snapshot",
    "service",
    "on_bad_file",
)


def cached(dataset: tf.data.Dataset, cfg_data, seed: int, split: str) -> tf.data.Dataset:
    """Files `<prefix>.<split>-<digest>.*` named after the data config and seed (`data.cache=<prefix>`).

    The digest keeps a run with another source, fraction or split from reading a cache
    written for different examples; it cannot see the input files change on disk.
    """
    prefix = Path(cfg_data.cache).expanduser()
    check_creatable("data.cache", cfg_data.cache, prefix.parent)  # as the pre-flight does, for Python callers
    prefix.parent.mkdir(parents=True, exist_ok=True)
    filename = f"{prefix}.{split}-{config_digest(cfg_data, seed)}"
    claim_cache(filename, cfg_data.cache)
    return dataset.cache(filename)


def config_digest(cfg_data, seed: int) -> str:
    given = cast(dict, OmegaConf.to_container(cfg_data, resolve=True))  # the data node: a DictConfig
    keys = {k: v for k, v in given.items() if k not in _NOT_CACHED_KEYS}
    return hashlib.sha256(repr(sorted(keys.items())).encode() + str(seed).encode()).hexdigest()[:12]


# --- who is writing a file cache ---------------------------------------------------------------------------
# TensorFlow's file cache (tensorflow/core/kernels/data/cache_dataset_ops.cc) writes `<file>_<shard>.lockfile`
# ("Created at: <seconds>", no pid) when its first element is read, writes the elements through a BundleWriter
# that holds `<file>_<shard>.data-00000-of-00001.tempstate<random>` open, and deletes the lockfiles once the pass
# is complete and merged into `<file>.index` / `<file>.data-*`. A run killed meanwhile leaves both; the next one
# would fail mid-epoch on the lockfile for ever. Its writer is gone when no tfhydra process holds the `flock`
# on `<file>.tfhydra-lock` (taken below, for the process's life; the kernel drops it when a process dies, so a
# reused pid cannot fool it) and no process has any `<file>_*` file open (/proc/*/fd: writers of any program).
_HELD_LOCKS: dict[str, int] = {}  # real path of the cache file -> the open descriptor whose flock this process holds


def claim_cache(filename: str, value: str) -> None:
    """Refuse a cache another live process is writing; clear what a dead writer left, with a log line."""
    holder = _lock_holder(filename)
    complete = Path(f"{filename}.index").exists()
    if holder is not None and not complete:
        raise ConfigError(
            "data.cache",
            value,
            "a cache prefix that no running process is writing (wait for it to finish, or give another prefix)",
            f"{filename} is being written by process {holder}",
        )
    folder, name = Path(filename).parent, Path(filename).name
    if not any(folder.glob(f"{name}_*.lockfile")):
        return
    writers = _live_writers(filename)
    locks = sorted(folder.glob(f"{name}_*.lockfile"))  # again: an iterator of this process, collected, cleans up
    if not locks:
        return
    if writers is None or writers or any(lock.stat().st_uid != os.getuid() for lock in locks):
        who = (
            f"process {', '.join(map(str, writers))} has its files open"
            if writers
            else ("no way to tell whether its writer is alive (no /proc, or another user's lockfile)")
        )
        raise ConfigError(
            "data.cache",
            value,
            "a cache prefix that no running process is writing (delete the lockfile if none is)",
            f"{locks[0]} exists and {who}",
        )
    leftovers = sorted(folder.glob(f"{name}_*"))
    for path in leftovers:
        path.unlink(missing_ok=True)
    log.warning(
        "data.cache: removed %s, left by a run killed while writing the cache (no process has them open); %s",
        ", ".join(p.name for p in leftovers),
        "reading the complete cache" if complete else "writing it again",
    )


def _live_writers(filename: str) -> list[int] | None:
    """Processes with one of TensorFlow's `<filename>_*` files open. An iterator of this process that is no
    longer referenced deletes its files when collected, so this process counts only after a collection."""
    writers = _processes_with_open(f"{os.path.realpath(filename)}_")
    if writers and os.getpid() in writers:
        gc.collect()
        writers = _processes_with_open(f"{os.path.realpath(filename)}_")
    return writers


def _lock_holder(filename: str) -> str | None:
    """None once this process holds the flock on `<filename>.tfhydra-lock` (for its life); else the holder's pid
    as it wrote it ("unknown" before it has)."""
    if os.path.realpath(filename) in _HELD_LOCKS:
        return None
    descriptor = os.open(f"{filename}.tfhydra-lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # another process holds it, and so is alive
        pid = os.read(descriptor, 32).decode(errors="replace").strip()
        os.close(descriptor)
        return pid or "unknown"
    os.ftruncate(descriptor, 0)
    os.write(descriptor, str(os.getpid()).encode())
    _HELD_LOCKS[os.path.realpath(filename)] = descriptor
    return None


def _processes_with_open(path_prefix: str) -> list[int] | None:
    """The pids of processes with a file open whose path starts with `path_prefix`; None without /proc."""
    proc = Path("/proc")
    if not (proc / "self" / "fd").is_dir():
        return None
    found = []
    for fd_dir in proc.glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd).startswith(path_prefix) for fd in fd_dir.iterdir()):
                found.append(int(fd_dir.parent.name))
        except OSError:  # gone meanwhile, or another user's process (whose lockfiles are refused above)
            continue
    return sorted(found)
