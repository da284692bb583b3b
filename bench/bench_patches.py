#!/usr/bin/env python3
"""3D training patches: reading them, and augmenting them as nnU-Net does, against the ways
Python users do it.

    /usr/bin/python3 bench/bench_patches.py [--build build] [--work DIR] [--json FILE] [--quick]
                                            [--rounds N] [--seconds S] [--threads T]

One run on this machine, two inputs: ITK's example brain MRI (4 copies, converted with
`shardify --preprocess nnunet --patch-size 64x64x64`: float32 [1, 62, 87, 86] after the
crop, with its k-means mask) and 4 synthetic smooth float32 volumes of 256^3 with a
3-label mask (written by shardify.Writer with patch_size=(64, 64, 64)). Each is stored
twice, with raw and with zstd chunks. Random 64^3 patches (image and mask), batch 2:

  a  npy       np.load(mmap_mode="r") of each volume and mask as .npy, sliced at random
               positions (numpy copies of the patch, zero-padded where it leaves the volume)
  b  zarr      the same with zarr arrays of 64^3 blosc-zstd chunks (when `import zarr` works)
  c  raw       shardify.Loader(patch=(64, 64, 64)) over the raw chunks, --threads threads
  d  zstd      the same over the zstd chunks
then 64^3 patches augmented by nnU-Net's training augmentation (nnU-Net's probabilities;
patches read with the rotation margin), batch 2:

  e  workers   a torch Dataset that reads each patch with its margin from the .npy files and
               augments it alone with T.NnUnet, in a DataLoader with num_workers 0 and
               --threads (the best of the two is shown)
  f  loader_t  shardify.Loader(patch=, transform=T.preset("nnunet")) (zstd chunks)
  g  loader_a  shardify.Loader(patch=, augment="nnunet"): the augmentation in the Loader's
               C++ threads (zstd chunks)

Methods alternate within each round; a figure is the best of --rounds rounds, each at least
--seconds long. Prints patches/s and the ratios the targets name: c/a, d/a, g/best(e).
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

ITK_DATA = "/usr/share/doc/insighttoolkit5-examples/examples/Data"
PATCH = (64, 64, 64)
BATCH = 2


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build", help="build directory with bin/ and python/ (default %(default)s)")
    p.add_argument("--work", default="/tmp/shardify-bench-patches", help="where inputs are made (default %(default)s)")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    p.add_argument("--quick", action="store_true", help="small volumes, one short round: checks, not figures")
    p.add_argument("--rounds", type=int, default=3, help="rounds of every method (default %(default)s)")
    p.add_argument("--seconds", type=float, default=3.0, help="least seconds of each timed run (default %(default)s)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="Loader threads and DataLoader workers (default: all cores, %(default)s)")
    return p.parse_args(argv)


def brain(a, shardify_bin):
    """ITK's brain MRI, 4 copies, as nnU-Net-preprocessed shards with raw and zstd chunks."""
    src = os.path.join(a.work, "brain-src")
    for sub, name in (("images", "KmeansTest_T1UCharRaw.nii.gz"), ("masks", "KmeansTest_T1KmeansPrelimSegmentation.nii.gz")):
        os.makedirs(os.path.join(src, sub), exist_ok=True)
        for case in range(4):
            shutil.copyfile(os.path.join(ITK_DATA, name), os.path.join(src, sub, "case%d.nii.gz" % case))
    out = {}
    for codec in ("raw", "zstd"):
        dst = os.path.join(a.work, "brain-" + codec)
        subprocess.run([shardify_bin, src, "-o", dst, "--preprocess", "nnunet", "--patch-size", "64x64x64",
                        "--codec", codec, "--overwrite"], check=True, capture_output=True)
        out[codec] = dst
    return out


