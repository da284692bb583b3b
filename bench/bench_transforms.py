"""The input pipeline with augmentation, model left out: shardify.Loader + shardify.transforms
against per-sample transforms in DataLoader workers. Prints figures; asserts nothing.
Each figure is the best of three runs.

  2D: a MedNIST-style folder of 64x64 JPEGs (Fashion-MNIST stands in), batch 300:
      Loader(transform=T.preset("mednist")) against torchvision's transforms per sample in a
      DataLoader (the best of num_workers 0 and 2).
  3D: ITK's example brain MRI converted with --patch-size, patches of 64^3, batch 2:
      Loader(patch=..., transform=T.preset("nnunet", spatial_dims=3)) against the same
      transform per sample in DataLoader workers over the volume in a memory-mapped .npy (as
      batchgenerators reads nnU-Net's preprocessed data), and against `shardtrain --aug
      nnunet`'s augmentation alone (build/bin/augment_bench).

    PYTHONPATH=build/python /usr/bin/python3 bench/bench_transforms.py [--work DIR] [--quick]
"""

import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
import common  # noqa: E402

import shardify  # noqa: E402
import shardify.transforms as T  # noqa: E402

ITK_DATA = "/usr/share/doc/insighttoolkit5-examples/examples/Data"


def timed(make, limit, count, repeats=3):
    """Samples per second over `limit` batches of the iterable `make()` gives (after one
    warm-up batch), the best of `repeats` runs: this machine's figures vary by +-30% from
    run to run."""
    best = 0.0
    for _ in range(repeats):
        it = iter(make())
        next(it)
        n, start = 0, time.perf_counter()
        for _ in range(limit):
            try:
                batch = next(it)
            except StopIteration:
                break
            n += count(batch)
        best = max(best, n / (time.perf_counter() - start))
    return best


def bench_2d(work, quick):
    import torch
    import torchvision
    from torchvision import transforms as tv
    src = common.write_class_folders(os.path.join(work, "mednist-jpeg"), "train", size=64,
                                     limit=3000 if quick else 12000, suffix=".jpeg")
    shards = os.path.join(work, "mednist-shards")
    if not os.path.exists(os.path.join(shards, "manifest.sfm")):
        shardify.convert(src, shards, progress=False)
    batches = 8 if quick else 30
    rows = []
    loader = shardify.Loader(shards, batch_size=300, transform=T.preset("mednist"), seed=0)
    rows.append(("shardify.Loader + T.preset('mednist')", timed(lambda: loader, batches, lambda b: len(b["label"]))))
    per_sample = tv.Compose([tv.ToTensor(), tv.RandomApply([tv.RandomRotation(15)], p=0.5),
                             tv.RandomVerticalFlip(p=0.5), tv.RandomApply([tv.RandomAffine(0, scale=(0.9, 1.1))],
                                                                         p=0.5)])
    folder = torchvision.datasets.ImageFolder(src, transform=per_sample, loader=common.gray_loader)
    best = None
    for workers in (0, 2):
        dl = torch.utils.data.DataLoader(folder, batch_size=300, shuffle=True, num_workers=workers)
        rate = timed(lambda: dl, batches, lambda b: len(b[1]))
        rows.append((f"ImageFolder + torchvision per sample, DataLoader num_workers={workers}", rate))
        best = rate if best is None else max(best, rate)
    return rows, rows[0][1] / best


class PatchDataset:
    """Random 64^3 patches (with the augmentation's margin) of a memory-mapped volume, each
    augmented alone: the per-sample pipeline of a DataLoader with workers."""

    def __init__(self, image, mask, patch, length, seed):
        self.image, self.mask, self.patch, self.length, self.seed = image, mask, patch, length, seed
        self.aug = T.preset("nnunet", spatial_dims=3).bind(patch)

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        import torch
        rng = np.random.default_rng(self.seed + i)
        size = [p + 2 * m for p, m in zip(self.patch, self.aug.margin)]
        img = np.zeros([1] + size, np.float32)
        msk = np.full([1] + size, 255, np.uint8)
        start = [int(rng.integers(-m, max(s - p + m, -m + 1))) for s, p, m in
                 zip(self.image.shape, self.patch, self.aug.margin)]
        src = tuple(slice(max(a, 0), min(a + n, s)) for a, n, s in zip(start, size, self.image.shape))
        dst = tuple(slice(max(a, 0) - a, min(a + n, s) - a) for a, n, s in zip(start, size, self.image.shape))
        img[(0,) + dst] = self.image[src]
        msk[(0,) + dst] = self.mask[src]
        out = self.aug({"image": torch.from_numpy(img)[None], "mask": torch.from_numpy(msk)[None]}, epoch=0, step=i)
        return out["image"][0], out["mask"][0]


