#!/usr/bin/env python3
"""Writes a tiny ImageFolder tree of PNG files for the packing tests: ROOT/{ant,bee,cow}/{0..4}.png, RGB,
20..24 x 16 pixels, deterministic content. Standard library only (no PIL)."""
import os
import struct
import sys
import zlib


def png(path, w, h, seed):
    raw = b"".join(b"\0" + bytes(((x * 7 + y * 3 + seed * 11 + c * 50) % 256) for x in range(w) for c in range(3))
                   for y in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


root = sys.argv[1]
for k, cls in enumerate(["ant", "bee", "cow"]):
    os.makedirs(f"{root}/{cls}")
    for i in range(5):
        png(f"{root}/{cls}/{i}.png", 20 + i, 16, k * 10 + i)
