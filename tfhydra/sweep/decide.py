"""Decide mode (`sweep.decide=true`, docs/sweeps.md "Decide mode"): a `-m` grid run as a staged sweep whose
screen is chosen from the grid and the data, not typed: every setting on a share of the training data for a few
epochs, then the best `k` on all the data for the run's own epochs (tfhydra/sweep/stages.py runs the stages).

The rule (`choose`) is a pure function of the grid's size, the training split's size, its classes and
`trainer.epochs`, so the same command decides the same way when it is run again (resume) and in the pre-flight.
Why these numbers (measured with benchmarks/ab_loop.py --decision, docs/sweeps.md): a screen job costs about a
sixteenth of a full one (a quarter of the epochs on a quarter of the data), so three settings screened and one
promoted train about 1.2 full jobs' worth instead of 3; the share is raised until the screen sees
`MIN_PER_CLASS` examples of each class a epoch, because below that the ranking is noise. Values the command line
sets (`sweep.screen.fraction`, `sweep.screen.epochs`, `sweep.promote`) win over the rule's.
Nothing here imports TensorFlow: the training split's size is counted from the config (and an npz's labels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from tfhydra.config.errors import ConfigError
from tfhydra.config.schema import is_int, is_number
from tfhydra.sweep.stages import Stages, stages_of

KEY = "sweep.decide"
BASE_FRACTION = 0.25  # the screen's share of the training split, before the per-class floor
MIN_PER_CLASS = 30  # training examples of each class the screen sees an epoch, at least
ASSUMED_CLASSES = 10  # when the classes are not known before the data are read
DIGITS_EXAMPLES = 1797  # scikit-learn's bundled digits (conf/data/digits.yaml); tests check it


@dataclass(frozen=True)
class Decision:
    fraction: float  # the screen's data.fraction, in (0, 1]
    epochs: int  # the screen's trainer.epochs, in [1, trainer.epochs]
    promote: int  # settings promoted to the full run, in [1, settings - 1]
    why: str  # one sentence: the inputs and the rule, for the terminal and the summary


def choose(settings: int, examples: int | None, epochs: int, classes: int | None = None) -> Decision:
    """The screen for a grid of `settings` (>= 2) over `examples` training examples of `classes` classes (None:
    not known here), for a full run of `epochs`: k = 1 up to 4 settings, 2 above; a quarter of the epochs (at
    least 2, at most the run's); a quarter of the data, raised so that each class has MIN_PER_CLASS examples."""
    promote = 1 if settings <= 4 else 2
    screen_epochs = min(epochs, max(2, math.ceil(epochs / 4)))
    per_class = classes or ASSUMED_CLASSES
    if examples and examples > 0:
        floor = MIN_PER_CLASS * per_class / examples
        fraction = min(1.0, math.ceil(max(BASE_FRACTION, floor) * 100) / 100)
        data = (
            f"{examples} training examples{f' of {classes} classes' if classes else ''}: "
            f"{'a quarter' if fraction == BASE_FRACTION else f'{fraction:.0%}, so each class has >= {MIN_PER_CLASS}'}"
            f" ({round(fraction * examples)} examples)"
        )
    else:
        fraction, data = BASE_FRACTION, "the training split's size is not known before the data are read: a quarter"
    why = (
        f"decided by sweep.decide from {settings} settings, {data}, {screen_epochs} of trainer.epochs={epochs} "
        f"epochs (a quarter, at least 2), promote {promote} "
        f"({'<= 4 settings: 1' if promote == 1 else '> 4 settings: 2'})"
    )
    return Decision(fraction, screen_epochs, promote, why)


def decide_on(cfg: Any) -> bool:
    return OmegaConf.select(cfg, KEY, default=False) is True if isinstance(cfg, DictConfig) else False


def training_examples(cfg: DictConfig) -> tuple[int | None, int | None]:
    """(training examples, classes) of the config's data as far as the config tells without reading images:
    digits and synthetic from their sizes, npz from its labels; (None, None) for other sources."""
    data = cfg.data
    name = data.get("name")
    if name == "digits":
        return _training_share(DIGITS_EXAMPLES, data, ships_test=False), 10
    if name == "synthetic" and is_int(data.get("train_size")):
        return int(data.train_size), data.get("num_classes")
    if name == "npz" and data.get("path"):
        return _npz_examples(Path(str(data.path)).expanduser(), data)
    return None, None


def _npz_examples(path: Path, data: DictConfig) -> tuple[int | None, int | None]:
    """An npz's training labels (its images are not read): validation held out of them unless shipped."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as arrays:
            labels = arrays[str(data.y_train)]
    except (OSError, KeyError, ValueError):
        return None, None  # the data room says what is wrong with the file, in the job
    if data.get("x_val"):
        return len(labels), len(np.unique(labels))
    return _training_share(len(labels), data, ships_test=bool(data.get("x_test"))), len(np.unique(labels))


def _training_share(examples: int, data: DictConfig, ships_test: bool) -> int:
    """What the hold-outs leave for training (tfhydra/data/splits.py: scikit-learn rounds each held-out share
    up): test first, when the source does not ship one, then validation."""
    test = float(data.get("test_fraction") or 0) if not ships_test else 0.0
    if not 0 <= test < 1:
        return 0  # the data room refuses the split in the job; the rule takes the size as unknown
    rest = examples - math.ceil(examples * test)
    share = float(data.get("val_fraction") or 0) / (1 - test)
    return max(0, rest - math.ceil(rest * share))


def decided_stages(cfg: DictConfig, settings: int) -> Stages:
    """The sweep's stages in decide mode: the rule's values, under any the command line set."""
    if settings < 2:
        raise ConfigError(
            KEY,
            True,
            "a grid of at least 2 settings (e.g. optimizer.lr=1e-3,5e-4,1e-4)",
            f"the grid has {settings} setting: nothing to decide between",
        )
    examples, classes = training_examples(cfg)
    decision = choose(settings, examples, int(cfg.trainer.epochs), classes if is_int(classes) else None)
    chosen = Stages(decision.fraction, decision.epochs, decision.promote, why=decision.why)
    given = stages_of(cfg)
    screen = OmegaConf.select(cfg, "sweep.screen", default=None) or {}
    fraction, epochs = screen.get("fraction"), screen.get("epochs")
    overrides: dict[str, Any] = {
        "fraction": fraction if is_number(fraction) else None,
        "epochs": epochs if is_int(epochs) else None,
        "promote": given.promote if given else None,
    }
    set_here = {k: v for k, v in overrides.items() if v is not None}
    if set_here:
        told = ", ".join(f"sweep.{'' if k == 'promote' else 'screen.'}{k}={v}" for k, v in set_here.items())
        chosen = replace(chosen, **set_here, why=f"{decision.why}; the command line's {told} win")
    return chosen


def sweep_stages(cfg: DictConfig, settings: int | None) -> Stages | None:
    """The stages of a sweep: decide mode's (when the grid's size is known), else those the config sets."""
    if decide_on(cfg) and settings is not None:
        return decided_stages(cfg, settings)
    return stages_of(cfg)


def record_decision(config: DictConfig, stages: Stages) -> None:
    """Write the decided values into the sweep's config before multirun.yaml is saved from it, so the summary
    (rebuilt from disk at any time) reads the same stages and the sentence that says why."""
    with open_dict(config.sweep):  # `decided` is no key of the schema: the sweep's own node is opened for it
        config.sweep.screen.fraction, config.sweep.screen.epochs = stages.fraction, stages.epochs
        config.sweep.promote, config.sweep.decided = stages.promote, stages.why
