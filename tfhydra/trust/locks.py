"""One writer per directory: a run directory and a sweep directory are locked while a tfhydra process writes them.

The lock is `fcntl.flock` on `<dir>/.tfhydra.lock` (RunPaths.lock, SweepPaths.lock), taken exclusively and without
waiting. The kernel releases it when the process ends, however it ends (SIGKILL, the OOM killer), so a lock file
left by a dead process holds nothing and is simply taken over; the file's text (`<pid> <kind>`) only names the
holder in the message. The descriptor is close-on-exec, so the processes a holder starts do not keep the lock.

Who holds what (docs/reliability.md, "One writer per directory"):
- a run from the command line: its run directory, from before Hydra makes it (the Hydra callback `DirectoryLock`,
  `on_run_start`, in the process that then trains) to the process's end;
- a sweep: its sweep directory, in the launching process (`on_multirun_start`, before the sweep callback or the
  launcher write anything there), for the sweep's life; the jobs inside it are covered by it, wherever they run;
- a run started from Python (`tfhydra.run(cfg, run_dir=...)`): its run directory, while `run_job` runs.
A directory is also being written when a directory above it is (a sweep's job directory while its sweep runs).
The pre-flight asks `check_free` before it reads a directory's config, so a second writer hears this and nothing
else, before anything is created or rewritten. flock is per machine: jobs a cluster launcher runs elsewhere are
covered by the sweep's lock on the launching machine only.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from tfhydra.config.errors import ConfigError, sweep_error_line
from tfhydra.record.rundir import LOCK_FILE, STAGES, SweepPaths

log = logging.getLogger("tfhydra")
_HELD: dict[Path, int] = {}  # directory (absolute) -> this process's locked descriptor
_SETTLE = 0.5  # seconds a holder with no live pid in its file (a probe, or a writer still writing its pid) is given


def _key(directory: str | os.PathLike) -> Path:
    """One name per directory, however it is spelt (this process's own lock must be recognised as its own)."""
    return Path(os.path.realpath(Path(directory).expanduser()))


def hold(directory: str | os.PathLike, kind: str) -> bool:
    """Lock `directory` (made if missing) for this process until `release` or its end; True when taken now, False
    when this process holds it already. `kind` (`run` or `sweep`) is written for the message another process
    prints. Raises ConfigError when another process holds it."""
    directory = _key(directory)
    if directory in _HELD:
        return False
    try:  # never through a link: a lock file that is one (a hostile directory) is refused, not truncated
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        raise ConfigError(
            str(directory / LOCK_FILE),
            None,
            f"a {kind} directory you can write to, holding no link named {LOCK_FILE}",
            f"cannot open it ({error.strerror})",
        ) from None
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode) or found.st_nlink > 1:  # a hard link's other name would be truncated too
        os.close(fd)
        raise ConfigError(
            str(directory / LOCK_FILE),
            None,
            f"a {kind} directory whose {LOCK_FILE} is a file of its own (or none)",
            "it is not a regular file with one name",
        )
    deadline = time.monotonic() + _SETTLE
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            pid, held_as = _holder(fd)
            if (pid and process_alive(pid)) or time.monotonic() > deadline:
                os.close(fd)
                raise busy(directory, held_as or kind, pid) from None
            time.sleep(0.02)
        except OSError as error:  # a file system without flock (some network or FUSE mounts): said, not fatal
            log.warning(
                "%s: cannot lock it (%s): another tfhydra process writing it at the same time would not be refused",
                directory,
                error.strerror,
            )
            break
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {kind}\n".encode(), 0)
    _HELD[directory] = fd
    return True


def release(directory: str | os.PathLike) -> None:
    """Let go of a lock `hold` took (the file stays: removing it would let two processes lock two files)."""
    fd = _HELD.pop(_key(directory), None)
    if fd is not None:
        os.close(fd)


def take(directory: str | os.PathLike, kind: str) -> bool:
    """`hold`, asked first of the directory and every directory above it (a probe creates nothing, so a second
    writer is refused before it makes the directory) and again once held (two writers taking a directory and one
    above it at the same moment: at least one of them sees the other). True when taken now."""
    check_free(directory)
    taken = hold(directory, kind)
    try:
        check_free(Path(directory).absolute().parent, inner=directory)
    except ConfigError:
        if taken:
            release(directory)
        raise
    return taken


