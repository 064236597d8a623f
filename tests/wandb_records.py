"""Read a W&B offline run's `run-<id>.wandb` file without the network or a W&B account.

The file is W&B's LevelDB-style log (the layout wandb's own sdk/internal/datastore.py read before 0.2x
removed it): a 7-byte header (":W&B", 0xBEE1, version 0), then 32 KiB blocks of chunks, each with a 7-byte
header (CRC32, length, type: 1 full, 2 first, 3 middle, 4 last); each record is a `wandb_internal_pb2.Record`.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

BLOCK, HEADER = 32768, 7


def records(path: Path):
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", data[:7]
    offset, pending = HEADER, b""
    while offset + HEADER <= len(data):
        room = BLOCK - offset % BLOCK
        if room < HEADER:  # the block's tail is padding
            offset += room
            continue
        _, length, kind = struct.unpack("<IHB", data[offset : offset + HEADER])
        chunk = data[offset + HEADER : offset + HEADER + length]
        offset += HEADER + length
        if kind == 0 and length == 0:
            break
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record
            pending = b""


def history(path: Path) -> list[dict]:
    """Every `run.log` row of the run, as {key: value}."""
    rows = []
    for record in records(path):
        if record.WhichOneof("record_type") == "history":
            rows.append(
                {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            )
    return rows
