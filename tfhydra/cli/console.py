"""What a single run says on the console: its first and last lines (a mistake as one line: tfhydra/config/errors.py).

Not for sweeps: a sweep's jobs record their errors (tfhydra/sweep/trial.py) and the sweep callback prints the
sweep's summary (tfhydra/sweep/callback.py).
"""

from __future__ import annotations

import logging
from pathlib import Path

from tfhydra.platform.terminal import shorten_console_lines, shown_path


def start_summary() -> None:
    """A single run's first line: where it writes, and what the command changed from the defaults."""
    from hydra.core.hydra_config import HydraConfig

    hydra = HydraConfig.get()
    shorten_console_lines()  # at a terminal: the time, not Hydra's 40-character header (train.log keeps it)
    overrides = " ".join(hydra.overrides.task) or "none (the defaults)"
    logging.getLogger("tfhydra").info(
        "run directory %s; overrides: %s", shown_path(hydra.runtime.output_dir), overrides
    )


def end_summary() -> None:
    """After a single run: the result, the paths that matter and the commands that look further (from the
    record, so it says what the run directory holds)."""
    from hydra.core.hydra_config import HydraConfig

    from tfhydra.record.run_record import read_record

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    record = read_record(run_dir)
    if record is None:
        return
    log = logging.getLogger("tfhydra")
    shown = shown_path(run_dir)
    if record.exports:
        exported = ", ".join(record.exports.values())
        log.info(
            "exported (in the run directory): %s%s",
            exported,
            "; TF Serving: export/serving" if "saved_model" in record.exports else "",
        )
    from tfhydra.platform.command import evaluate_command

    evaluate = evaluate_command()
    looks = [f"tensorboard --logdir {Path(shown) / 'tensorboard'}"] if (run_dir / "tensorboard").is_dir() else []
    if {"saved_model", "tflite"} & set(record.exports or {}):  # what evaluate runs (tfhydra/export/served.py)
        looks.append(f"{evaluate} {shown}")
    log.info("look further: %s", "  |  ".join([*looks, f"the record: {Path(shown) / 'metrics.json'}"]))
