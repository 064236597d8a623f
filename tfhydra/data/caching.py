"""What `data.cache` does with each split, and why: the decision `build_datasets` logs and records.

`auto` (the default) keeps a split in memory only when it fits the budget (tfhydra/data/budget.py) as
cached, i.e. in the dtype the source stores (uint8 images stay uint8: the float scaling comes after the
cache), estimated from one decoded example times the split's size. Otherwise the split streams from its
source every epoch. Sources already in memory (arrays, tables, the Keras datasets) decode nothing, so
`auto` does not copy them again. `memory` forced beyond the budget is a warning with the figures.
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
    """One split's cache: `memory`, `file` (`data.cache=<prefix>`) or `off`, and why, for the log and the record."""
    kind: str
    reason: str
    estimated_bytes: int | None = None

    def as_dict(self) -> dict:
        return {"cache": self.kind, "reason": self.reason, "estimated_bytes": self.estimated_bytes}


def example_bytes(dataset: tf.data.Dataset) -> int:
    """Bytes one cached element takes: its tensors' data (string tensors: their bytes) plus tf.data's overhead."""
    element = next(iter(dataset.take(1)), None)
    if element is None:
        return 0
    total = 0
    for tensor in tf.nest.flatten(element):
        value = tensor.numpy()
        total += TENSOR_OVERHEAD + (sum(len(v) for v in value.reshape(-1)) if tensor.dtype == tf.string
                                    else value.nbytes)
    return total


class CacheBudget:
    """The memory budget shared by the splits of one run, spent in order (training first)."""

    def __init__(self, value):
        self.value = value
        self._budget: tuple[int, str] | None = None
        self.spent = 0

    @property
    def figures(self) -> tuple[int, str]:
        if self._budget is None:
            self._budget = cache_budget(self.value)
        return self._budget

    def plan(self, setting, dataset: tf.data.Dataset, split: str, size: int, decodes: bool) -> CachePlan:
        if setting is False:
            return CachePlan("off", "data.cache=false")
        if setting not in ("auto", "memory"):
            return CachePlan("file", f"data.cache={setting}: a file cache")
        if setting == "auto" and not decodes:
            return CachePlan("off", "the examples are in memory already (the source decodes nothing)")
        estimate = example_bytes(dataset) * size
        budget, why = self.figures
        left = budget - self.spent
        fits = estimate <= left
        if setting == "memory":
            if not fits:
                log.warning("data.cache=memory: the %s split takes about %s as cached, over the memory cache budget "
                            "of %s left (%s): it may exhaust memory; data.cache=auto streams it instead", split,
                            human(estimate), human(max(left, 0)), why)
            self.spent += estimate
            return CachePlan("memory", f"data.cache=memory (about {human(estimate)}; budget {human(budget)}: {why})",
                             estimate)
        if fits:
            self.spent += estimate
            return CachePlan("memory", f"about {human(estimate)} as stored fits the memory cache budget of "
                             f"{human(left)} left ({why})", estimate)
        return CachePlan("off", f"about {human(estimate)} as stored is more than the memory cache budget of "
                         f"{human(max(left, 0))} left ({why}): streamed from the source every epoch "
                         "(data.cache=<path prefix> for a file cache)", estimate)
