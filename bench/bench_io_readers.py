"""The readers that bench/bench_io.py times, one function each: every one returns
{"samples", "seconds", "epochs" or "note"} for one batch size; and one cold epoch in a
process of its own (bench_io.py --cold-run)."""
import importlib
import json
import os
import subprocess
import sys
import time


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("bench_io: %s failed (exit %d):\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r.stdout


def timed_epochs(a, epoch, n, epochs=None):
    """Runs epoch(e) for e = 0, 1, ... until `epochs` (default: at least --epochs and
    --min-seconds) and times them together."""
    t0 = time.perf_counter()
    e = 0
    while (e < epochs) if epochs else (e < a.epochs or time.perf_counter() - t0 < a.min_seconds):
        epoch(e)
        e += 1
    seconds = time.perf_counter() - t0
    return {"samples": n * e, "seconds": seconds, "epochs": e}


def gray_png(path):
    from PIL import Image
    with open(path, "rb") as f:
        return Image.open(f).convert("L")


def bench_imagefolder(a, paths, n, batch):
    import torch
    import torchvision
    folder = torchvision.datasets.ImageFolder(paths["png"], loader=gray_png,
                                              transform=torchvision.transforms.PILToTensor())
    if len(folder) != n:
        sys.exit("bench_io: %s holds %d images, not %d (remove it to remake it)" % (paths["png"], len(folder), n))
    runs = []
    for workers in sorted({0, a.threads}):
        loader = torch.utils.data.DataLoader(folder, batch_size=batch, shuffle=True, num_workers=workers,
                                             generator=torch.Generator().manual_seed(a.seed))
        samples = 0
        t0 = time.perf_counter()
        for images, _ in loader:  # workers start inside the timing, as in every epoch
            samples += len(images)
            if time.perf_counter() - t0 >= a.png_seconds:
                break
        runs.append({"num_workers": workers, "samples": samples, "seconds": time.perf_counter() - t0})
    best = max(runs, key=lambda r: r["samples"] / r["seconds"])
    note = "best num_workers=%d, %s samples in %.1f s" % (best["num_workers"], format(best["samples"], ","),
                                                         best["seconds"])
    return dict(best, note=note, runs=runs)


def bench_tensordataset(a, data, n, batch):
    import torch
    images, labels = data
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, labels), batch_size=batch,
                                         shuffle=True, num_workers=0, generator=torch.Generator().manual_seed(a.seed))

    def epoch(_):
        for _ in loader:
            pass
    return timed_epochs(a, epoch, n)


def bench_index_select(a, data, n, batch):
    import torch
    images, labels = data
    generator = torch.Generator().manual_seed(a.seed)

    def epoch(_):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, batch):
            rows = order[start:start + batch]
            images.index_select(0, rows)
            labels.index_select(0, rows)
    return timed_epochs(a, epoch, n)


def bench_memmap(a, paths, labels, n, batch):
    import numpy as np
    import torch
    mapped = np.load(paths["npy"], mmap_mode="r")
    rng = np.random.default_rng(a.seed)

    def epoch(_):
        order = rng.permutation(n)
        for start in range(0, n, batch):
            rows = np.sort(order[start:start + batch])
            torch.from_numpy(mapped[rows])
            torch.from_numpy(labels[rows])
    return timed_epochs(a, epoch, n)


def bench_py_loader(a, path, n, batch, epochs):
    """The Python Loader, `epochs` epochs, timed from its construction (as the C++ one)."""
    import shardify
    t0 = time.perf_counter()
    loader = shardify.Loader(path, split="train", batch_size=batch, shuffle=True, seed=a.seed, threads=a.threads)
    samples = 0
    for _ in range(epochs):
        for b in loader:
            samples += len(b["index"])
    seconds = time.perf_counter() - t0
    loader.close()
    if samples != n * epochs:
        sys.exit("bench_io: the Python Loader gave %d samples in %d epochs, not %d" % (samples, epochs, n * epochs))
    return {"samples": samples, "seconds": seconds, "epochs": epochs}


def cpp_json(cmd):
    return json.loads(run(cmd).strip().splitlines()[-1])


