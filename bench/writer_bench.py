"""Samples/s of shardify.Writer and shardify.write on Fashion-MNIST (docs/python.md, "Writing any
dataset"). Usage:
  writer_bench.py arrays OUT [nodict]   the 60,000 training images as numpy arrays, one Writer
                                        (nodict: dict=False, without the default dictionary)
  writer_bench.py npy OUT               the same arrays saved as one .npy file per sample
  writer_bench.py pngs PNG_DIR OUT [W]  shardify.write over class-folder PNGs, PIL in fn, W workers
"""
import glob
import os
import shutil
import sys
import time

import numpy as np

import shardify

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "examples"))
from common import FMNIST, read_idx  # noqa: E402


def report(what, n, seconds):
    print(f"{what}: {n} samples in {seconds:.2f} s = {n / seconds:,.0f} samples/s")


def main(mode, *args):
    out = args[0] if mode != "pngs" else args[1]
    shutil.rmtree(out, ignore_errors=True)
    if mode in ("arrays", "npy"):
        images = read_idx(f"{FMNIST}/train-images-idx3-ubyte.gz")[:, None]
        labels = read_idx(f"{FMNIST}/train-labels-idx1-ubyte.gz")
        start = time.perf_counter()
        if mode == "arrays":
            dictionary = False if args[1:] == ("nodict",) else None
            with shardify.Writer(out, fields={"image": ("u8", (1, 28, 28)), "label": "int"}, dict=dictionary) as w:
                for image, label in zip(images, labels):
                    w.write({"image": image, "label": int(label)})
        else:
            os.makedirs(out)
            for i, image in enumerate(images):
                np.save(f"{out}/{i:05d}.npy", image)
        report(f"{mode} {' '.join(args[1:])}", len(images), time.perf_counter() - start)
        return
    from PIL import Image
    root = args[0]
    classes = sorted(os.listdir(root))
    inputs = sorted(glob.glob(f"{root}/*/*.png"))

    def load(path):
        label = classes.index(os.path.basename(os.path.dirname(path)))
        return {"image": np.asarray(Image.open(path))[None], "label": label, "path": os.path.relpath(path, root)}

    workers = int(args[2]) if len(args) > 2 else 0
    start = time.perf_counter()
    r = shardify.write(out, load, inputs, workers=workers, classes=classes, progress=False,
                       fields={"image": ("u8", (1, 28, 28)), "label": "int", "path": "string"})
    report(f"shardify.write workers={workers or os.cpu_count()}", r["samples"], time.perf_counter() - start)


if __name__ == "__main__":
    main(*sys.argv[1:])
