"""What `data.cache` does with each split, and why: the decision `build_datasets` logs and records.

`auto` (the default) keeps a split in memory only when it fits the budget (tfhydra/data/budget.py) as
cached, i.e. in the dtype the source stores (uint8 images stay uint8: the float scaling comes after the
cache), estimated from one decoded example times the split's size. Otherwise the split streams from its
source every epoch. Sources already in memory (arrays, tables, the Keras datasets) decode nothing, so
`auto` does not copy them again. `memory` forced beyond the budget is a warning with the figures.

`auto` also caches only a split the run reads again (`Reads`, passed by the caller): a memory cache is
filled during the first pass at the source's speed and pays only from the second, so a split read once
(trainer.epochs=1, a screen stage of one epoch, the test split) streams, decoded and scaled in one map.
A split an epoch reads only part of (trainer.steps_per_epoch / validation_steps below one pass) streams too:
tf.data discards a memory cache its iterator did not fill (cache_dataset_ops.cc), so it would be rebuilt
and thrown away every epoch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import tensorflow as tf

from tfhydra.data.budget import cache_budget, human

log = logging.getLogger("tfhydra")
TENSOR_OVERHEAD = 96  # bytes tf.data's memory cache spends per cached tensor besides its data (measured order)


@dataclass
class CachePlan:
    """One split's cache: `memory`, `file` (`data.cache=<prefix>`) or `off`, and why, for the log and the record;
    `passes`: how many times the run reads the split (None: not known)."""

    kind: str
    reason: str
    estimated_bytes: int | None = None
    passes: float | None = None

    def as_dict(self) -> dict:
        return {
            "cache": self.kind,
            "reason": self.reason,
            "estimated_bytes": self.estimated_bytes,
            "passes": self.passes,
        }


@dataclass(frozen=True)
class Reads:
    """How the run reads its splits (the trainer's keys, passed in by the job: the data room reads no other
    section): `epochs` None = not known (a Python caller), every split may be read again."""

    epochs: int | None = None
    steps_per_epoch: int | None = None  # trainer.steps_per_epoch: training batches an epoch (None: the split)
    validation_steps: int | None = None  # trainer.validation_steps: validation and test batches (None: the split)

    def passes(self, split: str, size: int, batch_size: int) -> float | None:
        """Passes over `split` the run reads: training every epoch, validation every epoch, test once."""
        if self.epochs is None or size <= 0:
            return None
        steps = self.steps_per_epoch if split == "train" else self.validation_steps
        per_epoch = (
            1.0
            if not steps
            else steps * batch_size / size
            if split == "train"
            else (min(steps * batch_size / size, 1.0))
        )  # training repeats to fill its steps; validation is cut short
        return round(per_epoch * (1 if split == "test" else self.epochs), 3)

    def read_once(self, split: str, size: int, batch_size: int) -> str | None:
        """Why a memory cache of `split` would not be read back, or None when it would."""
        passes = self.passes(split, size, batch_size)
        if passes is None:
            return None
        steps, key = (
            (self.steps_per_epoch, "trainer.steps_per_epoch")
            if split == "train"
            else (self.validation_steps, "trainer.validation_steps")
        )
        if steps and steps * batch_size < size:  # an iterator that stops early: tf.data drops the partial cache
            return (
                f"{key}={steps} reads {steps * batch_size} of its {size} examples an epoch: a memory cache "
                "would be dropped unfilled every epoch"
            )
        if split == "test":
            return "read once, after training"
        if passes <= 1:
            return f"one pass: trainer.epochs={self.epochs}" + (f", {key}={steps}" if steps else "")
        return None


def example_bytes(dataset: tf.data.Dataset) -> int:
    """Bytes one cached element takes: its tensors' data (string tensors: their bytes) plus tf.data's overhead."""
    element = next(iter(dataset.take(1)), None)
    if element is None:
        return 0
    total = 0
    for tensor in tf.nest.flatten(element):
        value = tensor.numpy()
        total += TENSOR_OVERHEAD + (
            sum(len(v) for v in value.reshape(-1)) if tensor.dtype == tf.string else value.nbytes
        )
    return total


class CacheBudget:
    """The memory budget shared by the splits of one run, spent in order (training first)."""

    def __init__(self, value, reads: Reads | None = None, batch_size: int = 1):
        self.value, self.reads, self.batch_size = value, reads or Reads(), batch_size
        self._budget: tuple[int, str] | None = None
        self.spent = 0

    @property
    def figures(self) -> tuple[int, str]:
        if self._budget is None:
            self._budget = cache_budget(self.value)
        return self._budget

    def plan(self, setting, dataset: tf.data.Dataset, split: str, size: int, decodes: bool) -> CachePlan:
        passes = self.reads.passes(split, size, self.batch_size)
        if setting is False:
            return CachePlan("off", "data.cache=false", None, passes)
        if setting not in ("auto", "memory"):
            return CachePlan("file", f"data.cache={setting}: a file cache", None, passes)
        if setting == "auto" and not decodes:
            return CachePlan("off", "the examples are in memory already, the source decodes nothing", None, passes)
        once = self.reads.read_once(split, size, self.batch_size) if setting == "auto" else None
        if once:
            return CachePlan("off", f"{once}: streamed from the source", None, passes)
        estimate = example_bytes(dataset) * size
        budget, why = self.figures
        left = budget - self.spent
        fits = estimate <= left
        if setting == "memory":
            if not fits:
                log.warning(
                    "data.cache=memory: the %s split takes about %s as cached, over the memory cache budget "
                    "of %s left (%s): it may exhaust memory; data.cache=auto streams it instead",
                    split,
                    human(estimate),
                    human(max(left, 0)),
                    why,
                )
            self.spent += estimate
            return CachePlan(
                "memory",
                f"data.cache=memory (about {human(estimate)}; budget {human(budget)}: {why})",
                estimate,
                passes,
            )
        if fits:
            self.spent += estimate
            return CachePlan(
                "memory",
                f"about {human(estimate)} as stored fits the memory cache budget of {human(left)} left ({why})",
                estimate,
                passes,
            )
        return CachePlan(
            "off",
            f"about {human(estimate)} as stored is more than the memory cache budget of "
            f"{human(max(left, 0))} left ({why}): streamed from the source every epoch "
            "(data.cache=<path prefix> for a file cache)",
            estimate,
            passes,
        )
