"""`--help data data=csv` lists the CSV's own keys before the pipeline keys every data option shares."""

from conftest import CONFIG_DIR

from tfhydra.cli.help import print_help


def test_an_options_own_keys_come_first(capsys):
    assert print_help(CONFIG_DIR, ["--help", "data", "data=csv"], "python train.py") == 0
    keys = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("data.")]
    assert keys[:7] == [
        f"data.{k}" for k in ("name", "path", "label", "features", "num_classes", "class_names", "delimiter")
    ]
    assert "data.batch_size" in keys[7:]
