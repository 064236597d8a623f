"""What the journeys install, and the user's project they run in: fresh virtual environments made from this
interpreter, each holding tfhydra one way (an editable install of this checkout, or a wheel built from it).

A nested venv does not download TensorFlow again: a `.pth` file in it names the site-packages directories of
the environment running the tests (the outer venv's, in the checkout as the README makes it or elsewhere, or the
system's without one), as plain paths, so their own `.pth` files (an editable tfhydra of the outer environment)
are not run. `--system-site-packages` cannot do this from inside a venv: it would see the base interpreter's
packages, not the venv's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TINY_BUILDER = '''
import tensorflow as tf

def build_tiny(spec, units=8):
    """A user's own model: one hidden layer, named so the test can tell it from tfhydra's."""
    inputs = tf.keras.Input(spec.input_shape)
    x = tf.keras.layers.Dense(units, activation="relu")(tf.keras.layers.Flatten()(inputs))
    outputs = tf.keras.layers.Dense(spec.num_classes, activation="softmax", dtype="float32")(x)
    return tf.keras.Model(inputs, outputs, name="users_tiny")
'''


def write_project(directory: Path, units: int = 8, config: str | None = None) -> Path:
    """A user's project: conf/model/tiny.yaml naming mymodels.build_tiny, mymodels.py, maybe conf/config.yaml."""
    (directory / "conf" / "model").mkdir(parents=True)
    (directory / "conf" / "model" / "tiny.yaml").write_text(f"_target_: mymodels.build_tiny\nunits: {units}\n")
    (directory / "mymodels.py").write_text(TINY_BUILDER)
    if config is not None:
        (directory / "conf" / "config.yaml").write_text(textwrap.dedent(config))
    return directory


def outer_site_dirs(path: list[str] | None = None) -> list[str]:
    """The site directories this interpreter imports from (`path`: sys.path), a venv's own and any it shares,
    wherever that venv lives: the README makes it inside the checkout (<checkout>/.venv), and CI follows the README.

    What must not be shared is the checkout's source (the checkout and tests/ are on sys.path under pytest or
    PYTHONPATH): through it the nested venv would import tfhydra and its hydra_plugins from the checkout instead of
    from the install under test. No source folder is a site directory, so keeping site directories alone keeps the
    source out; a site directory inside the checkout is a venv's, and without it the nested venv has no pip."""
    return [p for p in (sys.path if path is None else path) if Path(p).name in SITE_DIRS and Path(p).is_dir()]


SITE_DIRS = ("site-packages", "dist-packages")


