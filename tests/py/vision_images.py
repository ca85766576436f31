"""Test images written without Pillow: PNG by hand (zlib), any colour type the tests need.

JPEGs come from the vision probe (stb_image_write), see test_vision.py.
"""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

# PNG colour types: 0 grey, 2 RGB, 4 grey + alpha, 6 RGBA.
_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}


def _chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def png_bytes(pixels: np.ndarray) -> bytes:
    """pixels: uint8 [h, w] (grey) or [h, w, c] with c in 1..4."""
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    h, w, c = pixels.shape
    ctype = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    raw = b"".join(b"\x00" + pixels[y].astype(np.uint8).tobytes() for y in range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, ctype, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(raw, 6)) + _chunk(b"IEND", b"")


def pattern(w: int, h: int, channels: int, seed: int = 0) -> np.ndarray:
    """Smooth gradients plus noise: resampling of edges and flat areas both get exercised."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    planes = []
    for c in range(channels):
        f = 127 + 100 * np.sin(x / (3 + 2 * c) + y / (5 + c)) + 20 * rng.standard_normal((h, w))
        planes.append(np.clip(f, 0, 255))
    return np.stack(planes, axis=-1).astype(np.uint8)


def write_png(path: Path, w: int, h: int, channels: int, seed: int = 0) -> Path:
    path.write_bytes(png_bytes(pattern(w, h, channels, seed)))
    return path
