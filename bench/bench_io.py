#!/usr/bin/env python3
"""Reading speed of Fashion-MNIST train: the ways PyTorch users read it against shardify's.

    /usr/bin/python3 bench/bench_io.py [--build build] [--work DIR] [--json FILE] [--quick] [--rounds N] [--no-cold]

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
  ffcv          FFCV's Loader (when `import ffcv` works: Debian's python3-ffcv) over the
                raw arrays (NDArrayField, IntField), os_cache=True, RANDOM order, --threads
                workers; its compilation is left out (a first epoch, not timed)

Every batch holds the images and the labels (int64). Threaded readers use --threads
(default: all cores). Fast methods run whole epochs, at least --epochs and at least
--min-seconds (the two Loaders the same epochs, so their ratio compares like with like),
in --rounds rounds that alternate the methods; a figure is the median round, with the
CPU time of that run (all threads, and child processes) per sample.
Cold (unless --no-cold, and first): the Python Loaders and FFCV read one epoch after
posix_fadvise(DONTNEED) over the dataset's files, each in a new process (imports, and
FFCV's warm-up over another small file, before timing), from the Loader's construction.
Inputs are made once under --work and reused (PNGs with bin/idx2png, else PIL; shards
with bin/shardify from the idx files, default options, or --codec raw) and read before
the warm runs. Prints Markdown tables (and the targets) and, with --json, the figures.
--quick: the first 1,024 images, one epoch each, a second at most per PNG run: a check
that every method runs, not a measurement.
"""
import argparse
import importlib
import json
import math
import os
import platform
import resource
import shutil
import struct
import subprocess
import sys
import time

from bench_io_readers import (bench_bare_zstd, bench_cpp_loader, bench_ffcv, bench_imagefolder, bench_index_select,
                              bench_memmap, bench_py_loader, bench_tensordataset, cold_run, run, write_beton)

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
    ("ffcv", "FFCV {ffcv} Loader, raw arrays (`os_cache`, `RANDOM` order, {threads} workers)"),
]
# The readers compared warm and cold, with bytes on disk and CPU per sample.
PEERS = ["index_select", "ffcv", "py_zstd", "py_raw"]
# numerator, denominator, label, target (a fraction).
RATIOS = [
    ("py_zstd", "cpp_zstd", "Python Loader / C++ Loader, zstd", 0.9),
    ("py_raw", "cpp_raw", "Python Loader / C++ Loader, raw", 0.9),
    ("cpp_zstd", "bare_zstd", "C++ Loader zstd / bare zstd", 0.8),
    ("py_zstd", "bare_zstd", "Python Loader zstd / bare zstd", 0.8),
    ("cpp_raw", "index_select", "C++ Loader raw / `index_select`", 1.0),
    ("py_raw", "index_select", "Python Loader raw / `index_select`", 1.0),
]
# Against FFCV (PEERS): label, numerator, denominator, measure (warm, cold or bytes), goal,
# and whether the goal is a most (bytes) rather than a least.
TARGETS = [
    ("default (zstd) / FFCV, warm", "py_zstd", "ffcv", "warm", 1.0, False),
    ("default (zstd) / FFCV, cold", "py_zstd", "ffcv", "cold", 5.0, False),
    ("default (zstd) / FFCV, bytes", "py_zstd", "ffcv", "bytes", 0.6, True),
    ("raw / FFCV, warm", "py_raw", "ffcv", "warm", 4.0, False),
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
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds of the fast methods, alternated, and of the cold runs; the median is shown "
                        "(default %(default)s; --quick: 1)")
    p.add_argument("--no-cold", dest="cold", action="store_false", help="leave out the cold-cache epochs")
    a = p.parse_args(argv)
    try:
        a.batches = [int(b) for b in a.batches.split(",")]
    except ValueError:
        p.error("--batches: expected sizes like 64,256, not '%s'" % a.batches)
    for name, value in (("--batches", min(a.batches)), ("--threads", a.threads), ("--epochs", a.epochs),
                        ("--rounds", a.rounds)):
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
        a.epochs, a.min_seconds, a.png_seconds, a.rounds = 1, 0.0, min(a.png_seconds, 1.0), 1
    try:
        import importlib.metadata
        importlib.import_module("ffcv")
        a.ffcv = importlib.metadata.version("ffcv")
    except Exception:  # not installed, or it cannot load (it needs python3-opencv)
        a.ffcv = None
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
    if a.ffcv:
        paths["ffcv"] = made(os.path.join(work, "ffcv.beton"), lambda tmp: write_beton(a, tmp, images, labels))
        paths["ffcv_warmup"] = made(os.path.join(work, "ffcv-warmup.beton"),
                                    lambda tmp: write_beton(a, tmp, images[:256], labels[:256]))
    return paths


