"""A newcomer's first hour in the checkout (issue 56): the README's set-up is what CI runs, and nothing the set-up,
a run, the example notebook or the tools write makes the checkout dirty, so the first run's record says
`"dirty": false` (.ci/run checks that record, and `git status` after the tests). The journeys' installs work from a
venv inside the checkout, where the README makes it, and the wheel is built from the source without that venv."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from installs import ROOT, copy_source, outer_site_dirs

# What the README's set-up (.venv, pip's egg-info), a run (outputs/), the example notebook run from its folder
# (examples/outputs/, examples/my_project/) and the tools write; and the source beside them, which must stay seen.
WRITTEN = [
    ".venv/bin/python",
    "tfhydra.egg-info/PKG-INFO",
    "build/lib/tfhydra/__init__.py",
    "outputs/2026-12-07/10-00-00.000000/metrics.json",
    "outputs/multirun/2026-12-07/10-00-00.000000/multirun.yaml",
    "examples/outputs/2026-12-07/10-00-00.000000/metrics.json",
    "examples/my_project/mymodels.py",
    "examples/my_project/conf/model/tiny.yaml",
    "tfhydra/__pycache__/api.cpython-311.pyc",
    ".pytest_cache/v/cache/lastfailed",
    ".hypothesis/constants/abc",
    ".ruff_cache/CACHEDIR.TAG",
    ".mypy_cache/3.10/tfhydra/api.meta.json",
]
SOURCE = [
    "README.md",
    "train.py",
    "tfhydra/api.py",
    "tfhydra/compression/outputs.py",
    "conf/config.yaml",
    "examples/quickstart.ipynb",
    "outputs/.gitkeep",
    "tests/conftest.py",
    "docs/models.md",
]


def ignored(paths: list[str]) -> list[str]:
    """The paths git's ignore rules match (tracked or not: the rules alone, `--no-index`)."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "--no-index", "--stdin"],
        input="\n".join(paths) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode in (0, 1), f"git check-ignore failed (is {ROOT} a git checkout?): {done.stderr}"
    return done.stdout.splitlines()


def test_what_the_set_up_runs_the_notebook_and_the_tools_write_is_ignored_and_the_source_is_not():
    assert [p for p in WRITTEN if p not in ignored(WRITTEN)] == []
    assert ignored(SOURCE) == []


def readme_commands() -> list[str]:
    """The command lines of the README's bash blocks, their comments cut."""
    blocks = re.findall(r"^```bash\n(.*?)^```$", (ROOT / "README.md").read_text(), flags=re.MULTILINE | re.DOTALL)
    lines = (re.sub(r"\s+#.*$", "", line).strip() for block in blocks for line in block.splitlines())
    return [line for line in lines if line]


def test_ci_runs_the_readmes_set_up_and_test_command_as_written():
    commands = readme_commands()
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    venv = {c for c in commands if re.match(r"python3? -m venv ", c)}
    dev_install = {c for c in commands if c == 'pip install -e ".[dev]"'}
    assert len(venv) == len(dev_install) == 1 and not (venv | dev_install) - set(ci), (venv, dev_install)
    # the README's fullest test command (`pytest`, or `pytest -m "slow or not slow"`) begins CI's, which adds workers
    readme_test = max((c for c in commands if c == "pytest" or c.startswith("pytest ")), key=len)
    ci_tests = [line for line in ci if line == "pytest" or line.startswith("pytest ")]
    assert len(ci_tests) == 1 and ci_tests[0].startswith(readme_test), (readme_test, ci_tests)


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
