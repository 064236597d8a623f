"""The oldest TensorFlow, tf-keras and Keras 3 tfhydra runs on, each for the security fix it carries (pyproject.toml
says the same beside each requirement), and the one warning a run logs when an older one is installed anyway (a
`pip install --no-deps`, a site-wide TensorFlow). Read from the packages' metadata: no import, milliseconds.

- tensorflow 2.21: disables HDF5's plugin search path (CVE-2026-2492), so an HDF5 file naming a filter cannot make
  the process load a library from `HDF5_PLUGIN_PATH`;
- tf-keras 2.21: tf-keras shares TensorFlow's minor line; no release of it guards its HDF5 reads (the guards are on
  its main branch only), so tfhydra's reader (tfhydra/trust/hdf5.py) is the guard under keras=2;
- keras 3.15 (keras=3 only): Keras' own HDF5 loader refuses external storage, virtual datasets and links, and
  bounds what a declared shape may allocate (`safe_get_h5_dataset`).
Said, not refused: tfhydra's own reader checks every weights file either way.
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version

# package: (floor, what the floor carries, the keras majors it matters to)
FLOORS = {
    "tensorflow": ((2, 21), "it disables HDF5's plugin search path, CVE-2026-2492", (2, 3)),
    "tf-keras": ((2, 21), "it shares TensorFlow 2.21's line", (2,)),
    "keras": ((3, 15), "its HDF5 loader refuses external storage and bounds declared sizes", (3,)),
}


def release(text: str) -> tuple[int, ...]:
    """(2, 21) of "2.21.0rc1": the major and minor numbers; () when the version does not start with them."""
    found = re.match(r"(\d+)\.(\d+)", text)
    return (int(found.group(1)), int(found.group(2))) if found else ()


def older_than_floors(keras_major: int) -> str | None:
    """One line naming each installed package older than its floor for a run of `keras_major`, or None."""
    old = []
    for name, (floor, why, majors) in FLOORS.items():
        if keras_major not in majors:
            continue
        try:
            installed = version(name)
        except PackageNotFoundError:
            continue
        if release(installed) < floor:
            old.append(f"{name} {installed} is older than {'.'.join(map(str, floor))} ({why})")
    if not old:
        return None
    wanted = " ".join(f"'{n}>={'.'.join(map(str, FLOORS[n][0]))}'" for n in FLOORS if keras_major in FLOORS[n][2])
    return f"{'; '.join(old)}: upgrade with pip install {wanted}"
