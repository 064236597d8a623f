"""What a reader of a run sees first: the task's headline figures (RMSE and R² for a regression, AUC and accuracy
for binary, macro F1 and AUC for multi-label, accuracy for classification), and the words for a tie the best epoch
was chosen from.

The task room owns which figures lead (`Task.headline`, tfhydra/task/); a run writes them into its record's `task`
section (`task.headline`), and every reader asks this module: the record's `summary` block, the end line of a run
(tfhydra/runner/phase_report.py), the sweep summary (tfhydra/sweep/) and the notebook's `Result`. A figure the run
did not log (the user's `trainer.metrics` left it out) is skipped; a record that names none (a user's own task, a
record from before the headline) leads with the monitored metric, as before. The keys other tools read keep their
names: `best.<monitor>`, the test block's metrics, `examples_per_second`. No TensorFlow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from tfhydra.platform.terminal import figure
from tfhydra.record.monitor import is_figure

VAL = "val_"


class Recorded(Protocol):
    """What the summary block reads of a run record (tfhydra/record/__init__.py `RunRecord`)."""

    status: Any
    error: str | None
    monitor: str
    task: dict | None
    best: dict | None
    test: dict | None
    epochs_run: int
    examples_per_second: float | None
    wall_seconds: float | None


def rounded(value: Any) -> Any:
    """A figure as people read it (4 significant digits: `0.0010000000474974513` -> `0.001`); else as it is."""
    return float(f"{value:.4g}") if isinstance(value, float) else value


def test_name(monitor: str) -> str:
    """The test block's name of a validation metric: `val_accuracy` -> `accuracy` (a training metric as it is)."""
    return monitor[len(VAL) :] if monitor.startswith(VAL) else monitor


def headline(task: Mapping | None, best: Mapping | None, test: Mapping | None) -> tuple[str, ...]:
    """The names (as the test block names them: `rmse`, without `val_`) of the figures to show first: the record's
    `task.headline` that the run logged (in the best epoch's logs or the test block); empty: none (the readers then
    lead with the monitored metric)."""
    named = task.get("headline") if isinstance(task, Mapping) else None
    best, test = best or {}, test or {}
    return tuple(
        name
        for name in (named if isinstance(named, list) else [])
        if isinstance(name, str) and (f"{VAL}{name}" in best or name in test)
    )


def leading(figures: Mapping, names: tuple[str, ...], prefix: str = "") -> dict:
    """`figures` with the headline's (`prefix` + name) first, in the headline's order, then the others as they were."""
    first = {f"{prefix}{n}": figures[f"{prefix}{n}"] for n in names if f"{prefix}{n}" in figures}
    return {**first, **{k: v for k, v in figures.items() if k not in first}}


def epochs_in_words(epochs: list[int]) -> str:
    """`[4, 5, 6, 9]` -> `4-6, 9`: tied epochs, short."""
    runs: list[list[int]] = []
    for epoch in sorted(epochs):
        if runs and epoch == runs[-1][-1] + 1:
            runs[-1].append(epoch)
        else:
            runs.append([epoch])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def tie_in_words(tie: Any, monitor: str) -> str | None:
    """The record's `best.tie` as one clause: which epochs tied on the monitor, and what chose among them; None
    when the best epoch had no tie (or the block is not one this reader knows)."""
    if not isinstance(tie, Mapping) or not isinstance(tie.get("epochs"), list):
        return None
    epochs = [e for e in tie["epochs"] if isinstance(e, int) and not isinstance(e, bool)]
    how = "the lowest val_loss" if tie.get("by") == "val_loss" else "the earliest (equal val_loss)"
    return (
        f"epochs {epochs_in_words(epochs)} tied at {monitor}={figure(tie.get('value'))}: "
        f"epoch {tie.get('kept')} kept, {how}"
    )


def figures_in_words(figures: Mapping, names: tuple[str, ...], prefix: str = "") -> str:
    """`rmse=58.3 r2=0.44` of the names `figures` holds (as `prefix` + name); '' when it holds none."""
    return " ".join(f"{prefix}{n}={figure(figures[f'{prefix}{n}'])}" for n in names if f"{prefix}{n}" in figures)


