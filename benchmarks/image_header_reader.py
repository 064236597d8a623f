"""tfhydra's header reader (tfhydra/data/image_headers.py) against Pillow's lazy `Image.open(path).size`.

    python benchmarks/image_header_reader.py [--calls 2000] [--rounds 5]

For each test image (224 x 224 RGB as PNG, JPEG, progressive JPEG, GIF and BMP, and PNGs of 10000 x 10000 and
20000 x 20000, over data.max_pixels' default of 50,000,000: the images the header check exists to refuse): the
time per call (median of `--rounds`, the two readers alternated), the bytes each call reads from the kernel
(`rchar` of /proc/self/io), and what Pillow answers with its default `Image.MAX_IMAGE_PIXELS`. Then what
`import PIL.Image` costs a fresh process (`python -X importtime`). Linux only (/proc).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from PIL import Image

from tfhydra.data.image_headers import header_size

IMAGES: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {
    "png": ((224, 224), {}),
    "jpg": ((224, 224), {}),
    "progressive.jpg": ((224, 224), {"progressive": True}),
    "gif": ((224, 224), {}),
    "bmp": ((224, 224), {}),
    "large.png": ((10000, 10000), {}),
    "huge.png": ((20000, 20000), {}),
}


def pillow_size(path: Path) -> tuple[int, int] | None:
    """(height, width) from Pillow's lazy open: the header only, nothing decoded."""
    with Image.open(path) as image:
        width, height = image.size
        return height, width


def kernel_bytes_read() -> int:
    return int(
        next(line for line in Path("/proc/self/io").read_text().splitlines() if line.startswith("rchar")).split()[1]
    )


def bytes_per_call(reader, path: Path) -> int:
    """Bytes `reader(path)` reads from the kernel, less what reading /proc/self/io itself adds."""

    def delta(call) -> int:
        before = kernel_bytes_read()
        call(path)
        return kernel_bytes_read() - before

    return delta(reader) - delta(lambda _: None)


def seconds_per_call(reader, path: Path, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        reader(path)
    return (time.perf_counter() - start) / calls


def pillow_answer(path: Path) -> str:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            size = pillow_size(path)
        except Image.DecompressionBombError as error:
            return f"{type(error).__name__}: {error}"
    return f"{size}" + "".join(f" ({w.category.__name__})" for w in caught)


def import_cost() -> float:
    """Seconds `import PIL.Image` takes a fresh process (its cumulative line of -X importtime)."""
    found = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import PIL.Image"], capture_output=True, text=True, check=True
    ).stderr
    line = next(line for line in found.splitlines() if line.rstrip().endswith("| PIL.Image"))
    return int(line.split("|")[1]) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        paths = {}
        for name, ((width, height), options) in IMAGES.items():
            paths[name] = Path(folder) / f"image.{name}"
            Image.new("RGB" if width < 1000 else "L", (width, height), 128).save(paths[name], **options)
        columns = f"{'bytes':>9} {'tfhydra us':>10} {'Pillow us':>10} {'tfhydra B':>9} {'Pillow B':>9}"
        print(f"{'image':<16} {columns}  Pillow says")
        for name, path in paths.items():
            ours, theirs = [], []
            unlimited = Image.MAX_IMAGE_PIXELS
            Image.MAX_IMAGE_PIXELS = None  # timed without the bomb check, which raises for huge.png
            try:
                for _ in range(args.rounds):
                    ours.append(seconds_per_call(header_size, path, args.calls))
                    theirs.append(seconds_per_call(pillow_size, path, args.calls))
                read_theirs = bytes_per_call(pillow_size, path)
            finally:
                Image.MAX_IMAGE_PIXELS = unlimited
            print(
                f"{name:<16} {path.stat().st_size:>9} {statistics.median(ours) * 1e6:>10.1f} "
                f"{statistics.median(theirs) * 1e6:>10.1f} {bytes_per_call(header_size, path):>9} {read_theirs:>9}  "
                f"{pillow_answer(path)}"
            )
    costs = sorted(import_cost() for _ in range(args.rounds))
    print(f"import PIL.Image, fresh process: {statistics.median(costs):.3f} s (of {args.rounds}: {costs})")


if __name__ == "__main__":
    main()
