#!/usr/bin/env python3
"""Writes an ImageFolder tree of photo-like JPEG files for the JPEG-storage benchmark (bench/jpeg_data.sh).

Each image is a random crop (10-100 % of the side, random aspect) of one of the photographs that Debian's
python3-matplotlib ships (its sample data), resized to ImageNet's typical 500 x 375 or 375 x 500, its
colours jittered, and saved at JPEG quality 90 as ImageNet's files are. Classes differ by which photograph
and which tint they draw from, so a model has something to learn. Seeded: the same arguments give the same
files.

    photo_folder.py OUT --classes 4 --per-class 64 [--seed 1]
"""
import argparse
import glob
import os
import random

from PIL import Image, ImageEnhance

SAMPLE_DATA = "/usr/share/matplotlib/mpl-data/sample_data"


def sources():
    paths = sorted(glob.glob(os.path.join(SAMPLE_DATA, "*.jpg")) + glob.glob(os.path.join(SAMPLE_DATA, "*.png")))
    photos = [Image.open(p).convert("RGB") for p in paths]
    # Only photographs: skip small logos and drawings.
    photos = [p for p in photos if min(p.size) >= 300]
    if not photos:
        raise SystemExit(f"photo_folder.py: no photographs in {SAMPLE_DATA} (install python3-matplotlib)")
    return photos


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--per-class", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    photos = sources()
    for k in range(a.classes):
        folder = os.path.join(a.out, f"class{k:03d}")
        os.makedirs(folder, exist_ok=True)
        tint = [rng.uniform(0.7, 1.3) for _ in range(3)]
        for i in range(a.per_class):
            src = photos[(k + i) % len(photos)]
            w, h = src.size
            side = rng.uniform(0.1, 1.0)
            cw = max(16, int(w * side * rng.uniform(0.75, 1.0)))
            ch = max(16, int(h * side * rng.uniform(0.75, 1.0)))
            x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
            size = (500, 375) if rng.random() < 0.7 else (375, 500)
            img = src.crop((x, y, x + cw, y + ch)).resize(size, Image.BILINEAR)
            if rng.random() < 0.5:
                img = img.transpose(Image.FLIP_LEFT_RIGHT)
            r, g, b = img.split()
            r, g, b = (c.point(lambda v, t=t: min(255, int(v * t))) for c, t in zip((r, g, b), tint))
            img = Image.merge("RGB", (r, g, b))
            img = ImageEnhance.Brightness(img).enhance(rng.uniform(0.8, 1.2))
            img.save(os.path.join(folder, f"img{i:05d}.jpg"), quality=90)


if __name__ == "__main__":
    main()
