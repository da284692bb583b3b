"""Stored size of a volume's fields under the compression options one could pick, measured
with the zstd command line on the very bytes shardify would compress: chunk shapes and
levels, a zstd dictionary trained per field over its chunks, a delta filter along x (on
the raw MRI and on a resampled, normalized one) and delta columns for mask.fg_locations.

    PYTHONPATH=build/python /usr/bin/python3 bench/compression_options.py [BIN]

Converts ITK's example brain MRI and its segmentation (insighttoolkit5-examples) with
BIN/shardify (default build/bin) into a temporary directory. Prints figures; asserts
nothing.
"""

import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import shardify

DATA = "/usr/share/doc/insighttoolkit5-examples/examples/Data"


def zstd(data, level, dictionary=None):
    cmd = ["zstd", "-q", f"-{level}", "-c"] + (["-D", dictionary] if dictionary else [])
    return len(subprocess.run(cmd, input=data, capture_output=True, check=True).stdout)


def shuffle(a):
    """Byte shuffle (format filter 1): byte 0 of every element, then byte 1, ..."""
    return a.view(np.uint8).reshape(-1, a.itemsize).T.tobytes()


def chunks(a, shape):
    for z in range(0, a.shape[0], shape[0]):
        for y in range(0, a.shape[1], shape[1]):
            for x in range(0, a.shape[2], shape[2]):
                yield np.ascontiguousarray(a[z:z + shape[0], y:y + shape[1], x:x + shape[2]])


def blobs(a, shape):
    return [shuffle(c) if a.itemsize > 1 else c.tobytes() for c in chunks(a, shape)]


def dictionary_size(parts, level, work):
    for i, p in enumerate(parts):
        with open(os.path.join(work, f"c{i:04d}"), "wb") as f:
            f.write(p)
    files = [os.path.join(work, f"c{i:04d}") for i in range(len(parts))]
    path = os.path.join(work, "dict")
    subprocess.run(["zstd", "-q", "--train", "--maxdict=65536", "-o", path] + files, capture_output=True, check=True)
    return sum(zstd(p, level, path) for p in parts) + os.path.getsize(path)


def main():
    binary = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "build/bin", "shardify")
    work = tempfile.mkdtemp()
    try:
        src = os.path.join(work, "brain")
        os.makedirs(os.path.join(src, "images"))
        os.makedirs(os.path.join(src, "masks"))
        shutil.copy(os.path.join(DATA, "KmeansTest_T1UCharRaw.nii.gz"), os.path.join(src, "images", "b.nii.gz"))
        shutil.copy(os.path.join(DATA, "KmeansTest_T1KmeansPrelimSegmentation.nii.gz"), os.path.join(src, "masks", "b.nii.gz"))
        gz = sum(os.path.getsize(os.path.join(src, d, "b.nii.gz")) for d in ("images", "masks"))
        out = os.path.join(work, "ds")
        subprocess.run([binary, src, "-o", out, "-q", "--patch-size", "64x64x64"], check=True, capture_output=True)
        pre = os.path.join(work, "pre")
        subprocess.run([binary, src, "-o", pre, "-q", "--crop", "nonzero", "--spacing", "1.5,1.5,1.5", "--normalize",
                        "zscore", "--dtype", "f16"], check=True, capture_output=True)
        sample = shardify.Dataset(out)[0]
        image, mask = sample["image"][0], sample["mask"][0]
        print(f"source .nii.gz, image + mask: {gz} bytes")
        print("chunk shape     level   image    mask   image+mask / .nii.gz")
        for shape in [(16, 16, 16), (32, 32, 32), (64, 64, 64), (32, 64, 64), image.shape]:
            for level in (1, 3, 9):
                i = sum(zstd(b, level) for b in blobs(image, shape))
                m = sum(zstd(b, level) for b in blobs(mask, shape))
                print(f"{str(shape):15} {level:5} {i:7} {m:7}   {(i + m) / gz:.3f}")
        for name, a, shape in (("image", image, (32, 32, 32)), ("mask", mask, (62, 64, 32))):
            parts = blobs(a, shape)
            for level in (3, 9):
                print(f"{name} chunks {shape} level {level}: {sum(zstd(p, level) for p in parts)} bytes, with a dictionary "
                      f"trained over them {dictionary_size(parts, level, work)} bytes (dictionary included)")
        normalized = shardify.Dataset(pre)[0]["image"][0]
        for name, a in (("raw MRI i16", image), ("resampled, normalized f16", normalized)):
            u = a.view(np.uint16)
            delta = np.diff(u, axis=-1, prepend=np.uint16(0)).astype(np.uint16)
            print(f"{name}: shuffled {zstd(shuffle(u), 3)} bytes, delta along x then shuffled {zstd(shuffle(delta), 3)} bytes")
        rows = sample["mask.fg_locations"].astype("<i4")  # as read back: the rows themselves
        d = np.diff(rows, axis=0, prepend=0).astype("<u4")
        columns = b"".join(shuffle(np.ascontiguousarray(d[:, j])) for j in range(d.shape[1]))
        for level in (3, 9):
            print(f"mask.fg_locations {rows.shape} level {level}: rows {zstd(rows.tobytes(), level)} bytes, "
                  f"delta columns {zstd(columns, level)} bytes")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
