"""The trust boundary: what a run or sweep directory can do to the process that reads or writes it.

- readers.py: the one reader of what a directory says about itself (`.hydra/*.yaml`, `multirun.yaml`):
  `run_overrides`, `run_config`, `completed_run`, `sweep_command`, `plain_file`, and the `--trust-run` /
  `--trust-sweep` flags that lift its allowlist;
- allowlist.py: what those files may hold and why (`Untrusted`: a file refused, in one line);
- tfhydra/config/bounded.py (on the ground floor, which the record room reads through too): every file read back
  from a directory is bounded in size, depth and aliases before it is parsed; its names are handed on here;
- hdf5.py: the one reader of HDF5 weight files, before Keras reads them (no bytes from elsewhere, no array the model
  does not have);
- keras_archive.py: a `.keras` export read back (`Result.load_model("keras")`), its zip and weights member bounded and
  checked before Keras opens it;
- saved_model_ops.py: a SavedModel's graph read before TensorFlow loads it (evaluate, predict, `load_model()`): no
  op that reads or writes files, runs Python or connects, checkpoint ops only in the saver's functions;
- locks.py: one writer per run and sweep directory (a lock held while a command writes there).

- continuation.py: whether an unfinished run or a sweep's job directory may be continued with the config about to
  run (its saved config read through readers.py).

The trust room reads the record room (readers.py and locks.py read the run directory map, tfhydra/record/rundir.py),
never the other way. This face hands on only names of modules that do not read the record room, so importing it
never runs the record face. Import the readers from `tfhydra.trust.readers`, the locks from `tfhydra.trust.locks`.
"""

from tfhydra.config.bounded import TooLarge, load_json_bounded, read_text_bounded
from tfhydra.trust.allowlist import Untrusted

__all__ = ["TooLarge", "Untrusted", "load_json_bounded", "read_text_bounded"]
