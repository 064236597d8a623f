"""The memory this process may still take on this host: the lower of the kernel's `MemAvailable`
(/proc/meminfo) and the room left under this process's cgroup limit (v2 `memory.max` less `memory.current`,
v1 `memory.limit_in_bytes` less `memory.usage_in_bytes`). Read by the data cache's budget (data/budget.py) and
by the checks that refuse a model or a dataset that cannot fit (model/memory.py, data/checks.py). Ground
floor: no TensorFlow, no room.
"""

from __future__ import annotations

from pathlib import Path


def human(size: float) -> str:
    """Bytes as the figures in logs and docs write them (decimal units)."""
    if size >= 1e18:  # beyond any machine: the power of ten says it
        return f"{size:.3g} B"
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{int(size)} B"


def available_memory() -> tuple[int, str]:
    """(bytes this process may still take, where the figure comes from)."""
    figures = []
    meminfo = _meminfo().get("MemAvailable")
    if meminfo is not None:
        figures.append((meminfo, "MemAvailable"))
    room = _cgroup_room()
    if room is not None:
        figures.append(room)
    return min(figures) if figures else (8 * 2**30, "an assumed 8 GiB (no /proc/meminfo, no cgroup limit)")


def _meminfo() -> dict[str, int]:
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return {}
    found = {}
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            found[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return found


def _cgroup_room() -> tuple[int, str] | None:
    """Room left under this process's cgroup memory limit (v2 or v1); None without a limit."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: 0::/path
            folder = Path("/sys/fs/cgroup") / path.lstrip("/")
            limit, usage = _number(folder / "memory.max"), _number(folder / "memory.current")
            name = "cgroup memory.max"
        elif "memory" in controllers.split(","):
            folder = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            limit, usage = _number(folder / "memory.limit_in_bytes"), _number(folder / "memory.usage_in_bytes")
            name = "cgroup memory.limit_in_bytes"
        else:
            continue
        if limit is not None and limit < 2**60:  # v1 writes 'no limit' as a huge number
            return max(0, limit - (usage or 0)), f"{name} {human(limit)} less {human(usage or 0)} used"
    return None


def _number(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
