"""What the model takes from the data, set for one source's build: the source's prepared examples (today's token
ids, standardised features, decoded images), or raw text for a model that tokenizes with its own preprocessor
(model=keras_hub, whose builder declares `inputs=raw_text`; the runner asks the model room and hands the answer to
`build_datasets`). A context variable, as `reading_labels`, so no source builder, and no user `_target_` source,
takes a new argument: a source that can give raw text (data=text_csv) asks `wanted_inputs()`; the others give
their prepared examples, and the model's own data check refuses them in one line. No TensorFlow."""

from __future__ import annotations

import contextlib
from contextvars import ContextVar

from tfhydra.config.contracts import PREPARED, RAW_TEXT

__all__ = ["PREPARED", "RAW_TEXT", "giving_inputs", "wanted_inputs"]

_WANTED: ContextVar[str] = ContextVar("tfhydra_model_inputs", default=PREPARED)


@contextlib.contextmanager
def giving_inputs(kind: str):
    """Sources built inside this block give the model `kind` (PREPARED | RAW_TEXT) where they can."""
    token = _WANTED.set(kind)
    try:
        yield
    finally:
        _WANTED.reset(token)


def wanted_inputs() -> str:
    """What the model of the source being built takes (outside `giving_inputs`: prepared examples)."""
    return _WANTED.get()
