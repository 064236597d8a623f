"""A FIFO, a device or a socket is never opened (tfhydra/config/paths.py `special_kind`): `data.path` and
`data.labels_csv` refuse one in the pre-flight, tfhydra-predict refuses one as an INPUT, in one line, at once."""

from __future__ import annotations

import os
import socket

import pytest
from conftest import last_line, run_cli

from tfhydra.config.paths import special_kind


@pytest.fixture
def specials(tmp_path):
    fifo = tmp_path / "table.csv"
    os.mkfifo(fifo)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "s.csv"))
    yield {"fifo": fifo, "device": "/dev/zero", "socket": tmp_path / "s.csv"}
    sock.close()


def test_each_kind_is_named(specials, tmp_path):
    from pathlib import Path

    kinds = {name: special_kind(Path(path)) for name, path in specials.items()}
    assert kinds == {"fifo": "a FIFO", "device": "a character device", "socket": "a socket"}
    (tmp_path / "plain.csv").write_text("a,label\n1,0\n")
    assert special_kind(tmp_path / "plain.csv") is None and special_kind(tmp_path) is None
    assert special_kind(tmp_path / "missing") is None


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_data_path_refuses_a_special_file_in_one_line(specials, tmp_path, kind):
    done = run_cli("data=csv", f"data.path={specials[kind]}", f"hydra.run.dir={tmp_path / 'run'}", timeout=60)
    said = {"fifo": "a FIFO", "device": "a character device"}[kind]
    assert done.returncode == 1 and last_line(done.stderr).startswith(f"Error: data.path={specials[kind]}: {said}")
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


@pytest.mark.slow
def test_predict_refuses_a_fifo_named_like_an_image_at_once(specials, tmp_path_factory):
    import os as _os

    from conftest import run_module
    from shared_runs import DIGITS_CNN, trained_run

    run = trained_run(tmp_path_factory, *DIGITS_CNN)
    fifo = specials["fifo"].with_name("photo.png")
    _os.mkfifo(fifo)
    done = run_module("tfhydra.predict", str(run), str(fifo), env={**_os.environ}, timeout=120)
    # it ended by itself, at once: opening the FIFO would have blocked until the timeout
    assert done.returncode == 1 and f"{fifo}: a FIFO, which tfhydra never reads" in done.stderr, done.stderr
