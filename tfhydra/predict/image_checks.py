"""The image files predict refuses before anything decodes them: image_folder's rules, asked of the data room.

Decoding is where an image costs memory: a 388 kB PNG of 20000 x 20000 pixels decodes to 400 MB of grayscale,
1.2 GB of RGB, and four times that as the float32 the model is fed (one such file among good ones takes a
predict that decodes it from 0.6 to 2.6 GB). So each file is read at its two ends first, as image_folder reads
its files before training (tfhydra/data/files.py `looks_complete`: an empty file, one that is not a PNG, JPEG,
GIF or BMP by its first bytes, a truncated one; tfhydra/data/image_headers.py `pixels_over`: more pixels than
the limit, from the header). A refused file is never decoded; what passes is decoded in the pipeline, where a
file that still fails (another number of channels, a damaged body) is named afterwards (inputs.py
`unread_images`).
"""

from __future__ import annotations

from tfhydra.config.errors import ConfigError
from tfhydra.predict.layout import Layout

DECODABLE = "image files TensorFlow can decode (PNG, JPEG, GIF, BMP)"


def refused_images(files: list[str], layout: Layout, count: bool = True) -> dict[str, ConfigError]:
    """{file: the error naming it} for each of `files` that must not be decoded, in order: two small reads and a
    header per file, no decoding (`count`: an unreadable file's line says how many of `files` are unreadable, as
    image_folder's `data.on_bad_file=fail` line does)."""
    from tfhydra.data.files import looks_complete
    from tfhydra.data.image_headers import pixels_over

    unreadable = {path: why for path in files if (why := looks_complete(path)) is not None}
    refused: dict[str, ConfigError] = {}
    for path in files:
        if path in unreadable:
            counted = f" ({len(unreadable)} of {len(files)} files are unreadable)" if count else ""
            refused[path] = ConfigError(
                path, None, DECODABLE, f"cannot decode it as an image{counted}: {unreadable[path]}"
            )
        elif layout.max_pixels is not None and (size := pixels_over(path, layout.max_pixels)) is not None:
            refused[path] = ConfigError(
                path,
                None,
                f"images of at most {layout.max_pixels} pixels ({layout.max_pixels_from})",
                f"{size[0]}x{size[1]} = {size[0] * size[1]} pixels by its header (not decoded)",
            )
    return refused