@contextlib.contextmanager
def writing(directory: str | os.PathLike, kind: str) -> Iterator[None]:
    """`directory` taken (`take`) while the block runs; a lock this process held before is kept after it."""
    taken = take(directory, kind)
    try:
        yield
    finally:
        if taken:
            release(directory)


def check_free(directory: str | os.PathLike, inner: str | os.PathLike | None = None) -> None:
    """Raise ConfigError when another process holds the lock of `directory` or of a directory above it (`inner`:
    the directory the caller is about to write, when it is below `directory`; by default `directory` itself).
    Creates and changes nothing."""
    directory = _key(directory)
    inner = directory if inner is None else inner
    for candidate in [directory, *directory.parents]:
        pid, kind = probe(candidate)
        if pid is not None:
            raise busy(candidate, kind, pid, inner)


def check_free_inside(folders: list[Path]) -> None:
    """Raise ConfigError when another process writes a directory in one of `folders` (a sweep's job directories,
    in the sweep and in its stages' folders)."""
    for folder in folders:
        for child in sorted(folder.iterdir()) if folder.is_dir() else ():
            pid, kind = probe(child)
            if pid is not None:
                raise busy(_key(child), kind, pid)


def check_sweep_free(sweep_dir: str | os.PathLike) -> None:
    """Raise ConfigError when another process writes the sweep directory, one above it, or a job directory in it."""
    sweep = SweepPaths(Path(sweep_dir))
    check_free(sweep.root)
    check_free_inside([sweep.root, *(sweep.stage(s) for s in STAGES)])


def probe(directory: str | os.PathLike) -> tuple[int | None, str | None]:
    """(pid, kind) of another process holding `directory`'s lock (pid 0 when its file does not say), else
    (None, None). Opens the lock file for reading only; creates nothing."""
    directory = _key(directory)
    if directory in _HELD:
        return None, None
    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:  # no lock file (nobody ever wrote here), not a directory, a link, unreadable
        return None, None
    try:
        try:  # shared: it conflicts with a writer's exclusive lock only, and is let go at once
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid, kind = _holder(fd)
            return pid or 0, kind
        return None, None
    finally:
        os.close(fd)


def busy(directory: Path, kind: str | None, pid: int | None, inner: str | os.PathLike | None = None) -> ConfigError:
    """The one line a second writer gets: the directory, who writes it, and what to do instead."""
    kind = kind if kind in ("run", "sweep") else "run"
    holder = f"pid {pid}" if pid else "pid unknown"
    if kind == "sweep":
        accepted = (
            f"wait for {holder} to end (tfhydra-sweep resume {directory} then continues the sweep), or "
            "another hydra.sweep.dir"
        )
    else:
        accepted = (
            f"wait for {holder} to end (the same command then continues the run, unless it completed), or "
            "another hydra.run.dir"
        )
    where = f" ({inner} is in it)" if inner is not None and _key(inner) != directory else ""
    return ConfigError(
        str(directory),
        None,
        f"one writer at a time: {accepted}",
        f"another tfhydra process ({holder}) is writing this {kind} directory{where}",
    )


def _holder(fd: int) -> tuple[int | None, str | None]:
    """(pid, kind) as the holder wrote them in the lock file; None for what it does not say (yet)."""
    try:
        words = os.pread(fd, 64, 0).decode("ascii", "replace").split()
    except OSError:
        words = []
    pid = int(words[0]) if words and words[0].isdigit() else None
    return pid, words[1] if len(words) > 1 else None


def process_alive(pid: int) -> bool:
    """Whether `pid` is a live process (one owned by another user counts), without signalling it."""
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class DirectoryLock(Callback):
    """The Hydra callback (`hydra.callbacks.directory_lock`, conf/tfhydra.yaml, listed before the sweep's) that takes
    the lock before Hydra, the sweep callback or a launcher write anything: a single run's directory in the process
    that trains it, a sweep's in the process that launches it. A refusal is `Error: ...` and exit 1 (SystemExit
    passes Hydra's callback guard, which would make any other exception a warning)."""

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        with sweep_error_line():  # the value Hydra's run_job uses: `${now:}` resolves once per config
            take(str(config.hydra.run.dir), "run")

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        sweep_dir = str(config.hydra.sweep.dir)
        with sweep_error_line():
            check_sweep_free(sweep_dir)
            take(sweep_dir, "sweep")
            check_sweep_free(sweep_dir)  # a run that started in one of its job directories meanwhile
