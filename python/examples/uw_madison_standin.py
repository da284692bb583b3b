"""Writes a synthetic stand-in of the UW-Madison GI tract dataset in its real layout, to try
the `rle` path end to end without the competition data:

    SRC/train.csv                      id,class,segmentation (run-length, 1-based, row-major)
    SRC/train/caseN/caseN_dayM/scans/slice_XXXX_<w>_<h>_<sx>_<sy>.png   16-bit gray

Each scan (a case on a day) is a stack of slices of one size, drawn from the sizes of the
real data (266x266 at 1.50 mm, 360x310 at 1.50 mm, 276x276 at 1.63 mm); three organs
(large bowel, small bowel, stomach) drift smoothly from slice to slice and overlap, so
neighbouring slices of a case look alike, as in the real scans.

    /usr/bin/python3 python/examples/uw_madison_standin.py SRC --cases 12 --days 2 --slices 32
    build/bin/shardify SRC -o gi --split train=0.8,val=0.2 --group-by case --seed 1
    build/bin/shardtrain train gi --model unet --resize 288 288 --batch 6 --out runs/gi
"""

import argparse
import os
import struct
import zlib

import numpy as np

ORGANS = ["large_bowel", "small_bowel", "stomach"]
SIZES = [(266, 266, 1.50), (360, 310, 1.50), (276, 276, 1.63)]  # width, height, mm per pixel


def write_png16(path, pixels):
    """A 16-bit grayscale PNG of the uint16 array `pixels` [h, w]."""
    h, w = pixels.shape
    rows = np.zeros((h, 1 + 2 * w), dtype=np.uint8)  # filter byte 0, then big-endian samples
    rows[:, 1:] = pixels.astype(">u2").view(np.uint8).reshape(h, 2 * w)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 16, 0, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) +
                chunk(b"IEND", b""))


def rle(mask):
    """Run-length string of a boolean mask [h, w]: 1-based starts and lengths, row-major."""
    flat = np.concatenate([[0], mask.reshape(-1).astype(np.int8), [0]])
    edges = np.flatnonzero(np.diff(flat))
    starts, ends = edges[0::2], edges[1::2]
    return " ".join(f"{s + 1} {e - s}" for s, e in zip(starts, ends))


def organs(h, w, t, rng_case):
    """Boolean masks of the three organs on a slice at depth t in [0, 1]."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    c = rng_case  # per-case offsets, fixed across slices and days
    # Large bowel: a thick arc around the abdomen, present in the lower two thirds.
    ring = np.hypot((yy - h * (0.55 + c[0])) / (0.30 * h), (xx - w * (0.5 + c[1])) / (0.33 * w))
    large = (np.abs(ring - 1.0) < 0.12 + 0.04 * np.sin(6 * t + c[2])) & (yy > h * (0.35 + 0.3 * (1 - t)))
    # Small bowel: blobs in the middle that grow with depth, crossing the large bowel.
    small = np.zeros((h, w), dtype=bool)
    for k in range(4):
        cy = h * (0.55 + 0.12 * np.sin(k * 1.7 + c[3])) + 10 * np.sin(3 * t + k)
        cx = w * (0.5 + 0.14 * np.cos(k * 2.3 + c[4]))
        r = (0.07 + 0.05 * t) * min(h, w)
        small |= np.hypot(yy - cy, xx - cx) < r
    # Stomach: an ellipse in the upper left, shrinking with depth; overlaps the small bowel.
    a, b = (0.20 - 0.12 * t) * h, (0.16 - 0.08 * t) * w
    stomach = ((yy - h * (0.38 + c[5])) / max(a, 1)) ** 2 + ((xx - w * (0.40 + c[1])) / max(b, 1)) ** 2 < 1
    return [large, small, stomach]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="directory to write (SRC for shardify --layout rle)")
    p.add_argument("--cases", type=int, default=12)
    p.add_argument("--days", type=int, default=2)
    p.add_argument("--slices", type=int, default=32, help="slices per scan")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    rows = ["id,class,segmentation"]
    for case in range(1, a.cases + 1):
        offsets = rng.uniform(-0.04, 0.04, size=6)
        w, h, mm = SIZES[(case - 1) % len(SIZES)]
        for day in range(1, a.days + 1):
            scan = os.path.join(a.out, "train", f"case{case}", f"case{case}_day{day}", "scans")
            os.makedirs(scan, exist_ok=True)
            yy, xx = np.mgrid[0:h, 0:w]
            body = np.hypot((yy - h / 2) / (0.46 * h), (xx - w / 2) / (0.48 * w)) < 1
            for s in range(1, a.slices + 1):
                t = (s - 1) / max(a.slices - 1, 1)
                masks = organs(h, w, t, offsets + 0.01 * day)
                image = rng.normal(300, 60, size=(h, w)) + body * 500
                for k, m in enumerate(masks):
                    image += m * (350 + 250 * k)
                write_png16(os.path.join(scan, f"slice_{s:04d}_{w}_{h}_{mm:.2f}_{mm:.2f}.png"),
                            np.clip(image, 0, 65535).astype(np.uint16))
                for name, m in zip(ORGANS, masks):
                    rows.append(f"case{case}_day{day}_slice_{s:04d},{name},{rle(m)}")
    with open(os.path.join(a.out, "train.csv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    print(f"wrote {a.cases * a.days * a.slices} slices of {a.cases} cases to {a.out}")


if __name__ == "__main__":
    main()