def synthetic(a, np, shardify):
    """4 smooth float32 volumes with 3-label masks, through the Writer."""
    side = 96 if a.quick else 256
    rng = np.random.default_rng(0)
    out = {}
    grid = np.indices((side, side, side), dtype=np.float32) / side
    volumes = []
    for case in range(4):
        f = rng.uniform(2, 6, 3)
        image = (np.sin(f[0] * grid[0] * 6.28) * np.cos(f[1] * grid[1] * 6.28) + grid[2] * f[2]).astype(np.float32)
        mask = np.digitize(image, np.quantile(image, [0.6, 0.85])).astype(np.uint8)
        volumes.append((image[None], mask[None]))
    for codec in ("raw", "zstd"):
        dst = os.path.join(a.work, "synthetic-" + codec)
        with shardify.Writer(dst, codec=codec, patch_size=PATCH, overwrite=True, fsync=False) as w:
            for image, mask in volumes:
                w.write({"image": image, "mask": mask})
        out[codec] = dst
    return out


def npy_files(a, np, shardify, dataset, name):
    """Each case's image and mask as .npy files, opened as memory maps."""
    ds = shardify.Dataset(dataset)
    out = []
    for i in range(len(ds)):
        sample = ds[i]
        paths = []
        for key in ("image", "mask"):
            path = os.path.join(a.work, "%s-%d-%s.npy" % (name, i, key))
            np.save(path, np.ascontiguousarray(sample[key]))
            paths.append(path)
        out.append(tuple(np.load(p, mmap_mode="r") for p in paths))
    return out


def cut(np, array, start, size, pad):
    """array[:, start:start+size] per spatial axis, padded with `pad` outside."""
    out = np.full((array.shape[0],) + tuple(size), pad, array.dtype)
    src, dst = [slice(None)], [slice(None)]
    for s, n, d in zip(start, size, array.shape[1:]):
        lo, hi = max(s, 0), min(s + n, d)
        if hi <= lo:
            return out
        src.append(slice(lo, hi))
        dst.append(slice(lo - s, hi - s))
    out[tuple(dst)] = array[tuple(src)]
    return out


def random_start(rng, shape, size):
    return [int(rng.integers(min(0, d - n), max(0, d - n) + 1)) for d, n in zip(shape, size)]


def timed(a, run_batches):
    """Patches/s of run_batches(deadline) -> patches, over at least --seconds."""
    t = time.perf_counter()
    patches = run_batches(t + a.seconds)
    return patches / (time.perf_counter() - t)


def random_patches(np, pairs, read):
    """A run that calls read(image, mask, start) at random positions of random (image, mask)
    pairs, a batch at a time, until the deadline."""
    rng = np.random.default_rng(1)

    def run(deadline):
        n = 0
        while time.perf_counter() < deadline:
            for _ in range(BATCH):
                image, mask = pairs[int(rng.integers(len(pairs)))]
                read(image, mask, random_start(rng, image.shape[1:], PATCH))
                n += 1
        return n
    return run


def method_npy(a, np, cases):
    def read(image, mask, start):
        cut(np, image, start, PATCH, 0)
        cut(np, mask, start, PATCH, -1)
    return random_patches(np, cases, read)


def method_zarr(a, np, cases, name):
    import zarr  # python3-zarr
    from numcodecs import Blosc
    arrays = []
    for i, (image, mask) in enumerate(cases):
        pair = []
        for key, x in (("image", image), ("mask", mask)):
            z = zarr.open(os.path.join(a.work, "%s-%d-%s.zarr" % (name, i, key)), mode="w", shape=x.shape,
                          chunks=(x.shape[0],) + PATCH, dtype=x.dtype,
                          compressor=Blosc(cname="zstd", clevel=3, shuffle=Blosc.SHUFFLE))
            z[...] = np.asarray(x)
            pair.append(z)
        arrays.append(pair)

    def read(image, mask, start):
        box = (slice(None),) + tuple(slice(max(s, 0), max(s, 0) + p) for s, p in zip(start, PATCH))
        image[box]
        mask[box]
    return random_patches(np, arrays, read)


def loader_run(a, make):
    """A run over a Loader that make() opens once; its epochs repeat until the deadline."""
    loader = make()

    def run(deadline):
        n = 0
        while True:
            for batch in loader:
                n += batch["image"].shape[0]
                if time.perf_counter() >= deadline:
                    return n
    return run


