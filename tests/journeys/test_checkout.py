"""The journeys' installs work from a venv inside the checkout, where the README makes it (issue 56), as from one
elsewhere; and the wheel is built from the checkout's source, without that venv, its runs, builds or caches."""

from __future__ import annotations

from pathlib import Path

from installs import copy_source, outer_site_dirs


def files_below(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_the_wheels_source_is_copied_without_venvs_runs_builds_or_caches(tmp_path):
    checkout = tmp_path / "checkout"
    kept = ["pyproject.toml", "train.py", "tfhydra/__init__.py", "tfhydra/compression/outputs.py", "conf/config.yaml"]
    left = [
        ".venv/pyvenv.cfg",
        ".venv/lib/python3.11/site-packages/big.so",
        "env311/pyvenv.cfg",  # a venv of any name
        "env311/bin/python",
        "outputs/2026-12-07/run/metrics.json",
        "examples/outputs/2026-12-07/run/metrics.json",
        "build/lib/tfhydra/__init__.py",
        "dist/tfhydra-0.1.0-py3-none-any.whl",
        "tfhydra.egg-info/PKG-INFO",
        "tfhydra/__pycache__/api.cpython-311.pyc",
        ".mypy_cache/x",
        ".hypothesis/x",
        ".git/HEAD",
        "tests/conftest.py",
    ]
    for name in kept + left:
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text("")
    assert files_below(copy_source(checkout, tmp_path / "copy")) == sorted(kept)


def test_the_nested_venvs_share_a_venv_inside_the_checkout_but_not_its_source(tmp_path):
    """The README's venv lives in the checkout: its site-packages is shared (it holds pip); the checkout's own
    folders on sys.path (the checkout, tests/) are not, nor a site directory that is not there."""
    checkout = tmp_path / "checkout"
    inside = checkout / ".venv" / "lib" / "python3.11" / "site-packages"
    elsewhere = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    system = tmp_path / "usr" / "lib" / "python3" / "dist-packages"
    for folder in (inside, elsewhere, system, checkout / "tests"):
        folder.mkdir(parents=True)
    path = [str(checkout / "tests"), str(checkout), str(inside), str(elsewhere), str(system), "/gone/site-packages"]
    assert outer_site_dirs(path) == [str(inside), str(elsewhere), str(system)]
