"""Every file a run or a sweep writes stays inside its run or sweep directory.

A real `python train.py` (and `-m`) in a fresh working directory, HOME and TMPDIR: every file under
those and under the repository that is new or changed afterwards must lie in the run (sweep)
directory. The exceptions are per-user caches written by libraries when they are first used,
once per user and not per run (`ALLOWED`):
- the Keras folder `~/.keras`: the dataset cache (`datasets/`, only for mnist, fashion_mnist, cifar10,
  cifar100) and `keras.json`, the config file Keras writes when first imported;
- matplotlib's font cache (`~/.cache/matplotlib/fontlist-*.json`), written on its first import: by
  Keras 3, which tensorflow_model_optimization imports (its prune_registry tries `keras.engine`),
  and by the sweep summary's plot.
Temporary files left in TMPDIR (TensorFlow's, TFLite's converter's) count as escapes.
"""

import fnmatch
import os
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

ALLOWED = ["home/.keras/keras.json", "home/.keras/datasets/*", "home/.cache/matplotlib/fontlist-*.json"]
# Python's and the tools' own, not tfhydra's; tfhydra.egg-info is pip's record of the editable install, which the
# user-project journey (tests/journeys) re-makes while this test may be running beside it; the tools' caches
# (Hypothesis', which property tests beside this one write; mypy's and ruff's, which an editor may); and a
# virtualenv in the checkout (the README's .venv, 80,000 files), skipped by its pyvenv.cfg.
SKIPPED = {"__pycache__", ".pytest_cache", ".git", "tfhydra.egg-info", ".hypothesis", ".mypy_cache", ".ruff_cache"}


def snapshot(root: Path, skip_top=()) -> dict[str, tuple[int, int]]:
    """{path relative to root: (size, mtime)} of every file under root."""
    files = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [
            d
            for d in dirs
            if d not in SKIPPED
            and not (Path(folder) == root and d in skip_top)
            and not (Path(folder, d) / "pyvenv.cfg").is_file()
        ]
        for name in names:
            path = Path(folder) / name
            try:
                stat = path.lstat()
            except FileNotFoundError:  # removed while we looked
                continue
            files[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return files


def changed(before: dict, after: dict) -> set[str]:
    return {path for path, stat in after.items() if before.get(path) != stat}


def run_contained(tmp_path, *args):
    """Run `python train.py ARGS` from <tmp>/work with HOME and TMPDIR inside <tmp>; the files it changed
    under <tmp> and under the repository (outputs/, where runs go by default, left out)."""
    for folder in ("work", "home", "tmp"):
        (tmp_path / folder).mkdir()
    env = {"HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path / "tmp"), "PYTHONDONTWRITEBYTECODE": "1"}
    unset = ("KERAS_HOME", "MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "PYTHONPYCACHEPREFIX")
    saved = {name: os.environ.pop(name) for name in unset if name in os.environ}  # run_cli copies os.environ
    try:
        before_tmp, before_repo = snapshot(tmp_path), snapshot(ROOT, skip_top={"outputs"})
        result = run_cli(*args, cwd=tmp_path / "work", env=env, timeout=600)
        after_tmp, after_repo = snapshot(tmp_path), snapshot(ROOT, skip_top={"outputs"})
    finally:
        os.environ.update(saved)
    assert result.returncode == 0, result.stderr[-3000:]
    return changed(before_tmp, after_tmp), {f"<repo>/{p}" for p in changed(before_repo, after_repo)}


def escapes(written: set[str], inside: str) -> list[str]:
    return sorted(
        p
        for p in written
        if not p.startswith(f"{inside}/") and not any(fnmatch.fnmatch(p, pattern) for pattern in ALLOWED)
    )


@pytest.mark.slow
def test_a_run_writes_only_inside_its_run_directory(tmp_path):
    written, in_repo = run_contained(
        tmp_path,
        "trainer.epochs=1",
        "logging.histogram_freq=0",
        "export.formats=[saved_model,tflite]",
        f"hydra.run.dir={tmp_path}/work/run",
    )
    assert {
        "work/run/metrics.json",
        "work/run/export/tflite/model.tflite",
        "work/run/.hydra/config.yaml",
        "work/run/train.log",
    } <= written  # the run itself was seen
    assert escapes(written, "work/run") == [] and sorted(in_repo) == []
    assert not any((tmp_path / "tmp").iterdir())  # nothing left behind in TMPDIR, not even a folder


@pytest.mark.slow
def test_a_sweep_writes_only_inside_its_sweep_directory(tmp_path):
    written, in_repo = run_contained(
        tmp_path, "-m", "optimizer.lr=1e-3,5e-4", "model=mlp", "debug=fast", f"hydra.sweep.dir={tmp_path}/work/sweep"
    )
    assert {
        "work/sweep/summary.csv",
        "work/sweep/summary.png",
        "work/sweep/multirun.yaml",
        "work/sweep/1_optimizer.lr=0.0005/metrics.json",
    } <= written
    assert escapes(written, "work/sweep") == [] and sorted(in_repo) == []
    assert not any((tmp_path / "tmp").iterdir())
