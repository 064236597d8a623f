"""User code (`trainer.callbacks` `_target_`s) that brings a fault on a real run at a chosen point: a disk that fills
up, a checkpoints directory that becomes unwritable, a best-weights file damaged before the export."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import tf_keras as keras


def fill_disk(path: str | Path, leave_bytes: int) -> None:
    """Fill the file system holding `path` with the file `path`, then give back `leave_bytes`: writes larger than
    that meet ENOSPC (a real full disk, not a simulated one); smaller ones (a run record) still fit."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for chunk in (1 << 20, 1 << 12):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError:  # ENOSPC: full at this chunk size; the smaller one fills the rest
                pass
        os.ftruncate(fd, max(os.fstat(fd).st_size - leave_bytes, 0))
    finally:
        os.close(fd)


class FillDisk(keras.callbacks.Callback):
    """At the end of epoch `epoch` (1-based), or after optimizer step `step` of it, fill the disk (`fill_disk`),
    while the file `marker` exists (the test removes it to let the same command finish the run)."""

    def __init__(self, path: str, marker: str, epoch: int = 1, step: int | None = None, leave_bytes: int = 0):
        super().__init__()
        self.path, self.marker, self.epoch, self.step, self.leave_bytes = path, marker, epoch, step, leave_bytes
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.step is not None and self._epoch + 1 == self.epoch and batch + 1 >= self.step:
            self._fill()

    def on_epoch_end(self, epoch, logs=None):
        if self.step is None and epoch + 1 == self.epoch:
            self._fill()

    def _fill(self) -> None:
        if os.path.exists(self.marker) and not os.path.exists(self.path):
            fill_disk(self.path, self.leave_bytes)


def lock_directory(path: str | Path) -> None:
    """Make `path` refuse new files for whoever runs: root ignores permission bits, so for root the directory is
    made immutable (`chattr +i`: EPERM), for anyone else read-only (chmod 0o500: EACCES)."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(path)], check=True, capture_output=True)
    else:
        os.chmod(path, 0o500)


def unlock_directory(path: str | Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], check=True, capture_output=True)
    else:
        os.chmod(path, 0o755)


class LockDirectory(keras.callbacks.Callback):
    """At the end of epoch `epoch` (1-based), `lock_directory(path)` while the file `marker` exists: the writes into
    it that follow fail."""

    def __init__(self, path: str, marker: str, epoch: int = 1):
        super().__init__()
        self.path, self.marker, self.epoch = path, marker, epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 == self.epoch and os.path.exists(self.marker):
            lock_directory(self.path)


class FileSizeLimit(keras.callbacks.Callback):
    """At the end of epoch `epoch` (1-based), the process may no longer write files larger than `limit_bytes`
    (RLIMIT_FSIZE; Python ignores SIGXFSZ, so such writes fail with EFBIG): a quota anyone can set, root or not."""

    def __init__(self, limit_bytes: int = 65536, epoch: int = 1):
        super().__init__()
        self.limit_bytes, self.epoch = limit_bytes, epoch

    def on_epoch_end(self, epoch, logs=None):
        import resource

        if epoch + 1 == self.epoch:
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.limit_bytes, resource.RLIM_INFINITY))


class DamageFile(keras.callbacks.Callback):
    """At the end of training (before the export), cut the file `path` to half its size, as a full disk or a
    killed copy would leave it."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def on_train_end(self, logs=None):
        size = os.path.getsize(self.path)
        with open(self.path, "r+b") as file:
            file.truncate(size // 2)
