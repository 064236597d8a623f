"""A SavedModel read back from a run directory (tfhydra-predict, tfhydra-evaluate, `Result.load_model()`) is a graph
TensorFlow will run, so its ops are read before `tf.saved_model.load` sees it: a run directory is data, and a graph
that reads or writes files, runs Python or connects somewhere is refused in one line naming the op and where it is.

What a model's forward pass never needs is denied in every function and in the main graph (`DENIED`: file reads
and writes, Python callbacks, dataset readers of files, databases and services, summary and debug writers). The
checkpoint ops (`CHECKPOINT`: SaveV2, RestoreV2, MergeV2Checkpoints, ...) are what every SavedModel's saver
holds (its `_traced_save` and `_traced_restore` functions, which only the main graph's saver nodes call), so they
are allowed there and nowhere a caller reaches: not in a function the object graph hands out (`serve`,
`serve_raw`, `__call__`, a signature) or any function those call. A graph tfhydra exports passes as it is
(tests/trust/test_saved_model_ops.py).

Bounded: saved_model.pb is read up to `MAX_BYTES`.
"""

from __future__ import annotations

from pathlib import Path

from tfhydra.config.errors import ConfigError

MAX_BYTES = 1 << 30  # a keras-hub BERT's graph is tens of MB; protobuf's own limit is 2 GiB

DENIED = frozenset(
    {
        # files and Python
        "ReadFile",
        "WriteFile",
        "MatchingFiles",
        "ImmutableConst",
        "PyFunc",
        "PyFuncStateless",
        "EagerPyFunc",
        # datasets that read files or reach a database or a service
        "TFRecordDataset",
        "TFRecordDatasetV2",
        "FixedLengthRecordDataset",
        "FixedLengthRecordDatasetV2",
        "TextLineDataset",
        "CSVDataset",
        "CSVDatasetV2",
        "ExperimentalCSVDataset",
        "SqlDataset",
        "ExperimentalSqlDataset",
        "LMDBDataset",
        "ExperimentalLMDBDataset",
        "MatchingFilesDataset",
        "ExperimentalMatchingFilesDataset",
        "LoadDataset",
        "SaveDataset",
        "SaveDatasetV2",
        "SnapshotDataset",
        "SnapshotDatasetV2",
        "DataServiceDataset",
        "DataServiceDatasetV2",
        "DataServiceDatasetV3",
        "DataServiceDatasetV4",
        "RegisterDataset",
        "RegisterDatasetV2",
        # summaries and debug dumps written to files or databases
        "CreateSummaryFileWriter",
        "CreateSummaryDbWriter",
        "DebugIdentityV2",
        "DebugIdentityV3",
    }
)
CHECKPOINT = frozenset({"SaveV2", "Save", "SaveSlices", "RestoreV2", "Restore", "RestoreSlice", "MergeV2Checkpoints"})


def refusal(pb_bytes: bytes) -> str | None:
    """Why the SavedModel whose saved_model.pb holds `pb_bytes` is not loaded (the op and where), or None."""
    from tensorflow.core.protobuf import saved_model_pb2

    model = saved_model_pb2.SavedModel()
    model.ParseFromString(pb_bytes)
    for graph in model.meta_graphs:
        functions = {f.signature.name: f for f in graph.graph_def.library.function}
        for node in graph.graph_def.node:
            if node.op in DENIED:
                return f"the op {node.op} (node {node.name}), which reads, writes or runs outside the model"
        for name, function in functions.items():
            op = next((n.op for n in function.node_def if n.op in DENIED), None)
            if op is not None:
                return f"the op {op} (in function {name}), which reads, writes or runs outside the model"
        handed_out = set(graph.object_graph_def.concrete_functions) | signature_functions(graph)
        for name in reachable(handed_out, functions):
            op = next((n.op for n in functions[name].node_def if n.op in CHECKPOINT), None)
            if op is not None:
                return f"the checkpoint op {op} in function {name}, which a caller of the model reaches"
    return None


def signature_functions(graph) -> set[str]:
    """The functions the main graph's nodes behind each signature's outputs call."""
    nodes = {node.name: node for node in graph.graph_def.node}
    names = set()
    for signature in graph.signature_def.values():
        for tensor in signature.outputs.values():
            node = nodes.get(tensor.name.split(":")[0].lstrip("^"))
            if node is not None:
                names |= called(node)
    return names


def called(node) -> set[str]:
    """The functions a node (or a function's node_def) names in its attributes (`f`, branches, bodies)."""
    names = set()
    for value in node.attr.values():
        if value.HasField("func"):
            names.add(value.func.name)
        names.update(f.name for f in value.list.func)
    return names


def reachable(start: set[str], functions: dict) -> set[str]:
    """Every library function `start` calls, directly or through others (`start` included)."""
    seen, todo = set(), [name for name in start if name in functions]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in functions[name].node_def:
            todo.extend(n for n in called(node) if n in functions and n not in seen)
    return seen


def check_saved_model(path: Path, accepted: str) -> None:
    """A ConfigError naming the SavedModel directory when its graph is refused or too large; a missing file or one
    that is not a SavedModel's protobuf is left to TensorFlow's loader, which names it as before (nothing in it ran:
    it did not parse)."""
    pb = Path(path) / "saved_model.pb"
    try:
        size = pb.stat().st_size
        data = pb.read_bytes() if size <= MAX_BYTES else b""
    except OSError:
        return
    if size > MAX_BYTES:
        raise ConfigError(str(path), None, accepted, f"its saved_model.pb is {size} bytes, over {MAX_BYTES}")
    try:
        why = refusal(data)
    except Exception:  # noqa: BLE001  (protobuf's DecodeError: not a SavedModel, which TensorFlow's loader says)
        return
    if why is not None:
        raise ConfigError(str(path), None, accepted, f"its graph holds {why}; tfhydra does not load it")