def method_workers(a, np, torch, T, cases, workers):
    augment = T.NnUnet(spatial_dims=3).bind(patch=PATCH)
    margin = augment.margin
    read = tuple(p + 2 * m for p, m in zip(PATCH, margin))

    class Patches(torch.utils.data.Dataset):
        def __len__(self):
            return 1 << 30

        def __getitem__(self, i):
            rng = np.random.default_rng(i)
            image, mask = cases[i % len(cases)]
            start = [s - m for s, m in zip(random_start(rng, image.shape[1:], PATCH), margin)]
            x = torch.from_numpy(cut(np, image, start, read, 0)[None])
            m = torch.from_numpy(cut(np, mask, start, read, -1)[None])
            out = augment({"image": x, "mask": m}, seed=0, epoch=0, step=i)
            return out["image"][0], out["mask"][0]

    loader = torch.utils.data.DataLoader(Patches(), batch_size=BATCH, num_workers=workers,
                                         persistent_workers=workers > 0)
    it = iter(loader)

    def run(deadline):
        n = 0
        while time.perf_counter() < deadline:
            image, _ = next(it)
            n += image.shape[0]
        return n
    return run


def main(argv):
    a = parse_args(argv)
    if a.quick:
        a.rounds, a.seconds = 1, 0.3
    sys.path.insert(0, os.path.join(os.path.abspath(a.build), "python"))
    import numpy as np
    import torch
    import shardify
    import shardify.transforms as T
    torch.set_num_threads(1)  # the transforms of (f) run in the loop's thread; (e) one per worker
    os.makedirs(a.work, exist_ok=True)
    inputs = {"brain": brain(a, os.path.join(a.build, "bin", "shardify")), "synthetic": synthetic(a, np, shardify)}
    has_zarr = importlib.util.find_spec("zarr") is not None
    results = {}
    for name, paths in inputs.items():
        cases = npy_files(a, np, shardify, paths["zstd"], name)

        def loader(path, **kw):
            return lambda: shardify.Loader(path, batch_size=BATCH, patch=PATCH, threads=a.threads, output="torch", **kw)
        methods = {"a npy": method_npy(a, np, cases)}
        if has_zarr:
            methods["b zarr"] = method_zarr(a, np, cases, name)
        methods["c raw"] = loader_run(a, loader(paths["raw"]))
        methods["d zstd"] = loader_run(a, loader(paths["zstd"]))
        methods["e workers 0"] = method_workers(a, np, torch, T, cases, 0)
        methods["e workers %d" % a.threads] = method_workers(a, np, torch, T, cases, a.threads)
        methods["f loader_t"] = loader_run(a, loader(paths["zstd"], transform=T.preset("nnunet")))
        methods["g loader_a"] = loader_run(a, loader(paths["zstd"], augment="nnunet"))
        best = {}
        for r in range(a.rounds):
            for key, run in methods.items():
                rate = timed(a, run)
                best[key] = max(best.get(key, 0.0), rate)
                print("%s round %d: %-12s %8.1f patches/s" % (name, r + 1, key, rate), flush=True)
        results[name] = best
    print()
    print("| input | " + " | ".join(k for k in results["brain"]) + " | c/a | d/a | g/best e |")
    print("|" + " --- |" * (len(results["brain"]) + 4))
    for name, best in results.items():
        e = max(v for k, v in best.items() if k.startswith("e "))
        print("| %s | " % name + " | ".join("%.1f" % v for v in best.values()) +
              " | %.2f | %.2f | %.2f |" % (best["c raw"] / best["a npy"], best["d zstd"] / best["a npy"],
                                           best["g loader_a"] / e))
    if not has_zarr:
        print("(b) left out: `import zarr` fails (python3-zarr is not installed)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"threads": a.threads, "rounds": a.rounds, "seconds": a.seconds, "patches_per_s": results}, f,
                      indent=1)
    os._exit(0)  # DataLoader workers of the endless datasets: no orderly shutdown needed


if __name__ == "__main__":
    main(sys.argv[1:])
