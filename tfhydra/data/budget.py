"""How much memory `data.cache=auto` may spend on a memory cache, and the sizes users write. No TensorFlow.

The budget is `BUDGET_SHARE` of the memory this process may still take: the lower of the kernel's
`MemAvailable` (/proc/meminfo) and the room left under this process's cgroup limit (v2 `memory.max` less
`memory.current`, v1 `memory.limit_in_bytes` less `memory.usage_in_bytes`), divided among the processes
on this host that each build their own pipeline (the local workers of a `TF_CONFIG` cluster).

Why a sixteenth: a memory cache is one consumer among several (the shuffle buffer, the model and its
optimizer state, TensorFlow's own peak, other jobs on a shared machine). Missing the cache costs only
decode time on later epochs (sharded TFRecords stream at the model's speed: docs/data.md); overshooting
ends the run with the kernel's OOM killer. On the 23 GiB machine of the figures it is about 1.4 GB:
every Keras dataset fits (CIFAR-10 as uint8 is 150 MB), a 2 GB TFRecord set streams.
"""

from __future__ import annotations

import json
import os
import re
import socket

from tfhydra.platform.hostmemory import available_memory, human  # noqa: F401  (human: the data room's figures)

BUDGET_SHARE = 1 / 16
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1e3,
    "kb": 1e3,
    "m": 1e6,
    "mb": 1e6,
    "g": 1e9,
    "gb": 1e9,
    "t": 1e12,
    "tb": 1e12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
SIZE_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text) -> int | None:
    """'2GB', '500MB', '1.5GiB', '4096' -> bytes; None when it is not a size."""
    found = SIZE_PATTERN.match(str(text))
    if not found or found.group(2).lower() not in _UNITS:
        return None
    return int(float(found.group(1)) * _UNITS[found.group(2).lower()])


def local_processes() -> int:
    """Processes on this host that build their own input pipeline: the `TF_CONFIG` tasks listed with this
    host's name (a cluster of workers on one machine), else 1."""
    try:
        cluster = json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster", {})
    except (ValueError, AttributeError):
        return 1
    names = {socket.gethostname(), "localhost", "127.0.0.1"}
    tasks = [
        address for role in ("chief", "worker") for address in cluster.get(role, []) or [] if isinstance(address, str)
    ]
    return max(1, sum(address.rsplit(":", 1)[0] in names for address in tasks))


def cache_budget(value) -> tuple[int, str]:
    """(bytes, how it was derived) for `data.cache_budget`: `auto`, or a size the user gave."""
    if value not in (None, "auto"):
        size = parse_size(value)
        assert size is not None, value  # a size: the plan checked data.cache_budget (tfhydra/data/checks.py)
        return size, f"data.cache_budget={value}"
    available, where = available_memory()
    processes = local_processes()
    per_process = f", divided by {processes} processes on this host" if processes > 1 else ""
    return int(available * BUDGET_SHARE / processes), (
        f"1/{round(1 / BUDGET_SHARE)} of {human(available)} available ({where}){per_process}"
    )
