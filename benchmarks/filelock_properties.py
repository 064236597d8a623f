"""What the `filelock` package keeps of tfhydra's directory lock (tfhydra/trust/locks.py; its tests are
tests/contract/test_one_writer.py).

    python benchmarks/filelock_properties.py
    PYTHONPATH=<a filelock 3.x source tree> python benchmarks/filelock_properties.py

Each line is one property the lock's tests assert, tried with filelock's `UnixFileLock` and `acquire(timeout=0)`
(the holder writes `<pid> <kind>` from filelock's `on_acquired` hook, as tfhydra would): a probe that creates
nothing and does not look like a writer to another probe, a lock file that is a hard link leaving its other name
untouched, the holder's text readable while another process is refused, the lock released when its holder is
killed, its descriptor not inherited. Then what `import filelock` costs a fresh process. Linux only.
"""

from __future__ import annotations

import fcntl
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import filelock

LOCK_FILE = ".tfhydra.lock"


def lock(path: Path, **options) -> filelock.UnixFileLock:
    return filelock.UnixFileLock(str(path), preserve_lock_file=True, **options)


def taken(path: Path) -> bool:
    """Whether filelock takes `path` now, in another process (without waiting)."""
    code = (
        f"import filelock\ntry:\n filelock.UnixFileLock({str(path)!r}).acquire(timeout=0); print(1)\n"
        "except filelock.Timeout: print(0)"
    )
    return (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "1"
    )


def shared_free(path: Path) -> bool:
    """Whether tfhydra's probe (a shared lock, let go at once) finds `path` free now, in another process."""
    code = (
        f"import fcntl, os\nfd = os.open({str(path)!r}, os.O_RDONLY)\n"
        "try:\n fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB); print(1)\nexcept BlockingIOError: print(0)"
    )
    return (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "1"
    )


def created(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def main() -> None:
    print(f"filelock {filelock.__version__} ({filelock.__file__}), Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as folder:
        demonstrate(Path(folder))


def demonstrate(root: Path) -> None:

    probe_root = root / "probe"
    probe_root.mkdir()
    try:
        asked = lock(probe_root / "new" / "run" / LOCK_FILE)
        asked.acquire(timeout=0)
        asked.release()
    except OSError as error:
        print(f"  asking about a missing directory: {type(error).__name__} {error}")
    print(f"  asking about a missing directory creates {created(probe_root) or 'nothing'} (tfhydra: nothing)")

    run = root / "run"
    run.mkdir()
    first = lock(run / LOCK_FILE)
    first.acquire(timeout=0)  # a probe, as filelock can make one: an exclusive lock (it has no shared one)
    print(f"  a second probe while a first one asks: {'free' if taken(run / LOCK_FILE) else 'busy'} (tfhydra: free)")
    first.release()
    fd = os.open(run / LOCK_FILE, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # tfhydra's probe: shared, conflicting with a writer only
    print(f"    (two of tfhydra's shared probes: {'free' if shared_free(run / LOCK_FILE) else 'busy'})")
    os.close(fd)

    target = root / "precious.txt"
    target.write_text("keep me")
    linked = root / "linked"
    linked.mkdir()
    os.link(target, linked / LOCK_FILE)
    links: list[int] = []
    held = lock(linked / LOCK_FILE, on_acquired=lambda fd: links.append(os.fstat(fd).st_nlink))
    held.acquire(timeout=0)
    held.release()
    print(
        f"  a lock file that is a hard link, taken: its other name holds {target.read_text()!r} "
        f"before the hook can refuse it ({links[0]} names) (tfhydra: 'keep me', refused)"
    )

    shared = root / "held"
    shared.mkdir()
    holder = (
        "import filelock, os, sys\n"
        "def write(fd):\n"
        "    os.ftruncate(fd, 0)\n"
        "    os.pwrite(fd, f'{os.getpid()} run'.encode(), 0)\n"
        f"held = filelock.UnixFileLock({str(shared / LOCK_FILE)!r}, preserve_lock_file=True, on_acquired=write)\n"
        "held.acquire(timeout=0)\n"
        "print(os.get_inheritable(held._context.lock_file_fd), flush=True)\n"
        "sys.stdin.read()\n"
    )
    process = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    inheritable = process.stdout.readline().strip() if process.stdout else "?"
    refused = not taken(shared / LOCK_FILE)
    print(f"  another process refused: {refused}; the holder's text then: {(shared / LOCK_FILE).read_text()!r}")
    print(f"  the lock's descriptor inherited by the processes its holder starts: {inheritable} (tfhydra: False)")
    process.kill()
    process.wait()
    print(f"  the holder SIGKILLed: the lock is taken: {taken(shared / LOCK_FILE)} (tfhydra: True)")

    costs = []
    for _ in range(5):
        found = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import filelock"], capture_output=True, text=True, check=True
        ).stderr
        costs.append(int(next(line for line in found.splitlines() if line.endswith("| filelock")).split("|")[1]) / 1e6)
    print(
        f"  import filelock, fresh process: {statistics.median(costs):.3f} s (median of 5) (tfhydra's fcntl: built in)"
    )


if __name__ == "__main__":
    main()