def nested_venv(environment: Path) -> Path:
    """bin/ of a fresh venv (no pip of its own: the outer one imports through the .pth) that sees the
    outer environment's packages after its own."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(environment)],
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    python = environment / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "_outer_environment.pth").write_text("\n".join(outer_site_dirs()) + "\n")
    return environment / "bin"


def offline_build() -> list[str]:
    """Build with the outer environment's setuptools when it has one that makes PEP 660 editable installs
    (a venv of Python 3.11 does; 3.12's has none): then nothing is fetched. Else pip fetches it, as the
    README's install line did."""
    try:
        import setuptools
    except ImportError:
        return []
    return ["--no-build-isolation", "--no-index"] if int(setuptools.__version__.split(".")[0]) >= 64 else []


def pip_install(bin_dir: Path, *args: str) -> None:
    """`pip install --no-deps` into the nested venv (its dependencies are the outer environment's)."""
    result = subprocess.run(
        [
            str(bin_dir / "python"),
            "-m",
            "pip",
            "install",
            "--no-deps",
            *offline_build(),
            "--disable-pip-version-check",
            "--quiet",
            *args,
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=bin_dir.parent,
    )
    assert result.returncode == 0, result.stderr[-3000:]


def editable_install(environment: Path) -> Path:
    """bin/ of a fresh venv holding `pip install -e <checkout>` (the README's line, dependencies shared)."""
    bin_dir = nested_venv(environment)
    pip_install(bin_dir, "-e", str(ROOT))
    return bin_dir


def wheel_install(environment: Path, wheels: Path) -> Path:
    """bin/ of a fresh venv holding the wheel `pip wheel` builds from a copy of this checkout: a build without
    isolation writes build/ and *.egg-info into its source, and tests running beside this one watch the checkout."""
    source = copy_source(ROOT, wheels / "source")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            *offline_build(),
            "--quiet",
            "--wheel-dir",
            str(wheels),
        ],
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    (wheel,) = wheels.glob("tfhydra-*.whl")
    bin_dir = nested_venv(environment)
    pip_install(bin_dir, str(wheel))
    return bin_dir


# What a checkout holds that is not tfhydra's source: git's own directory, what runs, builds and tools write there,
# and the tests (the wheel ships none of them).
NOT_SOURCE = shutil.ignore_patterns(
    ".git", "outputs", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", "tests"
)


def copy_source(checkout: Path, destination: Path) -> Path:
    """`destination`: a copy of the checkout's source, without NOT_SOURCE and without any virtualenv in it (a
    directory holding pyvenv.cfg, whatever its name: the README's .venv is 3.4 GB the wheel never reads)."""

    def skipped(directory: str, names: list[str]) -> set[str]:
        venvs = {name for name in names if Path(directory, name, "pyvenv.cfg").is_file()}
        return set(NOT_SOURCE(directory, names)) | venvs

    shutil.copytree(checkout, destination, ignore=skipped)
    return destination


def run_in(bin_dir: Path, command: str, *args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """A command of the venv run as its user would: from the project's directory, nothing of the tests' set-up
    in the environment (no PYTHONPATH, no HYDRA_FULL_ERROR, no TFHYDRA_CONFIG_DIR)."""
    full_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "HYDRA_FULL_ERROR", "TFHYDRA_CONFIG_DIR", "VIRTUAL_ENV")
    }
    return subprocess.run(
        [str(bin_dir / command), *args],
        cwd=cwd,
        env={**full_env, **(env or {})},
        text=True,
        capture_output=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )


SHOWN = {"PYTHONWARNINGS": "default"}  # every warning once, DeprecationWarning included


def two_job_sweep(bin_dir: Path, project: Path) -> list[Path]:
    """The job directories of `tfhydra-train -m model=tiny debug=fast optimizer.lr=0.01,0.001` run in `project`
    with every warning shown, after checking that it exits 0 and that Hydra, OmegaConf and tfhydra warned of
    nothing on its output or in any job's train.log."""
    result = run_in(
        bin_dir,
        "tfhydra-train",
        "-m",
        "model=tiny",
        "debug=fast",
        "optimizer.lr=0.01,0.001",
        "hydra.sweep.dir=sweep",
        cwd=project,
        env=SHOWN,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = sorted(p for p in (project / "sweep").iterdir() if p.is_dir())
    assert warnings_of(result.stdout, result.stderr, *((job / "train.log").read_text() for job in jobs)) == []
    return jobs


# A Python warning as `warnings` prints it (`path.py:12: UserWarning: ...`), or Hydra's plugin scanner's own line.
WARNING_LINE = re.compile(r"(\S+\.py):\d+: (\w*Warning):|\[Hydra plugins scanner\] : warnings from")
# Whose warnings count: Hydra's, OmegaConf's, Hydra's plugins' (tfhydra's among them) and tfhydra's own code.
WARNING_SOURCES = ("/hydra/", "/omegaconf/", "/hydra_plugins/", "/tfhydra/", "train.py")


def warnings_of(*outputs: str) -> list[str]:
    """The lines of `outputs` (a command's stderr, a train.log) that are warnings of Hydra, OmegaConf or tfhydra,
    printed with SHOWN."""
    found = []
    for line in "\n".join(outputs).splitlines():
        match = WARNING_LINE.search(line)
        if match and (match.group(1) is None or any(s in match.group(1) for s in WARNING_SOURCES)):
            found.append(line)
    return found
