"""Seeing into training: TensorFlow's numeric checks (`trainer.check_numerics`, `debug=numerics`) and what their error
says about where a NaN or Inf came from. `trainer.run_eagerly` itself is one argument in each loop (compile's
`run_eagerly`, the custom loop's steps without `tf.function`).

TensorFlow's check-numerics error names the op type (`Log`) and the graph tensor the op read (its input, e.g.
`while/model/nan_layer/sub:0`), never the op's own node name; Keras' traceback filter adds the node that
caught it (`Detected at node nan_model/nan_layer/Log/CheckNumericsV2`), whose scope is the layer the op ran in;
without it, the input's name scope is used: the op's layer whenever the op and its input belong to one layer
(a layer's own arithmetic), the layer that fed it otherwise.
The last frame of the user's code in the op's creation stack (`->` lines) is kept too: it is exact.
"""

from __future__ import annotations

import contextlib
import re

import tensorflow as tf

MARK = "Detected Infinity or NaN"
_OP = re.compile(r'of (graph|eagerly-executing) op "([^"]+)"')
_INPUT = re.compile(r'Input tensor: Tensor\("([^"]+)"')
_NODE = re.compile(r"Detected at node '?([^\s']+?)/CheckNumerics")  # Keras' traceback filter adds it in graphs
_FRAME = re.compile(r"^\s*\+ (\S+) \(L(\d+)\) (\S+)\s*$")
_LIBRARIES = ("packages", "/tensorflow/", "/tf_keras/", "/keras/")  # paths of frames that are not the user's
_CONTROL_FLOW = {"while", "cond", "body", "while_body"}  # scopes tf.function adds around the model's ops


@contextlib.contextmanager
def numeric_checks(cfg_trainer):
    """`trainer.check_numerics`: every op's output checked for NaN/Inf from before the model is built until the
    run ends; turned off again after it, since the jobs of a sweep may share this process."""
    if not cfg_trainer.check_numerics:
        yield
        return
    tf.debugging.enable_check_numerics()
    try:
        yield
    finally:
        tf.debugging.disable_check_numerics()


def numeric_failure(error: BaseException) -> dict | None:
    """{op, where, input, code} from a check-numerics error; None for any other error.

    `op`: the op type that output NaN/Inf; `where`: the name scope of the graph tensor it read (the layer, with
    the model's name first: `model/nan_layer`), null for an op run eagerly (no graph names); `input`: that
    tensor's name; `code`: `file:line function` of the user's code that created the op, when TensorFlow says."""
    text = str(getattr(error, "message", None) or error)
    if MARK not in text:
        return None
    found, tensor, node = _OP.search(text), _INPUT.search(text), _NODE.search(text)
    name = tensor.group(1).rsplit(":", 1)[0] if tensor else None
    scope = [part for part in (node.group(1) if node else name or "").split("/")[:-1] if part not in _CONTROL_FLOW]
    return {
        "op": found.group(2) if found else None,
        "where": "/".join(scope) or None,
        "input": name,
        "code": user_frame(text),
    }


def user_frame(text: str) -> str | None:
    """The last frame of the op's creation stack that is not TensorFlow's or Keras' own code."""
    frames = [m for m in (_FRAME.match(line) for line in text.splitlines()) if m]
    own = [m for m in frames if not any(library in m.group(1) for library in _LIBRARIES)]
    if not own:
        return None
    path, line, function = own[-1].groups()
    return f"{path}:{line} {function}"