def bench_3d(work, quick):
    import torch
    case = os.path.join(work, "brain")
    for sub, name in (("images", "KmeansTest_T1UCharRaw.nii.gz"), ("masks", "KmeansTest_T1KmeansPrelimSegmentation.nii.gz")):
        os.makedirs(os.path.join(case, sub), exist_ok=True)
        dst = os.path.join(case, sub, "case0.nii.gz")
        if not os.path.exists(dst):
            with open(os.path.join(ITK_DATA, name), "rb") as f, open(dst, "wb") as g:
                g.write(f.read())
    shards = os.path.join(work, "brain-shards")
    if not os.path.exists(os.path.join(shards, "manifest.sfm")):
        shardify.convert(case, shards, patch_size=(64, 64, 64), progress=False)
    patch, batches = (64, 64, 64), 6 if quick else 40
    rows = []
    loader = shardify.Loader(shards, patch=patch, batch_size=2, repeats=1000, seed=0,
                             transform=T.preset("nnunet", spatial_dims=3))
    rows.append(("shardify.Loader(patch) + T.preset('nnunet')",
                 timed(lambda: loader, batches, lambda b: b["image"].shape[0])))
    # The volume as nnU-Net's preprocessing leaves it: a .npy that workers memory-map.
    sample = shardify.Dataset(shards).get(0, fields=["image", "mask"])
    vol, seg = sample["image"][0].astype(np.float32), sample["mask"][0].astype(np.uint8)
    np.save(os.path.join(work, "case0.npy"), vol)
    np.save(os.path.join(work, "case0_seg.npy"), seg)
    image = np.load(os.path.join(work, "case0.npy"), mmap_mode="r")
    mask = np.load(os.path.join(work, "case0_seg.npy"), mmap_mode="r")
    best = None
    for workers in (0, 2):
        dl = torch.utils.data.DataLoader(PatchDataset(image, mask, patch, 2 * (batches + 2), 0), batch_size=2,
                                         num_workers=workers)
        rate = timed(lambda: dl, batches, lambda b: b[0].shape[0])
        rows.append((f"per-sample nnU-Net augmentation, DataLoader num_workers={workers}", rate))
        best = rate if best is None else max(best, rate)
    # shardtrain's device augmentation (trainer/augment_apply.cpp) alone, as
    # bench/augment_bench.cpp times it: batches of two 64^3 patches with their margin.
    bench = os.path.join(ROOT, "build", "bin", "augment_bench")
    if os.path.exists(bench):
        out = subprocess.run([bench, "--quick", "--patch", "64", "--batch", "2", "--steps", "1", "--dir",
                              os.path.join(work, "augment-bench")], capture_output=True, text=True)
        m = re.search(r"augmentation per batch, nnU-Net's probabilities: ([\d.]+) ms", out.stdout)
        if m:
            rows.append(("shardtrain --aug nnunet's augmentation alone (C++, augment_bench)", 2000.0 / float(m.group(1))))
        else:
            print("augment_bench gave no figure:", (out.stdout + out.stderr)[-2000:], file=sys.stderr)
    return rows, rows[0][1] / best


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="bench-transforms-work")
    p.add_argument("--quick", action="store_true", help="fewer images and batches")
    p.add_argument("--torch-threads", type=int, default=0, help="torch's intra-op threads (0: torch's default)")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    import torch
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores")
    for name, bench in (("2D, MedNIST-style 64x64 JPEGs, batch 300", bench_2d),
                        ("3D, brain MRI, 64^3 patches, batch 2", bench_3d)):
        rows, ratio = bench(args.work, args.quick)
        print(f"\n{name}")
        print("| pipeline | samples/s |\n| --- | ---: |")
        for label, rate in rows:
            print(f"| {label} | {rate:,.1f} |")
        print(f"shardify against the best DataLoader: {ratio:.2f}x")


if __name__ == "__main__":
    main()
