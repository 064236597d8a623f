"""Runs the data room's tests share (tests/shared_runs.py makes each once per session, across xdist workers):
read them, or copy them (`shared_runs.copy_run`) before writing into them."""

from __future__ import annotations

from pathlib import Path

import data_files
import pytest
from conftest import FAST, last_line, run_cli
from shared_runs import made_once

# A short epoch of the MLP, nothing written that no test reads (tests/data/test_data_cli.py).
LEAN = [*FAST, "model=mlp", "export.formats=[]", "logging.tensorboard=false", "data.batch_size=16"]


def tfrecord_sources(folder: Path) -> list[str]:
    """The overrides of `data=tfrecord` on 64 training records in 4 shards and 16 validation records in 2 (28x28x1
    PNGs of 4 classes): the test split is 0.2 of training, so 51 train."""
    train = data_files.write_tfrecords(folder, "train", n=64, shards=4)
    val = data_files.write_tfrecords(folder, "val", n=16, shards=2, seed=1)
    return ["data=tfrecord", f"data.train={train}", f"data.validation={val}"]


def tfrecord_one_epoch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python train.py` LEAN on `tfrecord_sources`, one epoch, as users run it: its run directory (read only).
    Read by test_data_cli (each file source in one epoch) and test_cache_reads (why one epoch caches nothing)."""

    def make(run: Path) -> None:
        sources = tfrecord_sources(run.parent / "records")
        # its label index in its own folder, not the user's: set in this process's environment, which the forked
        # command inherits (`env=` would start a whole new process, a TensorFlow import more, for a variable that
        # is read only when the index is written, tfhydra/data/index.py)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TFHYDRA_CACHE_DIR", str(run.parent / "tfhydra-cache"))
            result = run_cli(*LEAN, *sources, f"hydra.run.dir={run}", cwd=run.parent)
        assert result.returncode == 0, last_line(result.stderr)

    return made_once(tmp_path_factory, "data-tfrecord-one-epoch", make)
