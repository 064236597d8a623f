"""tfhydra-compare: runs and sweeps side by side, whatever day they ran.

Rooms: table.py (the runs found under the directories given, a sweep's jobs expanded; their config differences,
headline figures and timings as one table; no TensorFlow), cli.py (`tfhydra-compare`), __main__.py
(`python -m tfhydra.comparison`). `tfhydra.compare([...])` is the notebook's way in (the public face's lazy name).

This face names nothing: `from tfhydra.comparison.table import compare`.
"""
