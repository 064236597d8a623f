"""Code a hostile run or sweep directory names: each callable writes the marker file `$TFHYDRA_TEST_MARKER`.

tests/trust/test_trust.py asserts that no command that reads a directory ever runs it, so the marker never exists."""

import os
from pathlib import Path


def touch(*args, **kwargs):
    Path(os.environ.get("TFHYDRA_TEST_MARKER", "tfhydra_marker_ran")).write_text("code from a directory ran\n")
    return "touched"


class TouchCallback:
    """A Hydra callback (`hydra.callbacks.<name>._target_`): Hydra builds it when the app starts."""

    def __init__(self, *args, **kwargs):
        touch()
