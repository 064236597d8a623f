"""The model card: `export/README.md`, what a person opening the export folder reads first.

Written from the run record once the record is final (tfhydra/runner/phase.py `conclude`), so every figure in it is
the record's: the task, the data and its splits, the test split's figures on the exported weights (measured once,
never used to choose), the best validation epoch, the command that reproduces the run, the versions, and what
compression did. Hugging Face's Trainer writes such a card; Model Garden keeps its experiment config beside the
export. Nothing here imports TensorFlow: `tfhydra-predict RUN_DIR --info` prints the card without loading a model.
"""

from __future__ import annotations

from pathlib import Path

from tfhydra.platform.terminal import figure
from tfhydra.record.run_record import RunRecord, Status
from tfhydra.record.rundir import RunPaths

CARD = "README.md"


def card_path(run_dir: Path) -> Path:
    return RunPaths(run_dir).export / CARD


def model_card(record: RunRecord, reproduce: str) -> str:
    """The card's Markdown, from the record alone."""
    data, task = record.data or {}, record.task or {}
    lines = [
        f"# Model card: {Path(record.run_dir).name or 'run'}",
        "",
        "Written by tfhydra from this run's record (`../metrics.json`, every field: tfhydra's docs/record.md); the",
        "figures below are the record's.",
        "",
        "## What it is",
        f"- **Task**: {task.get('name')}{_classes(data)}",
        f"- **Model**: {record.model} ({_count(record.params)} parameters), trained with Keras "
        f"{(record.keras or {}).get('version', '?')}, policy {record.policy}",
        f"- **Data**: {data.get('name')}, inputs of shape {data.get('input_shape')}; {_splits(data)}",
    ]
    if data.get("digest"):
        lines.append(f"- **Data digest**: `{data['digest']}`")
    lines += ["", "## How good it is", *_figures(record), "", "## Files", "| format | path (in the run directory) |"]
    lines += ["|---|---|", *(f"| {name} | `{path}` |" for name, path in (record.exports or {}).items())]
    compression = record.compression or {}
    if compression.get("scheme") not in (None, "none"):
        sparsity = (compression.get("sparsity") or {}).get("overall")
        lines += ["", "## Compression", f"- scheme: {compression['scheme']}"]
        if sparsity is not None:
            lines.append(f"- sparsity: {figure(sparsity)}")
        for key in ("keras_val_accuracy", "keras_test_accuracy"):
            if compression.get(key) is not None:
                lines.append(f"- {key}: {figure(compression[key])}")
    lines += ["", "## Reproduce it", "```bash", reproduce, "```", "", "## Made with"]
    versions = ", ".join(f"{name} {version}" for name, version in record.versions.items() if version)
    git = record.git or {}
    lines.append(f"{versions}" + (f"; git {git.get('commit')}{' (dirty)' if git.get('dirty') else ''}" if git else ""))
    return "\n".join(lines) + "\n"


def write_card(run_dir: Path, record: RunRecord, reproduce: str) -> Path | None:
    """`export/README.md` for a completed run that exported something; None (nothing written) otherwise."""
    if not record.exports or record.status != Status.COMPLETED:
        return None
    path = card_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{CARD}.tmp")
    staged.write_text(model_card(record, reproduce), encoding="utf-8")
    staged.replace(path)  # whole or absent: a reader never sees half a card
    return path


def _classes(data: dict) -> str:
    names = data.get("class_names") or []
    if not names:
        return ""
    shown = ", ".join(str(n) for n in names[:10]) + (", ..." if len(names) > 10 else "")
    return f" ({len(names)} classes: {shown})"


def _splits(data: dict) -> str:
    sizes = [(data.get(f"{split}_size"), split) for split in ("train", "val", "test")]
    return " / ".join(f"{size} {name}" for size, name in sizes if size) + " examples"


def _count(params: int | None) -> str:
    return f"{params:,}" if params is not None else "?"


def _figures(record: RunRecord) -> list[str]:
    lines = []
    test = record.test or {}
    if test.get("metrics"):
        lines += [
            f"Test split ({test.get('examples')} examples), measured once on the exported weights (epoch "
            f"{(test.get('weights') or {}).get('epoch')}), never used to choose:",
            "",
            "| metric | test |",
            "|---|---|",
            *(f"| {name} | {figure(value)} |" for name, value in test["metrics"].items()),
        ]
    else:
        lines.append("No test split (`data.test_fraction=0`, or a source without one): no test figure.")
    best = record.best or {}
    if best:
        chosen = ", ".join(f"{k}={figure(v)}" for k, v in best.items() if k.startswith("val_"))
        lines += ["", f"Chosen on validation (`{record.monitor}`): epoch {best.get('epoch')}, {chosen}."]
    return lines
