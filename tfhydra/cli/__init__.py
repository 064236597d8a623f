"""The command line: what happens between the shell and a run, before TensorFlow is imported.

preflight.py (every check of a command line, before any job), help.py (`--help GROUP`), console.py (a single
run's first and last lines).
"""