def files_of(path):
    return [path] if os.path.isfile(path) else [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]


def warm(paths):
    """Reads every input file once, so each method starts from the page cache."""
    total = 0
    for key in ("png", "zstd", "raw", "npy", "ffcv"):
        for name in files_of(paths[key]) if key in paths else []:
            with open(name, "rb") as f:
                while True:
                    chunk = f.read(1 << 20)
                    if not chunk:
                        break
                    total += len(chunk)
    return total


def tree_bytes(path):
    return sum(os.path.getsize(name) for name in files_of(path))


def drop_cache(path):
    """Drops the page cache of path's files (posix_fadvise DONTNEED); returns the bytes
    still resident by fincore (util-linux), or None where it is missing."""
    for name in files_of(path):
        fd = os.open(name, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages are not dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    if shutil.which("fincore") is None:
        return None
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", *files_of(path)],
                         capture_output=True, text=True).stdout
    return sum(int(v) for v in out.split())


def epochs_for(a, one_epoch):
    """Epochs that take --min-seconds (at least --epochs), from one epoch's result."""
    if a.quick:
        return 1
    return max(a.epochs, math.ceil(a.min_seconds / max(one_epoch["seconds"], 1e-6) * 1.1))


def with_cpu(run):
    """run()'s result with the CPU time it took (this process's threads, and its children)
    per sample."""
    def seconds():
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + children.ru_utime + children.ru_stime
    t0 = seconds()
    r = run()
    cpu = seconds() - t0
    r["cpu_us_per_sample"] = cpu / r["samples"] * 1e6 if r["samples"] else 0.0
    return r


