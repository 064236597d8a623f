import subprocess
import sys


def test_tf_keras_is_tf_keras_after_importing_tfhydra():
    """In a fresh interpreter, `import tfhydra` first makes TensorFlow's `tf.keras` the tf_keras package."""
    probe = (
        "import tfhydra, tensorflow as tf, tf_keras\n"
        "assert tf.keras.layers.Dense is tf_keras.layers.Dense\n"
        "assert tf.keras.Model is tf_keras.Model\n"
        "assert tf_keras.__version__.startswith('2.'), tf_keras.__version__\n"
        "print('LEGACY_OK')\n"
    )
    assert_probe_passes(probe)


def test_any_tfhydra_module_sets_the_keras_environment_before_tensorflow():
    """A room imported on its own (not `import tfhydra` first) still gets tf_keras: the package's first import is
    tfhydra/platform/keras_env.py, which sets TF_USE_LEGACY_KERAS, and importing the record alone sets it too."""
    probe = (
        "import os\n"
        "import tfhydra.record\n"
        "assert os.environ['TF_USE_LEGACY_KERAS'] == '1', os.environ['TF_USE_LEGACY_KERAS']\n"
        "import tfhydra.trainer.ema, tensorflow as tf, tf_keras\n"
        "assert tf.keras.layers.Dense is tf_keras.layers.Dense\n"
        "print('LEGACY_OK')\n"
    )
    assert_probe_passes(probe)


def assert_probe_passes(probe: str) -> None:
    """Run `probe` in a fresh interpreter that starts with TF_USE_LEGACY_KERAS=0; it must print LEGACY_OK."""
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "TF_USE_LEGACY_KERAS": "0"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "LEGACY_OK"
