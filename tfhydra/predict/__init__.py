"""tfhydra-predict: answer on new, unlabelled data with a finished run's exported model (docs/deploy.md).

Files: cli.py (the command: its arguments, `main`, and what it prints), __main__.py (`python -m tfhydra.predict`),
inputs.py (the INPUTs as one stream), image_checks.py (the image files refused before decoding), tables.py (CSV and
text INPUTs), stream.py (the one element type), layout.py (what the served model takes), output.py (batches through
the model, written as CSV or JSON Lines).

This face hands on the command's names (`from tfhydra.predict import main`); importing it imports no TensorFlow.
"""

from tfhydra.predict.cli import main, parse_arguments, predict

__all__ = ["main", "parse_arguments", "predict"]
