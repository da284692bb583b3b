#!/usr/bin/env python3
"""Reading speed of Fashion-MNIST train: the ways PyTorch users read it against shardify's.

    /usr/bin/python3 tools/bench_io.py [--build build] [--work DIR] [--json FILE] [--quick]

One run on this machine, the same 60,000 28x28 u8 images and labels (Debian's
dataset-fashion-mnist), shuffled every epoch, samples/s at batch 64 and 256 for:

  imagefolder   torchvision ImageFolder (gray PNGs, PILToTensor) + DataLoader, best of
                num_workers 0 and --threads; timed for at most --png-seconds per run
  tensordataset TensorDataset of the decoded images in RAM + DataLoader(num_workers=0)
  index_select  torch.randperm per epoch, index_select of each batch from an in-RAM
                uint8 tensor [N, 1, 28, 28] (and the labels)
  memmap        np.load(mmap_mode="r") of a .npy of the raw bytes, a random permutation
                per epoch, sorted fancy indexing per batch (and the labels)
  py_zstd       shardify.Loader (Python) on zstd shards, checksums on
  py_raw        shardify.Loader (Python) on raw shards, checksums on
  cpp_zstd      the C++ Loader (shardtool bench --json) on the zstd shards
  cpp_raw       the C++ Loader on the raw shards
  bare_zstd     ZSTD_decompressDCtx alone over the same stored image blobs, the same
                threads (loader_bench --bare-zstd): the ceiling of the zstd Loader

Every batch holds the images and the labels (int64). Threaded readers use --threads
(default: all cores). Fast methods run whole epochs, at least --epochs and at least
--min-seconds (the two Loaders the same epochs, so their ratio compares like with like).
Inputs are made once under --work and reused (PNGs with bin/idx2png, else PIL; shards
with bin/shardify from the idx files, default options: zstd level 9 with a dictionary, or
--codec raw) and read once before timing, so the page cache is warm.
Prints a Markdown table (and the targets' ratios) and, with --json, writes the figures.
--quick: the first 1,024 images, one epoch each, a second at most per PNG run: a check
that every method runs, not a measurement.
"""
import argparse
import json
import math
import os
import platform
import shutil
import struct
import subprocess
import sys
import time

FMNIST = "/usr/share/datasets/fashion-mnist"
IMAGES = "train-images-idx3-ubyte"
LABELS = "train-labels-idx1-ubyte"
CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]
QUICK_SAMPLES = 1024

# key, table label; the order of the table.
ROWS = [
    ("imagefolder", "torchvision ImageFolder + DataLoader over PNGs (best of num_workers 0, {threads})"),
    ("tensordataset", "TensorDataset in RAM + DataLoader (num_workers 0)"),
    ("index_select", "`index_select` of a `randperm` on an in-RAM uint8 tensor"),
    ("memmap", "numpy memmap of the raw bytes, sorted fancy indexing"),
    ("py_zstd", "shardify.Loader (Python), zstd shards, checksums on"),
    ("py_raw", "shardify.Loader (Python), raw shards, checksums on"),
    ("cpp_zstd", "C++ Loader (`shardtool bench`), zstd shards, checksums on"),
    ("cpp_raw", "C++ Loader (`shardtool bench`), raw shards, checksums on"),
    ("bare_zstd", "bare `ZSTD_decompressDCtx` over the same image blobs (`loader_bench --bare-zstd`)"),
]
# numerator, denominator, label, target (a fraction).
RATIOS = [
    ("py_zstd", "cpp_zstd", "Python Loader / C++ Loader, zstd", 0.9),
    ("py_raw", "cpp_raw", "Python Loader / C++ Loader, raw", 0.9),
    ("cpp_zstd", "bare_zstd", "C++ Loader zstd / bare zstd", 0.8),
    ("py_zstd", "bare_zstd", "Python Loader zstd / bare zstd", 0.8),
    ("cpp_raw", "index_select", "C++ Loader raw / `index_select`", 1.0),
    ("py_raw", "index_select", "Python Loader raw / `index_select`", 1.0),
]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build", help="build directory with bin/ and python/ (default %(default)s)")
    p.add_argument("--work", default="/tmp/shardify-bench-io",
                   help="where the PNGs, shards and .npy are made, and reused by later runs: remove it to "
                        "remake them, e.g. after a change of the format (default %(default)s)")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    p.add_argument("--quick", action="store_true", help="a tiny run (1,024 samples, 1 epoch): checks, not figures")
    p.add_argument("--batches", default="64,256", help="batch sizes, comma-separated (default %(default)s)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="threads of the threaded readers and workers of the DataLoader (default: all cores, %(default)s)")
    p.add_argument("--epochs", type=int, default=3, help="least epochs of the fast methods (default %(default)s)")
    p.add_argument("--min-seconds", type=float, default=1.0,
                   help="least seconds per timing of the fast methods (default %(default)s)")
    p.add_argument("--png-seconds", type=float, default=20.0,
                   help="most seconds per ImageFolder run; it stops after the batch that passes them (default %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of every shuffle (default %(default)s)")
    a = p.parse_args(argv)
    try:
        a.batches = [int(b) for b in a.batches.split(",")]
    except ValueError:
        p.error("--batches: expected sizes like 64,256, not '%s'" % a.batches)
    for name, value in (("--batches", min(a.batches)), ("--threads", a.threads), ("--epochs", a.epochs)):
        if value < 1:
            p.error("%s must be >= 1" % name)
    if a.min_seconds < 0 or a.png_seconds <= 0:
        p.error("--min-seconds must be >= 0 and --png-seconds > 0")
    a.build = os.path.abspath(a.build)
    for tool in ("shardify", "shardtool", "loader_bench"):
        if not os.access(os.path.join(a.build, "bin", tool), os.X_OK):
            p.error("%s/bin/%s is not built (see the README's build)" % (a.build, tool))
    if not os.path.isdir(os.path.join(a.build, "python", "shardify")):
        p.error("%s/python/shardify is not built (SHARDIFY_WITH_PYTHON)" % a.build)
    if a.quick:
        a.epochs, a.min_seconds, a.png_seconds = 1, 0.0, min(a.png_seconds, 1.0)
    return a


# ---------------------------------------------------------------------------------------
# Inputs


def write_idx(path, array):
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 8, array.ndim]) + struct.pack(">" + "I" * array.ndim, *array.shape))
        f.write(array.tobytes())


