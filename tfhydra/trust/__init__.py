"""The trust boundary: what a run or sweep directory can do to the process that reads or writes it.

- readers.py: the one reader of what a directory says about itself (`.hydra/*.yaml`, `multirun.yaml`):
  `run_overrides`, `run_config`, `completed_run`, `sweep_command`, `plain_file`, and the `--trust-run` /
  `--trust-sweep` flags that lift its allowlist;
- allowlist.py: what those files may hold and why (`Untrusted`: a file refused, in one line);
- bounded.py: every file read back from a directory is bounded in size, depth and aliases before it is parsed;
- hdf5.py: the one reader of HDF5 weight files, before Keras reads them (no bytes from elsewhere, no array the model
  does not have);
- locks.py: one writer per run and sweep directory (a lock held while a command writes there).

This face hands on only the names of modules that do not read the record room: readers.py and locks.py read the
run directory map (tfhydra/record/rundir.py), and the record face hands on the run record, which reads through
bounded.py, so a face of both would make the two faces import each other (tests/structure/test_imports.py). Import
the readers from `tfhydra.trust.readers` and the locks from `tfhydra.trust.locks`.
"""

from tfhydra.trust.allowlist import Untrusted
from tfhydra.trust.bounded import TooLarge, load_json_bounded, read_text_bounded

__all__ = ["TooLarge", "Untrusted", "load_json_bounded", "read_text_bounded"]