def bench_cpp_loader(a, path, n, batch, epochs):
    r = cpp_json([os.path.join(a.build, "bin", "shardtool"), "bench", path, "--split", "train", "--batch", str(batch),
                  "--threads", str(a.threads), "--epochs", str(epochs), "--seed", str(a.seed), "--json"])
    if r["samples"] != n * epochs:
        sys.exit("bench_io: shardtool bench read %d samples, not %d" % (r["samples"], n * epochs))
    return {"samples": r["samples"], "seconds": r["seconds"], "epochs": epochs}


def bench_bare_zstd(a, path, n, epochs):
    r = cpp_json([os.path.join(a.build, "bin", "loader_bench"), path, "--bare-zstd", "--split", "train",
                  "--threads", str(a.threads), "--epochs", str(epochs), "--seed", str(a.seed), "--json"])
    if r["samples"] != n * epochs:
        sys.exit("bench_io: loader_bench --bare-zstd decoded %d samples, not %d" % (r["samples"], n * epochs))
    return {"samples": r["samples"], "seconds": r["seconds"], "epochs": epochs}


def ffcv_loader(path, batch, threads, seed):
    from ffcv.fields.decoders import IntDecoder, NDArrayDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import ToTensor
    return Loader(path, batch_size=batch, num_workers=threads, order=OrderOption.RANDOM, os_cache=True, seed=seed,
                  drop_last=False,
                  pipelines={"image": [NDArrayDecoder(), ToTensor()], "label": [IntDecoder(), ToTensor()]})


def ffcv_epoch(loader):
    samples = 0
    for images, _ in loader:
        samples += len(images)
    return samples


def bench_ffcv(a, path, n, batch):
    """FFCV's Loader: one epoch untimed (its pipeline compiles then), then timed epochs."""
    loader = ffcv_loader(path, batch, a.threads, a.seed)
    if ffcv_epoch(loader) != n:
        sys.exit("bench_io: FFCV's Loader gave an epoch of other than %d samples" % n)
    return timed_epochs(a, lambda _: ffcv_epoch(loader), n)


def write_beton(a, path, images, labels):
    """FFCV's file of the images (raw arrays) and labels."""
    import numpy as np
    from ffcv.fields import IntField, NDArrayField
    from ffcv.writer import DatasetWriter

    class Pairs:
        def __len__(self):
            return len(images)

        def __getitem__(self, i):
            return images[i], int(labels[i])
    fields = {"image": NDArrayField(np.dtype("u1"), tuple(images.shape[1:])), "label": IntField()}
    DatasetWriter(path, fields, num_workers=a.threads).from_indexed_dataset(Pairs())


def cold_run(spec):
    """One cold epoch (the parent dropped the cache): imports, and FFCV's warm-up over
    another small file, come first; the timing starts at the Loader's construction.
    Prints the result as JSON, with the time to the first batch."""
    s = json.loads(spec)
    sys.path.insert(0, os.path.join(s["build"], "python"))
    importlib.import_module("torch")  # imported before timing, as every reader's batches are tensors
    import shardify
    if s["key"] == "ffcv":
        ffcv_epoch(ffcv_loader(s["warmup"], s["batch"], s["threads"], s["seed"]))
    t0, c0 = time.perf_counter(), time.process_time()
    if s["key"] == "ffcv":
        sizes = (len(images) for images, _ in ffcv_loader(s["path"], s["batch"], s["threads"], s["seed"]))
    else:
        loader = shardify.Loader(s["path"], split="train", batch_size=s["batch"], shuffle=True, seed=s["seed"],
                                 threads=s["threads"])
        sizes = (len(b["index"]) for b in loader)
    samples, first = 0, None
    for size in sizes:
        samples += size
        first = first if first is not None else time.perf_counter() - t0
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    if samples != s["n"]:
        sys.exit("bench_io: a cold epoch of %s gave %d samples, not %d" % (s["key"], samples, s["n"]))
    print(json.dumps({"samples": samples, "seconds": seconds, "epochs": 1, "first_batch_seconds": first,
                      "cpu_us_per_sample": cpu / samples * 1e6}))
    return 0
