"""docs/models.md's offline recipe for a keras-hub preset, run as its reader runs it: the fenced block that builds a
tiny BERT with keras-hub's own API, executed as written (only its preset path moved into a temporary directory) in
a Python process of its own with every connection refused. What it leaves is a preset tfhydra's pre-flight accepts
and keras-hub loads back, its tokenizer reading the recipe's words. The docs' recipe, not tests/hub_presets.py, is
what a user without network access copies, so it is the one tested here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from conftest import ROOT, TESTS

from tfhydra.model.checks import preset_problem

DOC = ROOT / "docs" / "models.md"
WRITTEN_TO = "/models/bert_tiny_random"  # where the recipe saves its preset

# Before the recipe: every connection refused and counted (tests/hub_presets.py), as on a machine with no network.
GUARD = "from hub_presets import ATTEMPTS, refuse_connections\nrefuse_connections()\n"
# After it: the preset read back by keras-hub, and one sentence through its preprocessor.
LOAD_BACK = """
import json
back = keras_hub.models.TextClassifier.from_preset(PRESET, num_classes=2)
ids = back.preprocessor(["The film was great!"])["token_ids"][0]
print(json.dumps({"ids": [int(i) for i in ids], "class": type(back).__name__, "connections": ATTEMPTS}))
"""


def offline_recipe() -> str:
    """The python block of docs/models.md that saves a preset it builds (not the one that fetches one)."""
    blocks = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), flags=re.MULTILINE | re.DOTALL)
    (recipe,) = [block for block in blocks if "save_to_preset" in block and "BertBackbone(" in block]
    return recipe


def test_the_docs_offline_preset_recipe_builds_a_preset_keras_hub_and_tfhydra_accept(tmp_path):
    recipe = offline_recipe()
    assert recipe.count(f'"{WRITTEN_TO}"') == 1, recipe
    preset = tmp_path / "bert_tiny_random"
    script = GUARD + recipe.replace(f'"{WRITTEN_TO}"', "PRESET") + LOAD_BACK
    # a user's shell: no Keras chosen by the test process (which holds tf_keras); tests/ for the guard
    env = {k: v for k, v in os.environ.items() if k not in ("TF_USE_LEGACY_KERAS", "TFHYDRA_KERAS", "PYTHONPATH")}
    env["PYTHONPATH"] = f"{TESTS}{os.pathsep}{ROOT}"
    done = subprocess.run(
        [sys.executable, "-c", f"PRESET = {str(preset)!r}\n{script}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["connections"] == [] and found["class"] == "BertTextClassifier", found
    # [CLS] the film was great ! [SEP], then padding to the recipe's sequence_length of 16
    assert found["ids"] == [2, 5, 6, 7, 8, 11, 3] + [0] * 9, found
    files = ("config.json", "metadata.json", "model.weights.h5", "tokenizer.json", "preprocessor.json")
    assert [name for name in files if not (preset / name).is_file()] == []
    assert preset_problem(str(preset)) is None  # model.preset= this directory passes the pre-flight
