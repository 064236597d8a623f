"""One warning per condition (issue 38 item 6): precision=mixed on a machine without a GPU is said once, by tfhydra;
tf_keras' own four-line mixed-precision compatibility warning, which says the same, is held back."""

from __future__ import annotations

import logging

import pytest
import tensorflow as tf
from conftest import run_cli
from omegaconf import OmegaConf

from tfhydra.precision import build as precision

NO_GPU = not tf.config.list_physical_devices("GPU")
KERAS_CHECK = "Mixed precision compatibility check"


@pytest.mark.skipif(not NO_GPU, reason="the condition is a machine without a GPU")
def test_a_mixed_policy_on_cpu_warns_once_and_keras_does_not_repeat_it(caplog, monkeypatch):
    from tf_keras.src.mixed_precision import device_compatibility_check

    monkeypatch.setattr(precision, "_warned_cpu", False)  # as in a fresh process
    monkeypatch.setattr(device_compatibility_check, "_logged_compatibility_check", False)
    logging.getLogger("tensorflow").addHandler(caplog.handler)  # tf_logging's logger does not propagate
    try:
        with caplog.at_level(logging.INFO):
            for _ in range(2):  # a second run in the same process (a notebook) says nothing more
                with precision.policy_scope(OmegaConf.create({"name": "mixed"})) as policy:
                    assert policy.name == "mixed_float16"
    finally:
        logging.getLogger("tensorflow").removeHandler(caplog.handler)
    ours = [r for r in caplog.records if "precision=mixed without a GPU" in r.getMessage()]
    assert len(ours) == 1
    assert not [r for r in caplog.records if KERAS_CHECK in r.getMessage()]


@pytest.mark.slow
@pytest.mark.skipif(not NO_GPU, reason="the condition is a machine without a GPU")
def test_the_command_prints_one_mixed_precision_warning(tmp_path):
    result = run_cli(
        "precision=mixed",
        "model=mlp",
        "trainer.epochs=1",
        "trainer.steps_per_epoch=2",
        "export.formats=[]",
        f"hydra.run.dir={tmp_path}/run",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    output = result.stdout + result.stderr
    assert output.count("precision=mixed without a GPU") == 1
    assert KERAS_CHECK not in output
