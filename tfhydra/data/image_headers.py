"""An image file's height and width from its header, without decoding it.

Decoding is where an image costs memory (a 388 kB PNG of 20000 x 20000 pixels decodes to 1.2 GB of RGB), so
the size is read first, from the few bytes each format puts at its start: the PNG IHDR chunk, the GIF logical
screen, the BMP info header, a JPEG's first start-of-frame marker. Sources and predict use it to refuse an
image over the pixel limit, and images of different sizes where one size is required, before any decoding.
No TensorFlow here: plain bytes.
"""

from __future__ import annotations

import struct
from pathlib import Path

_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_JPEG_SCAN_LIMIT = 1 << 20  # a JPEG's frame header comes after its metadata segments: read at most 1 MiB for it


def header_size(path: str | Path) -> tuple[int, int] | None:
    """(height, width) from the file's header; None when the header is not one of PNG, GIF, BMP, JPEG or is cut."""
    try:
        with open(path, "rb") as file:
            head = file.read(32)
            if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24 and head[12:16] == b"IHDR":
                width, height = struct.unpack(">II", head[16:24])
                return height, width
            if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
                width, height = struct.unpack("<HH", head[6:10])
                return height, width
            if head.startswith(b"BM") and len(head) >= 26:
                width, height = struct.unpack("<ii", head[18:26])
                return abs(height), abs(width)  # a negative height: rows stored top-down
            if head.startswith(b"\xff\xd8"):
                file.seek(2)
                return _jpeg_size(file)
    except OSError:
        return None
    return None


def _jpeg_size(file) -> tuple[int, int] | None:
    """Walk the JPEG's marker segments to its first start-of-frame (SOFn) and read the size there."""
    read = 2
    while read < _JPEG_SCAN_LIMIT:
        marker = file.read(2)
        if len(marker) < 2 or marker[0] != 0xFF:
            return None
        if marker[1] in (0xD8, 0x01) or 0xD0 <= marker[1] <= 0xD7:  # markers without a length
            read += 2
            continue
        length_bytes = file.read(2)
        if len(length_bytes) < 2:
            return None
        length = struct.unpack(">H", length_bytes)[0]
        if marker[1] in _JPEG_SOF:
            frame = file.read(5)
            if len(frame) < 5:
                return None
            height, width = struct.unpack(">HH", frame[1:5])
            return height, width
        file.seek(length - 2, 1)
        read += 2 + length
    return None


def pixels_over(path: str | Path, limit: int) -> tuple[int, int] | None:
    """The file's (height, width) when it has more than `limit` pixels, else None (also for an unreadable header:
    the decoder's own checks answer for those)."""
    size = header_size(path)
    return size if size is not None and size[0] * size[1] > limit else None
