"""The recipe (tfhydra/runner/job.py) and its phase runner (tfhydra/runner/phase.py) pass state in an object, not hand
to hand: no function takes more than 5 parameters (`self`/`cls` not counted; keyword-only and *args/**kwargs counted),
and no one-item list is used as an out-parameter. Parsed with `ast`: no TensorFlow is imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECIPE = [ROOT / "tfhydra" / "runner" / "job.py", ROOT / "tfhydra" / "runner" / "phase.py"]
MOST = 5


def parameter_counts(source: str) -> dict[str, int]:
    """{qualified function name: its parameters}, methods' `self`/`cls` left out."""
    counts: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = child.args
                positional = [*args.posonlyargs, *args.args]
                if isinstance(node, ast.ClassDef) and positional and positional[0].arg in ("self", "cls"):
                    positional = positional[1:]
                counts[prefix + child.name] = (
                    len(positional) + len(args.kwonlyargs) + (args.vararg is not None) + (args.kwarg is not None)
                )
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(source), "")
    return counts


def out_parameters(source: str) -> list[str]:
    """Names bound to a one-item list literal and later written through `[0]` (`x = [0]` ... `x[0] = ...`)."""
    tree = ast.parse(source)
    one_item = {
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.List) and len(n.value.elts) == 1
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    return sorted(
        {
            t.value.id
            for n in ast.walk(tree)
            if isinstance(n, (ast.Assign, ast.AugAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in one_item
        }
    )


@pytest.mark.parametrize("path", RECIPE, ids=lambda p: p.name)
def test_no_recipe_function_takes_more_than_five_parameters(path):
    counts = parameter_counts(path.read_text())
    assert counts, f"{path} has no functions: the guard would pass having checked nothing"
    assert {name: n for name, n in counts.items() if n > MOST} == {}


@pytest.mark.parametrize("path", RECIPE, ids=lambda p: p.name)
def test_no_recipe_function_uses_an_out_parameter(path):
    assert out_parameters(path.read_text()) == []


def test_the_guards_fail_on_the_shapes_they_forbid():
    """The recipe as it was (10 parameters, `examples_per_epoch = [0]` written through [0]) is caught."""
    broken = (
        "def train_and_export(cfg, strategy, stop, paths, record, recorder, examples_per_epoch, earlier,\n"
        "                     callbacks=(), trackers=None, *, test=True):\n"
        "    examples_per_epoch[0] = 1\n"
        "class Runner:\n"
        "    def method(self, a, b, c, d, e):\n"
        "        pass\n"
        "    def wide(self, a, b, c, d, e, **more):\n"
        "        pass\n"
        "def train_phase():\n"
        "    examples_per_epoch = [0]\n"
        "    examples_per_epoch[0] += 1\n"
    )
    counts = parameter_counts(broken)
    assert counts == {"train_and_export": 11, "Runner.method": 5, "Runner.wide": 6, "train_phase": 0}
    assert {n for n, c in counts.items() if c > MOST} == {"train_and_export", "Runner.wide"}
    assert out_parameters(broken) == ["examples_per_epoch"]
