"""The test tree mirrors the package (issue 36, item 5): a newcomer looking for the tests of `tfhydra/<room>/`
finds them in `tests/<room>/`, and those of a top-level module `tfhydra/<name>.py` in `tests/test_<name>*.py`.
Tests that cross rooms stand in tiers of their own: `contract/` (what a run, a sweep and the command line leave,
end to end), `properties/` (drawn inputs and combinations), `journeys/` (a user's install, project and notebook)
and `structure/` (imports, layout, the Keras in use). Shared helpers (`conftest.py`, `run_processes.py`, ...)
stay at the top, beside the tiers."""

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS, PACKAGE = ROOT / "tests", ROOT / "tfhydra"
TIERS = {"contract", "properties", "journeys", "structure", "benchmarks"}  # benchmarks: of benchmarks/ scripts


def rooms() -> set[str]:
    """tfhydra's rooms: its subpackages and its top-level modules (a module may have a directory of tests)."""
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    return packages | {p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("_")}


def all_test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def misplaced(files: list[Path], known_rooms: set[str]) -> list[str]:
    """Test files that stand neither in a room's directory, a tier, nor at the top named after a module."""
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    wrong = []
    for path in files:
        where = path.relative_to(TESTS).parts
        if len(where) == 1:
            if not any(path.stem == f"test_{m}" or path.stem.startswith(f"test_{m}_") for m in modules):
                wrong.append(f"{path.name}: no module tfhydra/<name>.py for it at the top of tests/")
        elif where[0] not in known_rooms | TIERS:
            wrong.append(f"{'/'.join(where)}: {where[0]}/ is neither a room of tfhydra/ nor a tier {sorted(TIERS)}")
    return wrong


def named_after_an_issue(files: list[Path]) -> list[str]:
    return [p.name for p in files if re.search(r"(item|issue)_?\d", p.stem)]


def test_every_test_file_stands_in_its_room_a_tier_or_beside_its_module():
    assert misplaced(all_test_files(), rooms()) == []


def test_every_room_of_the_package_has_a_directory_of_tests():
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert sorted(r for r in packages if not (TESTS / r).is_dir()) == []


def test_no_test_file_is_named_after_an_issue_and_names_are_unique():
    files = all_test_files()
    assert named_after_an_issue(files) == []
    assert [name for name, n in Counter(p.name for p in files).items() if n > 1] == []  # pytest's rootdir imports


def test_the_layout_guards_fail_when_broken():
    """The guards above, shown to fail: a file at the top named after no module, one in a directory that is no
    room, one named after an issue item."""
    planted = [TESTS / "test_item4_cli.py", TESTS / "helpers" / "test_x.py", TESTS / "data" / "test_data.py"]
    assert len(misplaced(planted, rooms())) == 2
    assert named_after_an_issue(planted) == ["test_item4_cli.py"]


def undocumented_files(package: Path) -> list[str]:
    """A package's modules that its `__init__.py` docstring does not name (`name.py`)."""
    import ast

    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    return sorted(p.name for p in package.glob("*.py") if p.name != "__init__.py" and p.name not in doc)


def test_every_room_says_in_its_docstring_what_each_of_its_files_is():
    """docs/design.md's map names the rooms; each room's own docstring names its files (issue 36, item 7)."""
    missing = {p.parent.name: undocumented_files(p.parent) for p in PACKAGE.glob("*/__init__.py")}
    assert {room: files for room, files in missing.items() if files} == {}