def made(path, make):
    """Calls make(tmp) to build `path` unless it exists; renames tmp into place when done,
    so an interrupted run never leaves a partial input that looks complete."""
    if os.path.exists(path):
        return path
    tmp = path + ".partial"
    if os.path.isdir(tmp):
        shutil.rmtree(tmp)
    elif os.path.exists(tmp):
        os.remove(tmp)
    make(tmp)
    os.rename(tmp, path)
    return path


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("bench_io: %s failed (exit %d):\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r.stdout


def make_inputs(a, images, labels):
    """The idx files, PNG class folders, zstd and raw shards and the .npy, under --work."""
    import numpy as np
    n = len(images)
    work = os.path.join(os.path.abspath(a.work), "quick" if a.quick else "full")
    os.makedirs(work, exist_ok=True)
    sources = [os.path.join(FMNIST, name + ".gz") for name in (IMAGES, LABELS)]

    def idx(tmp):
        os.makedirs(tmp)
        if a.quick:
            write_idx(os.path.join(tmp, IMAGES), images.reshape(n, 28, 28))
            write_idx(os.path.join(tmp, LABELS), labels)
        else:
            for src in sources:
                os.symlink(src, os.path.join(tmp, os.path.basename(src)))

    def pngs(tmp):
        idx2png = os.path.join(a.build, "bin", "idx2png")
        if os.access(idx2png, os.X_OK):
            run([idx2png, *sources, "-o", tmp, "--classes", ",".join(CLASSES), "--limit", str(n),
                 "--threads", str(a.threads)])
            return
        from PIL import Image
        for c in CLASSES:
            os.makedirs(os.path.join(tmp, c))
        for i, (image, label) in enumerate(zip(images, labels)):
            Image.fromarray(image.reshape(28, 28), mode="L").save(os.path.join(tmp, CLASSES[label], "%05d.png" % i))

    def shards(codec):
        return lambda tmp: run([os.path.join(a.build, "bin", "shardify"), paths["idx"], "-o", tmp, "--codec", codec,
                                "--threads", str(a.threads), "--no-fsync", "--quiet"])

    def npy(tmp):
        with open(tmp, "wb") as f:
            np.save(f, images)

    paths = {"idx": made(os.path.join(work, "idx"), idx)}
    paths["png"] = made(os.path.join(work, "png"), pngs)
    paths["zstd"] = made(os.path.join(work, "zstd"), shards("zstd"))
    paths["raw"] = made(os.path.join(work, "raw"), shards("raw"))
    paths["npy"] = made(os.path.join(work, "images.npy"), npy)
    return paths


def warm(paths):
    """Reads every input file once, so each method starts from the page cache."""
    total = 0
    for key in ("png", "zstd", "raw", "npy"):
        path = paths[key]
        files = [path] if os.path.isfile(path) else [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
        for name in files:
            with open(name, "rb") as f:
                while True:
                    chunk = f.read(1 << 20)
                    if not chunk:
                        break
                    total += len(chunk)
    return total


def tree_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


# ---------------------------------------------------------------------------------------
# Methods: each returns {"samples", "seconds", "epochs" or "note"} for one batch size.


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


def epochs_for(a, one_epoch):
    """Epochs that take --min-seconds (at least --epochs), from one epoch's result."""
    if a.quick:
        return 1
    return max(a.epochs, math.ceil(a.min_seconds / max(one_epoch["seconds"], 1e-6) * 1.1))


def measure(a, paths, data, n):
    """{row key: {batch: result}}; the rows in table order."""
    images, labels = data
    out = {key: {} for key, _ in ROWS}
    for batch in a.batches:
        out["imagefolder"][batch] = bench_imagefolder(a, paths, n, batch)
        out["tensordataset"][batch] = bench_tensordataset(a, data, n, batch)
        out["index_select"][batch] = bench_index_select(a, data, n, batch)
        out["memmap"][batch] = bench_memmap(a, paths, labels.numpy(), n, batch)
        for codec in ("zstd", "raw"):
            epochs = epochs_for(a, bench_cpp_loader(a, paths[codec], n, batch, 1))
            out["cpp_" + codec][batch] = bench_cpp_loader(a, paths[codec], n, batch, epochs)
            out["py_" + codec][batch] = bench_py_loader(a, paths[codec], n, batch, epochs)
    # Batch size does not apply to the bare decode: one run serves every column.
    bare = bench_bare_zstd(a, paths["zstd"], n, epochs_for(a, bench_bare_zstd(a, paths["zstd"], n, 1)))
    for batch in a.batches:
        out["bare_zstd"][batch] = dict(bare, note=plural(bare["epochs"], "epoch") + ", no batches (one run for every column)")
    for rows in out.values():
        for r in rows.values():
            r["samples_per_s"] = r["samples"] / r["seconds"] if r["seconds"] > 0 else 0.0
    return out


# ---------------------------------------------------------------------------------------
# Report


def machine():
    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return {"cores": os.cpu_count(), "cpu": model, "load_average": list(os.getloadavg())}


def plural(count, noun):
    return "%s %s%s" % (format(count, ","), noun, "" if count == 1 else "s")


def timed_note(results):
    notes = []
    for batch, r in results.items():
        notes.append(r.get("note") or plural(r["epochs"], "epoch"))
    if len(set(notes)) == 1:
        return notes[0]
    return "; ".join("batch %d: %s" % (b, note) for b, note in zip(results, notes))


def table(a, out):
    lines = ["| reader | " + " | ".join("batch %d" % b for b in a.batches) + " | timed |",
             "| --- | " + " | ".join("---:" for _ in a.batches) + " | --- |"]
    for key, label in ROWS:
        figures = " | ".join("{:,.0f}".format(out[key][b]["samples_per_s"]) for b in a.batches)
        lines.append("| %s | %s | %s |" % (label.format(threads=a.threads), figures, timed_note(out[key])))
    lines += ["", "| ratio | " + " | ".join("batch %d" % b for b in a.batches) + " | target |",
              "| --- | " + " | ".join("---:" for _ in a.batches) + " | ---: |"]
    for num, den, label, target in RATIOS:
        figures = " | ".join("%.0f%%" % (100 * ratio(out, num, den, b)) for b in a.batches)
        lines.append("| %s | %s | >= %.0f%% |" % (label, figures, 100 * target))
    return "\n".join(lines)


def ratio(out, num, den, batch):
    d = out[den][batch]["samples_per_s"]
    return out[num][batch]["samples_per_s"] / d if d > 0 else 0.0


def main(argv):
    a = parse_args(argv)
    sys.path.insert(0, os.path.join(a.build, "python"))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "examples"))
    import numpy as np
    from common import read_idx
    import torch
    import shardify  # noqa: F401 (imported before any timing, as torch)
    torch.set_num_threads(a.threads)
    limit = QUICK_SAMPLES if a.quick else None
    images = np.array(read_idx(os.path.join(FMNIST, IMAGES + ".gz"))[:limit, None])  # [N, 1, 28, 28], writable
    labels = read_idx(os.path.join(FMNIST, LABELS + ".gz"))[:limit]
    n = len(images)
    paths = make_inputs(a, images, labels)
    warmed = warm(paths)
    data = (torch.from_numpy(images), torch.from_numpy(labels.astype(np.int64)))
    info = machine()
    print("machine: %d cores, %s, load average %.1f %.1f %.1f" % (info["cores"], info["cpu"], *info["load_average"]))
    print("data: Fashion-MNIST train, %s images [1, 28, 28] u8 and labels; shards zstd %.1f MiB, raw %.1f MiB; "
          "%.1f MiB read to warm the page cache" % (format(n, ","), tree_bytes(paths["zstd"]) / 2**20,
                                                    tree_bytes(paths["raw"]) / 2**20, warmed / 2**20))
    print("torch %s, numpy %s, %d threads%s\n" % (torch.__version__, np.__version__, a.threads,
                                                  " (--quick: checks, not figures)" if a.quick else ""))
    sys.stdout.flush()
    out = measure(a, paths, data, n)
    print("samples/s, shuffled, images and labels per batch:\n")
    print(table(a, out))
    if a.json:
        report = {"machine": info, "samples": n, "threads": a.threads, "quick": a.quick, "batches": a.batches,
                  "torch": torch.__version__, "numpy": np.__version__,
                  "rows": [{"key": key, "reader": label.format(threads=a.threads),
                            "results": {str(b): out[key][b] for b in a.batches}} for key, label in ROWS],
                  "ratios": [{"ratio": label, "target": target,
                              "results": {str(b): ratio(out, num, den, b) for b in a.batches}}
                             for num, den, label, target in RATIOS]}
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