def best_in_words(task: Mapping | None, best: Mapping | None, test: Mapping | None, monitor: str) -> str:
    """The chosen epoch as the end line and the notebook say it, headline first: `best val_rmse=60.01 val_r2=0.41 at
    epoch 12 (chosen by val_loss=3601)`; with the monitor among the headline, `best val_accuracy=0.9778 at epoch 17`.
    A tie the choice broke follows in brackets."""
    best = best or {}
    names = headline(task, best, test)
    shown = figures_in_words(best, names, VAL)
    step = f", step {best['step']}" if best.get("step") is not None else ""  # trainer.val_every_steps: a validation
    said = f"best {shown or f'{monitor}={figure(best.get(monitor))}'} at epoch {best.get('epoch')}{step}"
    notes = []
    if shown and monitor not in [f"{VAL}{n}" for n in names]:
        notes.append(f"chosen by {monitor}={figure(best.get(monitor))}")
    tie = tie_in_words(best.get("tie"), monitor)
    if tie:
        notes.append(tie)
    return f"{said} ({'; '.join(notes)})" if notes else said


def tested_in_words(task: Mapping | None, best: Mapping | None, test: Mapping | None, monitor: str) -> str:
    """The kept weights' test figures, headline first: `test rmse=58.3 r2=0.44`; '' when the test block holds none."""
    names = headline(task, best, test) or (test_name(monitor),)
    shown = figures_in_words(test or {}, names)
    return f"test {shown}" if shown else ""


def summary_figures(task: Mapping | None, best: Mapping | None, test: Mapping | None, monitor: str) -> dict:
    """The record summary's `best` block: the epoch, the headline's validation figures, then the monitored one (its
    key, `best.<monitor>`, as other tools read it); unrounded (the record rounds)."""
    best = best or {}
    names = headline(task, best, test)
    block: dict[str, Any] = {"epoch": best.get("epoch")}
    if best.get("step") is not None:  # trainer.val_every_steps: the best is a validation within the epoch
        block["step"] = best["step"]
    block.update({f"{VAL}{n}": best[f"{VAL}{n}"] for n in names if f"{VAL}{n}" in best})
    block[monitor] = best.get(monitor)
    return block


def headline_figures(task: Mapping | None, best: Mapping | None, test: Mapping | None, monitor: str) -> dict:
    """{`val_<name>`: the best epoch's figure, `test_<name>`: the kept weights' test figure} of the headline, the
    figures the run has (a notebook's `Result.headline`)."""
    best, test = best or {}, test or {}
    names = headline(task, best, test)
    found = {f"{VAL}{n}": best[f"{VAL}{n}"] for n in names if is_figure(best.get(f"{VAL}{n}"))}
    if not names and is_figure(best.get(monitor)):  # no headline: the monitored metric, as the end line says it
        found[monitor] = best[monitor]
    found.update({f"test_{n}": test[n] for n in names or (test_name(monitor),) if is_figure(test.get(n))})
    return found


def summary_block(record: Recorded) -> dict:
    """The record's `summary` (metrics.json's first block, `RunRecord.summary`): how the run ended, the best epoch
    with the headline's validation figures and the monitored one, the tie it was chosen from (null: none), and the
    kept weights' test figures, headline first; rounded to 4 significant digits."""
    best, test = record.best or {}, record.test or {}
    metrics = test.get("metrics") or {}
    chosen = summary_figures(record.task, best, metrics, record.monitor)
    tested = leading(metrics, headline(record.task, best, metrics) or (test_name(record.monitor),))
    return {
        "status": str(record.status),
        "error": record.error,
        "best": {k: rounded(v) for k, v in chosen.items()} if best else None,
        "tie": tie_in_words(best.get("tie"), record.monitor),
        "test": {k: rounded(v) for k, v in tested.items()} if test else None,
        "test_examples": test.get("examples"),
        "epochs_run": record.epochs_run,
        "examples_per_second": rounded(record.examples_per_second),
        "wall_seconds": rounded(record.wall_seconds),
    }