def medians(runs):
    """{key: {batch: the run of median samples/s, with every round's figure}}."""
    out = {}
    for (key, batch), rs in runs.items():
        for r in rs:
            r["samples_per_s"] = r["samples"] / r["seconds"] if r["seconds"] > 0 else 0.0
        ranked = sorted(rs, key=lambda r: r["samples_per_s"])
        out.setdefault(key, {})[batch] = dict(ranked[(len(ranked) - 1) // 2],
                                              rounds=[r["samples_per_s"] for r in rs])
    return out


def measure(a, paths, data, n):
    """{row key: {batch: result}}: ImageFolder once, the fast methods --rounds times,
    alternated, their medians."""
    images, labels = data
    png = {batch: with_cpu(lambda: bench_imagefolder(a, paths, n, batch)) for batch in a.batches}
    epochs = {(codec, b): epochs_for(a, bench_cpp_loader(a, paths[codec], n, b, 1))
              for codec in ("zstd", "raw") for b in a.batches}
    bare_epochs = epochs_for(a, bench_bare_zstd(a, paths["zstd"], n, 1))
    methods = {
        "tensordataset": lambda b: bench_tensordataset(a, data, n, b),
        "index_select": lambda b: bench_index_select(a, data, n, b),
        "memmap": lambda b: bench_memmap(a, paths, labels.numpy(), n, b),
    }
    for codec in ("zstd", "raw"):  # the two Loaders read the same epochs
        methods["cpp_" + codec] = lambda b, c=codec: bench_cpp_loader(a, paths[c], n, b, epochs[c, b])
        methods["py_" + codec] = lambda b, c=codec: bench_py_loader(a, paths[c], n, b, epochs[c, b])
    if a.ffcv:
        methods["ffcv"] = lambda b: bench_ffcv(a, paths["ffcv"], n, b)
    runs = {}
    for _ in range(a.rounds):
        for batch in a.batches:
            for key, method in methods.items():
                runs.setdefault((key, batch), []).append(with_cpu(lambda: method(batch)))
        # Batch size does not apply to the bare decode: one run serves every column.
        runs.setdefault(("bare_zstd", 0), []).append(with_cpu(lambda: bench_bare_zstd(a, paths["zstd"], n, bare_epochs)))
    out = medians(runs)
    bare = out.pop("bare_zstd")[0]
    bare["note"] = plural(bare["epochs"], "epoch") + ", no batches (one run for every column)"
    out["bare_zstd"] = {batch: bare for batch in a.batches}
    out["imagefolder"] = medians({("imagefolder", b): [r] for b, r in png.items()})["imagefolder"]
    return {key: out[key] for key, _ in rows(a)}


def measure_cold(a, paths, n):
    """{key: {batch: result}} of one epoch from a cold page cache, each run in a new
    process (see cold_run), --rounds times, alternated, the medians."""
    keys = [k for k in PEERS if k != "index_select" and (k != "ffcv" or a.ffcv)]
    runs = {}
    for _ in range(a.rounds):
        for batch in a.batches:
            for key in keys:
                path = paths[key.replace("py_", "")]
                resident = drop_cache(path)
                spec = {"key": key, "path": path, "batch": batch, "threads": a.threads, "seed": a.seed,
                        "build": a.build, "n": n, "warmup": paths.get("ffcv_warmup")}
                r = json.loads(run([sys.executable, os.path.abspath(__file__), "--cold-run", json.dumps(spec)])
                               .strip().splitlines()[-1])
                r["resident_bytes_at_start"] = resident
                if resident is not None and resident > tree_bytes(path) / 100:
                    print("warning: %s: %.1f MiB stayed in the page cache (mapped elsewhere?): not a cold run"
                          % (path, resident / 2**20))
                runs.setdefault((key, batch), []).append(r)
    return medians(runs)


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


def rows(a):
    """ROWS that run here (FFCV where it is installed), labels filled in."""
    return [(key, label.format(threads=a.threads, ffcv=a.ffcv)) for key, label in ROWS if key != "ffcv" or a.ffcv]


def table(a, out):
    lines = ["| reader | " + " | ".join("batch %d" % b for b in a.batches) + " | timed |",
             "| --- | " + " | ".join("---:" for _ in a.batches) + " | --- |"]
    for key, label in rows(a):
        figures = " | ".join("{:,.0f}".format(out[key][b]["samples_per_s"]) for b in a.batches)
        lines.append("| %s | %s | %s |" % (label, figures, timed_note(out[key])))
    lines += ["", "| ratio | " + " | ".join("batch %d" % b for b in a.batches) + " | target |",
              "| --- | " + " | ".join("---:" for _ in a.batches) + " | ---: |"]
    for num, den, label, target in RATIOS:
        figures = " | ".join("%.0f%%" % (100 * ratio(out, num, den, b)) for b in a.batches)
        lines.append("| %s | %s | >= %.0f%% |" % (label, figures, 100 * target))
    return "\n".join(lines)


def ratio(out, num, den, batch):
    d = out[den][batch]["samples_per_s"]
    return out[num][batch]["samples_per_s"] / d if d > 0 else 0.0


def sizes_of(paths, data):
    """Bytes each peer reads: on disk, or in RAM for index_select."""
    images, labels = data
    sizes = {"index_select": images.numel() * images.element_size() + labels.numel() * labels.element_size(),
             "py_zstd": tree_bytes(paths["zstd"]), "py_raw": tree_bytes(paths["raw"])}
    if "ffcv" in paths:
        sizes["ffcv"] = tree_bytes(paths["ffcv"])
    return sizes


def target_values(out, cold, sizes, measure, num, den, batches):
    """{batch: num / den} for a TARGETS row, or None where a side was not measured."""
    if measure == "bytes":
        return {b: sizes[num] / sizes[den] for b in batches} if den in sizes else None
    runs = out if measure == "warm" else cold
    if num not in runs or den not in runs:
        return None
    return {b: runs[num][b]["samples_per_s"] / runs[den][b]["samples_per_s"] for b in batches}


def peers_table(a, out, cold, sizes):
    b = a.batches
    label = dict(rows(a))
    lines = ["| reader | bytes | " + " | ".join("batch %d" % x for x in b) + " | " +
             " | ".join("cold, batch %d" % x for x in b) + " | cold, first batch | CPU per sample |",
             "| --- | ---: | " + " | ".join("---:" for _ in range(2 * len(b))) + " | ---: | ---: |"]
    for key in [k for k in PEERS if k in out]:
        warm = " | ".join("{:,.0f}".format(out[key][x]["samples_per_s"]) for x in b)
        colds = " | ".join("{:,.0f}".format(cold[key][x]["samples_per_s"]) if key in cold else "-" for x in b)
        first = " / ".join("%.0f ms" % (1e3 * cold[key][x]["first_batch_seconds"]) for x in b) if key in cold else "-"
        cpu = " / ".join("%.2f us" % out[key][x]["cpu_us_per_sample"] for x in b)
        where = " in RAM" if key == "index_select" else ""
        lines.append("| %s | %.1f MiB%s | %s | %s | %s | %s |" % (label[key], sizes[key] / 2**20, where, warm, colds,
                                                               first, cpu))
    lines += ["", "| target | " + " | ".join("batch %d" % x for x in b) + " | goal |",
              "| --- | " + " | ".join("---:" for _ in b) + " | ---: |"]
    for text, num, den, measure, goal, at_most in TARGETS:
        values = target_values(out, cold, sizes, measure, num, den, b)
        if values is not None:
            figures = " | ".join("%.2fx" % values[x] for x in b)
            lines.append("| %s | %s | %s %.1fx |" % (text, figures, "<=" if at_most else ">=", goal))
    return "\n".join(lines)


def main(argv):
    if argv[:1] == ["--cold-run"]:
        return cold_run(argv[1])
    a = parse_args(argv)
    sys.path.insert(0, os.path.join(a.build, "python"))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "examples"))
    import numpy as np
    from common import read_idx
    import torch
    importlib.import_module("shardify")  # imported before any timing, as torch
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
    sizes = sizes_of(paths, data)
    print("data: Fashion-MNIST train, %s images [1, 28, 28] u8 and labels; shards zstd %.1f MiB, raw %.1f MiB%s; "
          "%.1f MiB read to warm the page cache" % (format(n, ","), sizes["py_zstd"] / 2**20, sizes["py_raw"] / 2**20,
                                                    ", FFCV %.1f MiB" % (sizes["ffcv"] / 2**20) if a.ffcv else "",
                                                    warmed / 2**20))
    print("torch %s, numpy %s, FFCV %s, %d threads, median of %s%s\n" % (
        torch.__version__, np.__version__, a.ffcv or "not installed", a.threads, plural(a.rounds, "round"),
        " (--quick: checks, not figures)" if a.quick else ""))
    sys.stdout.flush()
    # Cold runs first: a file this process has mapped (as FFCV's Loader keeps its file)
    # would stay in the page cache.
    cold = measure_cold(a, paths, n) if a.cold else {}
    warm(paths)
    out = measure(a, paths, data, n)
    info["load_average_at_end"] = list(os.getloadavg())
    print("samples/s, shuffled, images and labels per batch:\n")
    print(table(a, out))
    print("\nsmall samples against FFCV (warm and cold epochs, samples/s; the time to a cold epoch's first batch "
          "and the CPU time per sample of the warm runs, each batch size):\n")
    print(peers_table(a, out, cold, sizes))
    print("\nload average at the end: %.1f %.1f %.1f" % tuple(info["load_average_at_end"]))
    if a.json:
        report = {"machine": info, "samples": n, "threads": a.threads, "quick": a.quick, "batches": a.batches,
                  "torch": torch.__version__, "numpy": np.__version__, "ffcv": a.ffcv, "rounds": a.rounds,
                  "bytes": sizes,
                  "rows": [{"key": key, "reader": label, "results": {str(b): out[key][b] for b in a.batches}}
                           for key, label in rows(a)],
                  "cold": {key: {str(b): r for b, r in results.items()} for key, results in cold.items()},
                  "ratios": [{"ratio": label, "target": target,
                              "results": {str(b): ratio(out, num, den, b) for b in a.batches}}
                             for num, den, label, target in RATIOS],
                  "targets": [{"target": text, "goal": goal, "at_most": at_most,
                               "results": target_values(out, cold, sizes, measure, num, den, a.batches)}
                              for text, num, den, measure, goal, at_most in TARGETS]}
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
