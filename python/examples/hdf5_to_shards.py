"""An HDF5 file into shards with shardify.Writer, then read back with shardify.Loader.

The file looks as a user's would: one dataset per column, the first axis the sample,
images chunked per sample and gzip-compressed, the class names as an attribute.

    images   u8 [N, 28, 28]    labels   i64 [N]    age   f32 [N]    attrs["classes"]

Without a file, one of N synthetic samples is made first (--samples). The first 80% of
the samples go to split `train`, the rest to `val`.

    /usr/bin/python3 python/examples/hdf5_to_shards.py --work /tmp/h5demo
    /usr/bin/python3 python/examples/hdf5_to_shards.py my.h5 --work /tmp/h5demo
"""

import argparse
import os
import time

import h5py
import numpy as np

import shardify

CLASSES = ["ring", "bar", "dot"]


def make_h5(path, n, seed=0):
    """A small HDF5 file of n 28x28 images (a ring, a bar or a dot, by label), labels and ages."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:28, :28]
    labels = rng.integers(0, len(CLASSES), n)
    images = np.empty((n, 28, 28), np.uint8)
    for i, label in enumerate(labels):
        cy, cx = rng.integers(9, 19, 2)
        r = np.hypot(yy - cy, xx - cx)
        shape = [np.abs(r - 7) < 1.5, np.abs(xx - cx) < 2, r < 4][label]
        images[i] = np.clip(shape * 200 + rng.normal(20, 10, (28, 28)), 0, 255)
    with h5py.File(path, "w") as f:
        f.create_dataset("images", data=images, chunks=(1, 28, 28), compression="gzip")
        f.create_dataset("labels", data=labels.astype(np.int64))
        f.create_dataset("age", data=rng.uniform(20, 80, n).astype(np.float32))
        f.attrs["classes"] = CLASSES


def h5_to_shards(h5_path, out, block=1024):
    """Streams the file's rows into a dataset at `out`, `block` rows read at a time."""
    with h5py.File(h5_path, "r") as f:
        images, labels, ages = f["images"], f["labels"], f["age"]
        n, train = len(images), int(len(images) * 0.8)
        classes = [str(c) for c in f.attrs["classes"]]
        fields = {"image": ("u8", (1,) + images.shape[1:]), "label": "int", "age": "float"}
        with shardify.Writer(out, fields=fields, classes=classes, overwrite=True, shard_size="1M") as w:
            for start in range(0, n, block):
                rows = slice(start, min(start + block, n))
                for k, (image, label, age) in enumerate(zip(images[rows], labels[rows], ages[rows])):
                    w.write({"image": image[None], "label": int(label), "age": float(age)},
                            split="train" if start + k < train else "val")
        return w.close()


def check_read_back(h5_path, out):
    """Reads every split with the Loader and compares each sample with the file's row."""
    with h5py.File(h5_path, "r") as f:
        images, labels, ages = f["images"][:], f["labels"][:], f["age"][:]
    seen = 0
    for split in ("train", "val"):
        loader = shardify.Loader(out, split=split, batch_size=64, shuffle=False, output="numpy")
        for batch in loader:
            rows = batch["index"]
            assert np.array_equal(batch["image"][:, 0], images[rows]), f"images differ in {split}"
            assert np.array_equal(batch["label"], labels[rows]), f"labels differ in {split}"
            assert np.allclose(batch["age"], ages[rows]), f"ages differ in {split}"
            seen += len(rows)
    return seen


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("h5", nargs="?", help="an HDF5 file as above (default: make one in --work)")
    p.add_argument("--work", default="hdf5-demo", help="folder for the made file and the dataset")
    p.add_argument("--samples", type=int, default=5000, help="samples of the made file")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    h5_path = a.h5 or os.path.join(a.work, "samples.h5")
    if not a.h5:
        make_h5(h5_path, a.samples)
    out = os.path.join(a.work, "shards")
    start = time.perf_counter()
    summary = h5_to_shards(h5_path, out)
    seconds = time.perf_counter() - start
    print(f"wrote {summary['samples']} samples into {out} in {seconds:.2f} s "
          f"({summary['samples'] / seconds:,.0f} samples/s): {summary['shards']} shards, {summary['bytes']:,} bytes "
          f"(the HDF5 file: {os.path.getsize(h5_path):,})")
    ds = shardify.Dataset(out)
    print(f"splits {ds.splits}, classes {ds.classes}")
    print(f"read back with the Loader: {check_read_back(h5_path, out)} samples, each equal to its HDF5 row")


if __name__ == "__main__":
    main()
