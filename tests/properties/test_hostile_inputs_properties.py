"""Families of hostile input drawn, not listed (issue 57): special files under every key that names a file or a
directory to read, and huge numbers under every key that sizes something. Each case runs the pre-flight, the very
function `python train.py` runs before Hydra makes a directory or TensorFlow is imported.

- A special file (a FIFO, a character device, a socket), named directly or through a symbolic link, under any
  path key: one line naming that key and the kind, at once (opening a FIFO would block the test until its timeout,
  reading /dev/zero would never end).
- A huge number under a sizing key: accepted, or one line naming that key; either way this process's peak memory
  does not grow (nothing is allocated to find out).

Replay a failure with the seed printed in pytest's header: TFHYDRA_HYPOTHESIS_SEED=<seed> pytest ...
"""

from __future__ import annotations

import os
import resource
import socket
from pathlib import Path

import pytest
from conftest import HYPOTHESIS_SEED, counts_cases
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from props_compositions import preflight

pytestmark = pytest.mark.slow  # about 15 s: the pre-flight composed once per drawn case
KINDS = {"fifo": "a FIFO", "device": "a character device", "socket": "a socket"}
# (the command line around the key, the key): every key that names a file or directory a run reads
PATH_KEYS = [
    (["data=csv", "data.label=y"], "data.path"),
    (["data=npz"], "data.path"),
    (["data=npz_table"], "data.path"),
    (["data=text_csv"], "data.path"),
    (["data=image_folder", "data.path={folder}"], "data.labels_csv"),
    (["model=mlp"], "model.weights"),
    (["model=keras_app"], "model.weights"),
]  # model.preset (keras=3, which a process holding tf_keras refuses first): tests/model/test_keras_hub.py
# (the command line around the key, the key): keys that size an allocation, a loop or a draw
SIZE_KEYS = [
    ([], "data.batch_size"),
    ([], "data.shuffle_buffer"),
    ([], "data.split_seed"),
    ([], "trainer.seed"),
    ([], "trainer.epochs"),
    ([], "trainer.steps_per_epoch"),
    ([], "trainer.accumulate_steps"),
    (["data=synthetic"], "data.train_size"),
    (["data=synthetic"], "data.val_size"),
    (["data=synthetic"], "data.num_classes"),
    (["data=synthetic"], "data.shape[0]"),
    (["task=regression", "data=synthetic"], "task.strata_bins"),
    (["model=mlp"], "model.units[0]"),
    (["model=cnn"], "model.filters[0]"),
    (["data=text_csv", "data.path={table}", "model=lstm"], "data.vocab_size"),
    (["data=text_csv", "data.path={table}", "model=lstm"], "data.sequence_length"),
]
HUGE = st.sampled_from([2**31, 2**32, 2**53 + 1, 2**63, 2**64, 10**20, 10**30, -(2**63)]) | st.integers(
    min_value=2**40, max_value=2**70
)


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> dict[str, Path]:
    """One of each special file (and a link to each), a plain image folder and a text table for the keys' context."""
    root = tmp_path_factory.mktemp("hostile")
    os.mkfifo(root / "fifo")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "socket"))
    found = {"fifo": root / "fifo", "device": Path("/dev/zero"), "socket": root / "socket"}
    for kind, path in list(found.items()):
        (root / f"link_to_{kind}").symlink_to(path)
        found[f"link_{kind}"] = root / f"link_to_{kind}"
    (root / "folder" / "cat").mkdir(parents=True)
    (root / "table.csv").write_text("text,label\n" + "".join(f"a b c {i},{i % 2}\n" for i in range(20)))
    yield {**found, "folder": root / "folder", "table": root / "table.csv", "server": server}
    server.close()


def filled(argv: list[str], places: dict) -> list[str]:
    return [a.format(folder=places["folder"], table=places["table"]) for a in argv]


@pytest.mark.timeout(300)  # a FIFO opened by mistake blocks until here
@counts_cases(at_least=24)
@seed(HYPOTHESIS_SEED)
@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(PATH_KEYS), kind=st.sampled_from(sorted(KINDS)), linked=st.booleans())
def test_a_special_file_under_any_path_key_is_one_line_naming_the_key_and_kind(places, case, kind, linked):
    context, key = case
    path = places[f"link_{kind}" if linked else kind]
    error = preflight([*filled(context, places), f"{key}={path}"])
    assert error is not None and str(error).startswith(f"{key}={path}: {KINDS[kind]}, which tfhydra never reads")


@pytest.mark.timeout(300)
@counts_cases()
@seed(HYPOTHESIS_SEED)
@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(SIZE_KEYS), value=HUGE)
def test_a_huge_number_under_a_sizing_key_is_accepted_or_one_line_naming_it_and_allocates_nothing(places, case, value):
    context, key = case
    argv = filled(context, places)
    if "[" in key:  # one element of a list key: the rest of the list as the option has it
        name, index = key[:-1].split("[")
        lists = {"data.shape": [value, 8, 1], "model.units": [value], "model.filters": [value, 8]}
        argv.append(f"{name}={lists[name]}")
        key = name
    else:
        argv.append(f"{key}={value}")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    error = preflight(argv)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before  # KiB
    assert grown < 200 * 1024, (argv, grown)
    assert error is None or str(error).startswith(key), (argv, str(error))
