"""The floors that carry security fixes (tfhydra/platform/versions.py, pyproject.toml): an older TensorFlow, tf-keras
or (keras=3) Keras found at run time is one warning line naming each package, its floor and why."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tfhydra.platform.versions import FLOORS, older_than_floors, release

ROOT = Path(__file__).parents[2]


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """install(name, version): a distribution's metadata first on sys.path, as pip would leave an older one."""

    def install(name: str, version: str) -> None:
        info = tmp_path / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")

    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    return install


def test_releases_are_read_as_major_and_minor():
    assert [release(v) for v in ("2.21.0", "2.21.0rc1", "3.9.2", "3.15.1.dev2026", "x")] == [
        (2, 21),
        (2, 21),
        (3, 9),
        (3, 15),
        (),
    ]
    assert release("3.9.2") < (3, 15) and release("2.21.0rc1") >= (2, 21)  # tuples, not strings: 3.9 < 3.15


def test_the_installed_packages_meet_the_floors():
    assert older_than_floors(2) is None and older_than_floors(3) is None


def test_an_older_tensorflow_and_keras_are_one_line_each_for_their_keras(installed):
    installed("tensorflow", "2.20.0")
    installed("keras", "3.11.3")
    line = older_than_floors(3)
    assert line is not None and "\n" not in line
    assert line.startswith("tensorflow 2.20.0 is older than 2.21 (it disables HDF5's plugin search path, CVE-2026-")
    assert "; keras 3.11.3 is older than 3.15 (its HDF5 loader refuses external storage" in line
    assert line.endswith("upgrade with pip install 'tensorflow>=2.21' 'keras>=3.15'")
    assert "keras 3.11.3" not in (older_than_floors(2) or "")  # keras=2 runs tf_keras: Keras 3's floor is not its


def test_pyproject_states_the_same_floors():
    text = (ROOT / "pyproject.toml").read_text()
    for name, (floor, _, _) in FLOORS.items():
        assert f'"{name}>={".".join(map(str, floor))}' in text
