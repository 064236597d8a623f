"""The name the user runs tfhydra's training command by, for the commands tfhydra prints (resume, reproduce,
evaluate). A neutral module on the ground floor: the recipe, the sweep room and the console all print commands.

tfhydra/__main__.py sets it from the name the process was started by; in another process (a notebook, a sweep
worker started by a launcher) it is the checkout's `python train.py`, or the installed `tfhydra-train`."""

from __future__ import annotations

from pathlib import Path

_CHECKOUT = (Path(__file__).resolve().parents[2] / "train.py").is_file()
_NAME = ["python train.py" if _CHECKOUT else "tfhydra-train"]
_BY_SCRIPT = {"__main__.py": "python -m tfhydra", "train.py": "python train.py"}


def set_command(script: str) -> None:
    """Called once by the entry point with `os.path.basename(sys.argv[0])`."""
    _NAME[0] = _BY_SCRIPT.get(script, "tfhydra-train")


def train_command() -> str:
    return _NAME[0]


def evaluate_command() -> str:
    return "tfhydra-evaluate" if _NAME[0].startswith("tfhydra") else "python -m tfhydra.evaluate"
