"""One table of runs: each run's status, the config keys that differ between the runs (keys equal in every run
are hidden, as `dvc exp show` does), the task's headline validation and test figures, epochs, training time to the
best epoch, examples/s, why training stopped, and its data digest, marked where the same data source changed.

Every file is read as data: the record by its bounded reader (tfhydra/record/run_record.py `load_record`), the
saved config by the trust room's display reader (tfhydra/trust/readers.py `plain_file`: plain YAML, nothing
resolved or run); a directory that holds neither is skipped with a note. No TensorFlow.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tfhydra.config.errors import ConfigError
from tfhydra.platform.terminal import figure, shown_path
from tfhydra.record.headline import headline_figures
from tfhydra.record.run_record import RecordError, RunRecord, load_record
from tfhydra.record.rundir import RunPaths, SweepPaths
from tfhydra.trust.readers import plain_file

HIDDEN = ("hydra", "trainer.callbacks")  # never compared: Hydra's own section, callables' nodes
MAX_RUNS = 10_000  # runs one comparison reads at most (a directory of directories is walked one level)


@dataclass
class Comparison:
    """The table: `columns`, then one dict per run in `rows`; `notes` for what was skipped or changed."""

    columns: list[str]
    rows: list[dict]
    notes: list[str] = field(default_factory=list)

    def sorted_by(self, column: str, descending: bool = False) -> Comparison:
        if column not in self.columns:
            raise ConfigError("--sort", column, f"one of the table's columns: {', '.join(self.columns)}", "no such")
        present = [r for r in self.rows if r.get(column) not in (None, "")]
        absent = [r for r in self.rows if r.get(column) in (None, "")]
        present.sort(key=lambda r: _sort_key(r[column]), reverse=descending)
        return Comparison(self.columns, present + absent, self.notes)

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.DictWriter(out, self.columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows)
        return out.getvalue()

    def to_markdown(self) -> str:
        lines = ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += [
            "| " + " | ".join(_cell(r.get(c)).replace("|", "\\|") for c in self.columns) + " |" for r in self.rows
        ]
        return "\n".join(lines + [f"\n{n}" for n in self.notes]) + "\n"

    def to_text(self) -> str:
        cells = [self.columns, *([_cell(r.get(c)) for c in self.columns] for r in self.rows)]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.columns))]
        lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
        return "\n".join([*lines, *self.notes]) + "\n"

    def _repr_markdown_(self) -> str:  # a notebook shows the table
        return self.to_markdown()

    def __str__(self) -> str:
        return self.to_text()


def compare(directories: Sequence[str | Path]) -> Comparison:
    """The table of every run under `directories` (a run directory, a sweep's directory, or a folder of runs):
    `tfhydra-compare`'s, and `tfhydra.compare([...])` in a notebook (shown as Markdown; `.sorted_by(column)`,
    `.to_csv()`, `.rows`)."""
    if isinstance(directories, (str, Path)):
        directories = [directories]
    runs, notes = [], []
    for directory in directories:
        found = list(_runs_in(Path(directory)))
        if not found:
            notes.append(f"{directory}: no run record here (a run, a sweep or a folder of runs): skipped")
        runs += found
        if len(runs) > MAX_RUNS:
            raise ConfigError("RUN_OR_SWEEP_DIR", str(directory), f"at most {MAX_RUNS} runs", "too many runs")
    records, configs = [], []
    for run in runs:
        try:
            records.append(load_record(run))
        except (OSError, RecordError) as error:
            notes.append(f"{run}: its record is not readable ({str(error).splitlines()[0]}): skipped")
            continue
        saved = plain_file(RunPaths(run).config, run)
        if not isinstance(saved, dict):
            notes.append(f"{run}: its saved config is not plain YAML: its keys are not compared")
        configs.append(dict(_leaves(saved)) if isinstance(saved, dict) else {})
    differing = _differing(configs)
    rows = [_row(r, c, differing) for r, c in zip(records, configs, strict=True)]
    notes += _data_changes(rows)
    columns = ["run", "status", *differing, *_figure_columns(rows), "epochs", "best_epoch", "seconds_to_best",
               "examples_per_second", "stop_reason", "data"]  # fmt: skip
    return Comparison(columns, rows, notes)


def _runs_in(directory: Path) -> Iterable[Path]:
    if RunPaths(directory).metrics.is_file():
        yield directory
    elif SweepPaths(directory).jobs():
        yield from sorted(SweepPaths(directory).jobs())
    elif directory.is_dir():
        yield from sorted(p for p in directory.iterdir() if RunPaths(p).metrics.is_file())


def _leaves(node, prefix: str = "") -> Iterable[tuple[str, object]]:
    for key, value in node.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if path.startswith(HIDDEN):
            continue
        if isinstance(value, dict) and value:
            yield from _leaves(value, path)
        else:
            yield path, value if not isinstance(value, (dict, list)) else repr(value)


def _differing(configs: list[dict]) -> list[str]:
    keys = sorted(set().union(*configs)) if configs else []
    return [k for k in keys if len({repr(c.get(k, "(unset)")) for c in configs}) > 1]


def _row(record: RunRecord, config: dict, differing: list[str]) -> dict:
    best, epochs = record.best or {}, record.history or []
    seconds = record.train_seconds_per_epoch or []
    best_epoch = best.get("epoch")
    to_best = sum(s or 0 for s in seconds[:best_epoch]) if best_epoch and seconds else None
    return {
        "run": shown_path(record.run_dir) if record.run_dir else "?",
        "status": str(record.status),
        **{k: config.get(k, "(unset)") for k in differing},
        **headline_figures(record.task, best, (record.test or {}).get("metrics"), record.monitor),
        "epochs": record.epochs_run or len(epochs),
        "best_epoch": best_epoch,
        "seconds_to_best": to_best,
        "examples_per_second": record.examples_per_second,
        "stop_reason": getattr(record, "stop_reason", None),
        "data": _data(record),
        "_source": ((record.data or {}).get("name"), str(config.get("data.path"))),
    }


def _figure_columns(rows: list[dict]) -> list[str]:
    names = [k for r in rows for k in r if k.startswith(("val_", "test_"))]
    return sorted(dict.fromkeys(names), key=lambda n: (not n.startswith("val_"), n))


def _data(record: RunRecord) -> str:
    data = record.data or {}
    if "digest" not in data:
        return "unknown"  # recorded before runs kept a digest
    return data["digest"] or "(no path)"


def _data_changes(rows: list[dict]) -> list[str]:
    """A note per data source whose digest differs between runs, and each such run's `data` cell marked `*`."""
    by_source: dict[tuple, set] = {}
    for row in rows:
        if row["data"] not in ("unknown", "(no path)"):
            by_source.setdefault(row["_source"], set()).add(row["data"])
    notes = []
    for source, digests in by_source.items():
        if len(digests) > 1:
            notes.append(
                f"* data changed: {source[0]} at {source[1]} differs between these runs ({len(digests)} digests)"
            )
            for row in rows:
                if row["_source"] == source and row["data"] not in ("unknown", "(no path)"):
                    row["data"] = f"{row['data']} *"
    return notes


def _cell(value) -> str:
    if value is None:
        return ""
    return figure(value) if isinstance(value, float) else str(value)


def _sort_key(value):
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))
