"""benchmarks/compare_commits.py: two commits in work trees of their own, each side importing its own code, refused
when their dependencies differ; a one-pair comparison of a commit with itself prints its ratios. Timing is not
asserted."""

import importlib.util
import subprocess
import sys

import pytest
from conftest import ROOT

# loaded from its file: benchmarks/ on sys.path would shadow the tests' own modules (its combinations.py)
_SPEC = importlib.util.spec_from_file_location("compare_commits", ROOT / "benchmarks" / "compare_commits.py")
compare_commits = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(compare_commits)


def commit(repo, pyproject: str, message: str) -> str:
    (repo / "pyproject.toml").write_text(pyproject)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message], cwd=repo, check=True)
    return compare_commits.git("rev-parse", "HEAD", cwd=repo)


def test_two_commits_whose_dependencies_differ_are_refused_naming_what_differs(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    base = '[project]\nname = "x"\ndependencies = ["tensorflow>=2.21,<2.22"]\n'
    a = commit(tmp_path, base + '[project.optional-dependencies]\ndev = ["pytest"]\n', "a")
    b = commit(tmp_path, base + '[project.optional-dependencies]\ndev = ["pytest", "ruff"]\n', "b")
    c = commit(tmp_path, base.replace("2.21", "2.20") + '[project.optional-dependencies]\ndev = ["pytest"]\n', "c")
    compare_commits.refuse_other_dependencies(a, a, tmp_path)  # the same: measured in this venv
    with pytest.raises(SystemExit, match=r"declare different dependencies \(extra dev\)"):
        compare_commits.refuse_other_dependencies(a, b, tmp_path)
    with pytest.raises(SystemExit, match=r"declare different dependencies \(dependencies\)"):
        compare_commits.refuse_other_dependencies(a, c, tmp_path)


def test_a_side_imports_tfhydra_from_its_own_work_tree_or_is_refused(tmp_path):
    side = compare_commits.Side("A", "HEAD", tmp_path)
    try:
        side.check_imports()
        (side.tree / "tfhydra").rename(side.tree / "moved")  # the tree's package gone: the checkout's answers
        side.env["PYTHONPATH"] = str(ROOT)
        with pytest.raises(SystemExit, match=r"side A \(\w+\) imports .* from outside its tree"):
            side.check_imports()
    finally:
        side.remove()
    assert not side.tree.exists()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_commit_against_itself_prints_each_figures_ratio():
    result = subprocess.run(
        [sys.executable, "benchmarks/compare_commits.py", "HEAD", "HEAD", "--pairs", "1", "--epochs", "1"]
        + ["--only", "whole_run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=550,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {line.split(" | ")[0].strip("| "): line for line in result.stdout.splitlines() if line.startswith("| ")}
    assert {"wall_s", "examples_per_s", "first_step_s"} <= set(rows), result.stdout
    ratio = float(rows["wall_s"].split(" | ")[3].split("x")[0])
    assert 0.3 < ratio < 3.0, rows["wall_s"]  # the same code both sides: a ratio, not a timing bound
