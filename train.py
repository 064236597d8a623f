"""Train a model: `python train.py [group=option ...] [key=value ...]`, or `-m` to sweep.

All logic lives in tfhydra/; this file only connects Hydra to it.
"""
from pathlib import Path

import hydra

import tfhydra  # sets TF_USE_LEGACY_KERAS before anything can import TensorFlow

CONFIG_DIR = Path(__file__).resolve().parent / "conf"


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg):
    return tfhydra.run(cfg)


if __name__ == "__main__":
    tfhydra.check_command_line(CONFIG_DIR)
    main()
    tfhydra.end_process()
