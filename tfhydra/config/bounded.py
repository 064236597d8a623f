"""Readers with limits: YAML and JSON that came from a directory, parsed only when they are small enough to walk.

A run or sweep directory may come from anyone (tfhydra/trust), and a file of 2 kB can still cost a reader
forever: YAML aliases nested nine deep expand to 10⁹ nodes when walked ("billion laughs"), and a deeply
nested list exhausts Python's recursion in the composer or in `json.loads`. So every YAML or JSON file that
tfhydra reads back from a directory is first measured, without building it: its size in bytes, the depth
of its nesting and the number of nodes it expands to, aliases counted as the nodes they stand for. A file
over any limit is refused with the figure (`TooLarge`, a ValueError), before a single node is built.

The limits are far above what tfhydra or Hydra write (a sweep's multirun.yaml is a few kB, 3 to 10 levels
deep, a few thousand nodes; metrics.json holds one epoch entry per epoch) and far below what takes a
reader more than a fraction of a second. Ground floor: imports nothing of tfhydra, so the record room (metrics.json)
and the trust boundary (tfhydra/trust) read through it alike.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_BYTES = 16 * 2**20  # 16 MiB: a record of a 10⁴-epoch run is ~2 MiB
MAX_DEPTH = 64  # nesting levels: Hydra's configs are 3-10 deep
MAX_NODES = 500_000  # scalars and collections after expanding aliases


class TooLarge(ValueError):
    """A file over one of the limits: the message names the figure and the limit."""


def read_text_bounded(path: Path) -> str:
    """The file's text, refused (TooLarge) above MAX_BYTES before it is read; OSError/UnicodeDecodeError as usual."""
    size = Path(path).stat().st_size
    if size > MAX_BYTES:
        raise TooLarge(f"it is {size} bytes, above the {MAX_BYTES}-byte limit for a file read back from a directory")
    return Path(path).read_text(encoding="utf-8")


def check_yaml_shape(text: str, loader=None) -> None:
    """TooLarge when `text` nests deeper than MAX_DEPTH or expands to more than MAX_NODES nodes.

    Reads YAML's event stream (the parser keeps its own stack, so depth costs no recursion) and counts
    each alias as the size of the node its anchor names, so the count is that of the walk a reader would
    do, reached without doing it. yaml.YAMLError for text that is not YAML, as the loader would raise."""
    import yaml

    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise TooLarge(f"it is above the {MAX_BYTES}-byte limit for a file read back from a directory")
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (expanded nodes, levels it spans: 0 for a scalar)
    open_nodes: list[tuple[str | None, int, int]] = []  # (anchor, nodes before it, deepest level inside)
    nodes = depth = 0
    for event in yaml.parse(text, Loader=loader or getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        if isinstance(event, yaml.AliasEvent):
            size, below = anchors.get(event.anchor, (1, 0))
            nodes += size
            _reach(open_nodes, depth + below)
        elif isinstance(event, yaml.ScalarEvent):
            nodes += 1
            if event.anchor:
                anchors[event.anchor] = (1, 0)
        elif isinstance(event, yaml.CollectionStartEvent):
            nodes, depth = nodes + 1, depth + 1
            if depth > MAX_DEPTH:
                raise TooLarge(f"it nests deeper than {MAX_DEPTH} levels")
            open_nodes.append((event.anchor, nodes - 1, depth))
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, before, deepest = open_nodes.pop()
            _reach(open_nodes, deepest)
            if anchor:
                anchors[anchor] = (nodes - before, deepest - depth + 1)  # levels it adds where it is repeated
            depth -= 1
        if nodes > MAX_NODES:
            raise TooLarge(f"it expands to more than {MAX_NODES} nodes (aliases counted as what they repeat)")


def _reach(open_nodes: list, level: int) -> None:
    """Note that the innermost open collection holds something at `level`; TooLarge past MAX_DEPTH."""
    if level > MAX_DEPTH:
        raise TooLarge(f"it nests deeper than {MAX_DEPTH} levels (aliases counted as what they repeat)")
    if open_nodes and level > open_nodes[-1][2]:
        open_nodes[-1] = (*open_nodes[-1][:2], level)


def load_json_bounded(text: str) -> Any:
    """`json.loads(text)`, with nesting past Python's recursion limit a ValueError (TooLarge), not a RecursionError."""
    if len(text) > MAX_BYTES:
        raise TooLarge(f"it is above the {MAX_BYTES}-byte limit for a file read back from a directory")
    try:
        return json.loads(text)
    except RecursionError:
        raise TooLarge("it nests too deep to read") from None


def value_shape(value: Any) -> tuple[int, int]:
    """(levels, nodes) of a plain Python value as YAML would nest it (a scalar: 0 levels, 1 node), walked without
    recursion: the pre-flight measures an override's value before OmegaConf's recursive code sees it."""
    levels = nodes = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if isinstance(item, (list, tuple, dict)):
            levels = max(levels, depth + 1)
            children = item.values() if isinstance(item, dict) else item
            nodes += len(item) if isinstance(item, dict) else 0  # its keys are YAML nodes too
            stack.extend((child, depth + 1) for child in children)
            if nodes + len(stack) > MAX_NODES:  # enough to refuse; no need to walk the rest
                return levels, nodes + len(stack)
    return levels, nodes


def written_too_large(key: str, value: Any) -> str | None:
    """Why `value`, written at the dotted `key` of a saved config, would be refused by the readers here (the
    one set of limits for writing and reading back); None when they would read it."""
    levels, nodes = value_shape(value)
    levels += key.count(".") + 1  # the key's own mappings hold it
    if levels > MAX_DEPTH:
        return f"it nests {levels} levels deep in the saved config, above the {MAX_DEPTH}-level limit"
    if nodes > MAX_NODES:
        return f"it holds more than {MAX_NODES} values, above the limit for a saved config"
    return None
