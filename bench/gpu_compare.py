"""The GPU comparison: one model, batch size and data fed by PyTorch's DataLoader and by
shards, on one machine in one run; writes a JSON of the results (device, date, versions).

1. The MNIST seed: MLP 784-128-64-10, batch 64, Adam 1e-3, Fashion-MNIST's 60,000 training
   images. torchvision's FashionMNIST + DataLoader with (a) num_workers=0, (b) 8 workers,
   (c) 8 workers + pin_memory + non_blocking; (d) shardtrain; (e) shardify.Loader(device=
   "cuda") in the same loop as (a)-(c).
2. The MedNIST tutorial's setup: DenseNet-121, 1 channel, 64x64, batch 300, Adam 1e-5, its
   augmentation (rotate 15 degrees, flip, zoom 0.9-1.1, each with p 0.5), on Fashion-MNIST
   resized to 64x64 (a stand-in for MedNIST): a DataLoader reading PNG files with the
   per-sample transforms in workers, shardtrain, and shardify.Loader(device="cuda",
   transform=T.preset("mednist")), with the transform run ahead in the Loader's helper
   thread (the default) and inside next() (transform_ahead=0).
3. UNet-3D on patches of real MRI (ITK's example brain and its segmentation) with nnU-Net's
   augmentation: shardtrain --model unet3d, and shardify.Loader(patch=, device="cuda",
   transform=T.preset("nnunet")) with the UNet of python/examples/unet3d_patches.py, the
   transform run ahead and inside next().

Per run: epoch time, samples/s, data-wait share (the host's time in next() and the copy
call over the epoch), GPU busy share (CUDA events around each step's compute, over the
epoch; shardtrain: not measured), the GPU utilization NVML reports (sampled every 50 ms),
and for the DenseNet run fed by shardify.Loader a profiler trace's overlap of host-to-device
copies with kernels. Python loops use bf16 autocast, as shardtrain does on CUDA.

    python3 bench/gpu_compare.py --build build-gpu --fmnist SHARDS --fmnist-idx DIR \
        --brain SHARDS --work /tmp/work --out results.json
"""

import argparse
import contextlib
import datetime
import gzip
import json
import os
import platform
import subprocess
import sys
import threading
import time

import numpy as np

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "examples")
sys.path.insert(0, EXAMPLES)
from common import read_idx, train_epoch  # noqa: E402


def log(*args):
    print(*args, flush=True)


# ---------------------------------------------------------------------------- measuring


class Utilization:
    """Mean GPU utilization (NVML, through torch.cuda.utilization) while the block runs."""

    def __init__(self, torch):
        self.torch, self.samples, self._stop = torch, [], threading.Event()

    def __enter__(self):
        def poll():
            while not self._stop.wait(0.05):
                try:
                    self.samples.append(self.torch.cuda.utilization())
                except Exception:  # no NVML: the figure is left out
                    return
        self._thread = threading.Thread(target=poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def mean(self):
        return sum(self.samples) / len(self.samples) if self.samples else None


def autocast(torch, device):
    """bf16 autocast on CUDA, as shardtrain's default; nothing on the CPU."""
    import contextlib
    if device.type != "cuda":
        return contextlib.nullcontext()
    return torch.autocast(device_type="cuda", dtype=torch.bfloat16)


def train_loop(torch, name, make_iter, to_inputs, model, optimizer, epochs, device, max_steps=None, loss_fn=None):
    """Trains `epochs` epochs (python/examples/common.py's train_epoch, under autocast on a
    GPU, each step between two CUDA events); returns one record per epoch."""
    cuda = device.type == "cuda"
    records = []
    for epoch in range(epochs):
        events = []

        @contextlib.contextmanager
        def timed_step():
            if not cuda:
                yield
                return
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            yield
            end.record()
            events.append((begin, end))

        with Utilization(torch) as util:
            e = train_epoch(model, optimizer, make_iter(), to_inputs, device, loss_fn=loss_fn, max_steps=max_steps,
                            forward=lambda: autocast(torch, device), step=timed_step)
        seconds = e["seconds"]
        busy = sum(b.elapsed_time(e) for b, e in events) / 1000.0 if cuda else None
        r = {"epoch": epoch, "seconds": seconds, "samples": e["samples"], "samples_per_s": e["samples"] / seconds,
             "data_wait_fraction": e["wait"] / seconds, "gpu_busy_fraction": busy / seconds if busy is not None else None,
             "gpu_util_nvml": util.mean, "train_loss": e["loss"]}
        log(f"  {name} epoch {epoch}: {seconds:.2f} s, {r['samples_per_s']:,.0f} samples/s, "
            f"data-wait {100 * r['data_wait_fraction']:.2f}%, GPU busy "
            f"{'-' if busy is None else f'{100 * busy / seconds:.1f}%'}, loss {r['train_loss']:.4f}")
        records.append(r)
    return records


def shardtrain(torch, binary, dataset, out, args, name, max_steps=None):
    """Runs shardtrain; returns its metrics.jsonl records (with NVML utilization per run)."""
    cmd = [binary, "train", dataset, "--out", out, "--device", "cuda" if torch.cuda.is_available() else "cpu",
           "--val-split", "none", "-q"] + args + (["--max-steps", str(max_steps)] if max_steps else [])
    log("  $ " + " ".join(cmd))
    with Utilization(torch) as util:
        start = time.perf_counter()
        subprocess.run(cmd, check=True, timeout=900)
        wall = time.perf_counter() - start
    records = []
    with open(os.path.join(out, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            records.append({"epoch": r["epoch"], "seconds": r["seconds"], "samples_per_s": r["samples_per_s"],
                            "data_wait_fraction": r["data_wait_fraction"], "gpu_busy_fraction": None,
                            "gpu_util_nvml": util.mean, "train_loss": r["train_loss"]})
            log(f"  {name} epoch {r['epoch']}: {r['seconds']:.2f} s, {r['samples_per_s']:,.0f} samples/s, "
                f"data-wait {100 * r['data_wait_fraction']:.2f}%, loss {r['train_loss']:.4f}")
    return {"name": name, "epochs": records, "process_seconds": wall, "command": " ".join(cmd[1:])}


def summary(run, skip_first=True):
    """Means over the epochs after the first (warm-up: cuDNN autotuning, workers starting)."""
    epochs = run["epochs"][1:] if skip_first and len(run["epochs"]) > 1 else run["epochs"]
    out = {}
    for key in ("seconds", "samples_per_s", "data_wait_fraction", "gpu_busy_fraction", "gpu_util_nvml"):
        values = [e[key] for e in epochs if e.get(key) is not None]
        out[key] = sum(values) / len(values) if values else None
    return out


STEP_MARK = "shardify-compare-step"


def step_spans(events):
    """The device time span of each step's compute: from the first to the last end of the
    kernels launched by the host thread inside a STEP_MARK range (matched by correlation id)."""
    marks = [e for e in events if e.get("name") == STEP_MARK and e.get("ph") == "X" and e.get("cat") != "gpu_user_annotation"]
    launches = [e for e in events if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})]
    kernels = {e["args"]["correlation"]: e for e in events if e.get("cat") == "kernel" and "correlation" in e.get("args", {})}
    spans = []  # (first kernel start, last kernel end, stream)
    for m in marks:
        inside = [kernels[r["args"]["correlation"]] for r in launches
                  if r.get("tid") == m.get("tid") and m["ts"] <= r["ts"] <= m["ts"] + m["dur"]
                  and r["args"]["correlation"] in kernels]
        if inside:
            spans.append((min(k["ts"] for k in inside), max(k["ts"] + k["dur"] for k in inside), inside[0].get("tid")))
    return sorted(spans)


def copy_overlap(torch, step_fn, steps, trace):
    """Profiles `steps` calls of step_fn; returns how much of the host-to-device copies'
    time ran while a kernel ran on another stream, how much while a step's compute was in
    progress on the device (between its first and last kernel), and the share of the window
    in which any kernel ran (from the Chrome trace)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step_fn()
        torch.cuda.synchronize()
    prof.export_chrome_trace(trace)
    # where the host's time went: the operators and CUDA runtime calls by their own time
    # (a cudaStreamSynchronize or cudaMemcpy here is the host waiting for the device)
    host = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:15]
    host_top = [{"name": e.key, "calls": e.count, "self_cpu_us": e.self_cpu_time_total} for e in host]
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    kernels = [(e["ts"], e["ts"] + e["dur"], e.get("tid")) for e in events if e.get("cat") == "kernel"]
    copies = [(e["ts"], e["ts"] + e["dur"], e.get("tid")) for e in events
              if e.get("cat") == "gpu_memcpy" and "HtoD" in e.get("name", "")]
    kernels.sort()
    busy, reach = 0.0, None  # the union of kernel intervals over the window
    for k0, k1, _ in kernels:
        if reach is None or k0 > reach:
            busy += k1 - k0
            reach = k1
        elif k1 > reach:
            busy += k1 - reach
            reach = k1
    window = (max(k[1] for k in kernels) - min(k[0] for k in kernels)) if kernels else 0.0
    total = overlapped = 0.0
    for c0, c1, stream in copies:
        total += c1 - c0
        covered, cursor = 0.0, c0
        for k0, k1, kstream in kernels:
            if k1 <= cursor or kstream == stream:
                continue
            if k0 >= c1:
                break
            lo, hi = max(k0, cursor), min(k1, c1)
            if hi > lo:
                covered += hi - lo
                cursor = hi
        overlapped += covered
    per_stream = {}
    for c0, c1, stream in copies:
        per_stream.setdefault(str(stream), []).append(c1 - c0)
    spans = step_spans(events)
    # copies on another stream than the step's, and how much of their time a step's span covers
    beside = [c for c in copies if all(c[2] != s[2] for s in spans)]
    between = []  # copies outside every span: ms after the last span's end, ms before the next's start
    for c0, c1, _ in beside:
        if any(s0 <= c0 < s1 for s0, s1, _ in spans):
            continue
        after = [c0 - s1 for s0, s1, _ in spans if s1 <= c0]
        before = [s0 - c1 for s0, s1, _ in spans if s0 >= c1]
        between.append((round(min(after) / 1000, 3) if after else None, round(min(before) / 1000, 3) if before else None,
                        round((c1 - c0) / 1000, 3)))
    beside_us = sum(c1 - c0 for c0, c1, _ in beside)
    in_steps = sum(max(0.0, min(c1, s1) - max(c0, s0)) for c0, c1, _ in beside for s0, s1, _ in spans)
    return {"host_top": host_top, "copies": len(copies), "kernels": len(kernels), "copy_us": total, "overlapped_us": overlapped,
            "copies_per_stream": {k: {"count": len(v), "us": sum(v)} for k, v in per_stream.items()},
            "kernel_busy_fraction": busy / window if window else None,
            "overlap_fraction": overlapped / total if total else None,
            "steps_profiled": len(spans), "between_steps": between[:12],
            "step_spans_ms": [round((s1 - s0) / 1000, 3) for s0, s1, _ in spans],
            "gaps_ms": [round((spans[k + 1][0] - spans[k][1]) / 1000, 3) for k in range(len(spans) - 1)], "copy_during_step_fraction": in_steps / beside_us if beside_us else None,
            "copy_streams": sorted({str(s) for _, _, s in copies}),
            "kernel_streams": sorted({str(s) for _, _, s in kernels})}


# ------------------------------------------------------------------------------- data


class IdxImages:
    """What torchvision.datasets.FashionMNIST does per sample (uint8 images held in memory,
    each made a PIL image and passed to the transform), for a torchvision that will not
    open the files below."""

    def __init__(self, idx_dir, transform):
        import torch
        self.data = torch.from_numpy(read_idx(os.path.join(idx_dir, "train-images-idx3-ubyte.gz")).copy())
        self.targets = torch.from_numpy(read_idx(os.path.join(idx_dir, "train-labels-idx1-ubyte.gz")).astype(np.int64))
        self.transform = transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        from PIL import Image
        return self.transform(Image.fromarray(self.data[i].numpy(), mode="L")), int(self.targets[i])


def torchvision_fmnist(idx_dir, root):
    """torchvision.datasets.FashionMNIST over Debian's idx files: the training files are
    unpacked where torchvision looks; the test files, which train=True never reads, are
    empty placeholders (its existence check asks for all four)."""
    import torchvision
    to_tensor = torchvision.transforms.ToTensor()
    raw = os.path.join(root, "FashionMNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    try:
        for kind in ("images-idx3", "labels-idx1"):
            target = os.path.join(raw, f"train-{kind}-ubyte")
            if not os.path.exists(target):
                with gzip.open(os.path.join(idx_dir, f"train-{kind}-ubyte.gz"), "rb") as src, \
                        open(target, "wb") as dst:
                    dst.write(src.read())
            open(os.path.join(raw, f"t10k-{kind}-ubyte"), "ab").close()
        return torchvision.datasets.FashionMNIST(root, train=True, download=False, transform=to_tensor)
    except Exception as e:  # noqa: BLE001 - the same per-sample work without torchvision's class
        log(f"  torchvision.datasets.FashionMNIST: {type(e).__name__}: {e}; using its per-sample steps directly")
        return IdxImages(idx_dir, to_tensor)


def write_png(job):
    from PIL import Image
    path, pixels = job
    Image.fromarray(pixels).resize((64, 64), Image.BILINEAR).save(path)


def mednist_standin(idx_dir, work, count, classes):
    """The first `count` training images resized to 64x64 (bilinear), as class-folder PNGs
    and as shards written with shardify.Writer from the same PNGs' pixels."""
    import multiprocessing

    import shardify
    from PIL import Image
    images = read_idx(os.path.join(idx_dir, "train-images-idx3-ubyte.gz"))[:count]
    labels = read_idx(os.path.join(idx_dir, "train-labels-idx1-ubyte.gz"))[:count]
    png = os.path.join(work, "mednist-png")
    paths = [os.path.join(png, classes[labels[i]], f"{i:05d}.png") for i in range(count)]
    if not os.path.exists(os.path.join(png, ".complete")):
        for c in classes:
            os.makedirs(os.path.join(png, c), exist_ok=True)
        with multiprocessing.Pool(os.cpu_count()) as pool:
            pool.map(write_png, list(zip(paths, images)), chunksize=256)
        open(os.path.join(png, ".complete"), "w").close()
    shards = os.path.join(work, "mednist-shards")
    if not os.path.exists(os.path.join(shards, "manifest.sfm")):
        start = time.perf_counter()
        with shardify.Writer(shards, fields={"image": ("u8", (1, 64, 64)), "label": "int", "path": "string"},
                             classes=list(classes), overwrite=True) as w:
            for i, path in enumerate(paths):
                pixels = np.asarray(Image.open(path))[None]
                w.write({"image": pixels, "label": int(labels[i]), "path": os.path.relpath(path, png)}, split="train")
        log(f"  wrote {count} samples to {shards} in {time.perf_counter() - start:.1f} s")
    return png, shards


# ------------------------------------------------------------------------------ parts


def mlp(torch):
    nn = torch.nn
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))


def part_mnist(torch, a, device, shardify):
    log("== 1. MNIST seed: MLP 784-128-64-10, batch 64, Adam 1e-3")
    dataset = torchvision_fmnist(a.fmnist_idx, os.path.join(a.work, "torchvision"))
    runs = []

    def python_run(name, make_iter, to_inputs):
        torch.manual_seed(0)
        model = mlp(torch).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        runs.append({"name": name, "epochs": train_loop(torch, name, make_iter, to_inputs, model, opt,
                                                        a.mnist_epochs, device, a.max_steps)})

    for tag, workers, pin in (("a", 0, False), ("b", a.workers, False), ("c", a.workers, True)):
        loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True, num_workers=workers,
                                             pin_memory=pin, persistent_workers=workers > 0)
        label = f"({tag}) DataLoader, num_workers={workers}" + (", pin_memory, non_blocking" if pin else "")
        python_run(label, lambda loader=loader: loader,
                   lambda b, pin=pin: (b[0].to(device, non_blocking=pin), b[1].to(device, non_blocking=pin)))
    runs.append(shardtrain(torch, a.shardtrain, a.fmnist, os.path.join(a.work, "st-mlp"),
                           ["--model", "mlp", "--batch", "64", "--lr", "1e-3", "--epochs", str(a.mnist_epochs),
                            "--seed", "0"], "(d) shardtrain", a.max_steps and a.max_steps * a.mnist_epochs))
    kind = "cuda" if device.type == "cuda" else "cpu"
    loader = shardify.Loader(a.fmnist, batch_size=64, seed=0, device=kind)
    python_run('(e) shardify.Loader(device="cuda")', lambda: loader,
               lambda b: (b["image"].float().div_(255), b["label"]))
    return runs


def profile_loader(torch, device, model, opt, loader, steps, trace):
    """copy_overlap of `steps` DenseNet steps fed by `loader` (a fresh iteration)."""
    it = iter(loader)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        b = next(it)
        with torch.profiler.record_function(STEP_MARK):
            opt.zero_grad(set_to_none=True)
            with autocast(torch, device):
                loss = loss_fn(model(b["image"].float()), b["label"])
            loss.backward()
            opt.step()
    for _ in range(3):  # the helper and the ring under way
        step()
    overlap = copy_overlap(torch, step, steps, trace)
    log(f"  copies beside a kernel ({overlap['copies']} copies): {overlap['overlap_fraction']}; during a step's "
        f"compute ({overlap['steps_profiled']} steps): {overlap['copy_during_step_fraction']}; kernels busy "
        f"{overlap['kernel_busy_fraction']}; copies between steps: {overlap['between_steps']}")
    return overlap


def part_overlap(torch, a, device, shardify):
    """Only the profile of part 2's Loader, with and without the transform (a quick look)."""
    import torchvision
    import shardify.transforms as T
    classes = [str(c) for c in range(10)]
    _, shards = mednist_standin(a.fmnist_idx, a.work, 3000, classes)
    torch.manual_seed(0)
    model = torchvision.models.densenet121(num_classes=10)
    model.features.conv0 = torch.nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
    model = model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-5)
    out = {}
    for name, transform in (("mednist preset, ahead", T.preset("mednist")), ("no transform", None)):
        log(f"== overlap: shardify.Loader, {name}")
        with shardify.Loader(shards, batch_size=300, seed=0, device="cuda", transform=transform) as loader:
            out[name] = profile_loader(torch, device, model, opt, loader, 6,
                                       os.path.join(a.work, f"overlap-{name.split()[0]}.json"))
    return out


def part_mednist(torch, a, device, shardify):
    import torchvision
    import shardify.transforms as T
    log("== 2. MedNIST setup: DenseNet-121, 1 channel, 64x64, batch 300, Adam 1e-5")
    classes = [str(c) for c in range(10)]
    png, shards = mednist_standin(a.fmnist_idx, a.work, a.mednist_images, classes)
    tv = torchvision.transforms
    augment = tv.Compose([tv.Grayscale(), tv.ToTensor(), tv.Lambda(scale_intensity),
                          tv.RandomApply([tv.RandomRotation(15)], p=0.5), tv.RandomHorizontalFlip(0.5),
                          tv.RandomApply([tv.RandomAffine(0, scale=(0.9, 1.1))], p=0.5)])
    folder = torchvision.datasets.ImageFolder(png, transform=augment)
    runs = []

    def densenet():
        torch.manual_seed(0)
        model = torchvision.models.densenet121(num_classes=10)
        model.features.conv0 = torch.nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
        return model.to(device)

    def python_run(name, make_iter, to_inputs):
        model = densenet()
        opt = torch.optim.Adam(model.parameters(), lr=1e-5)
        runs.append({"name": name, "epochs": train_loop(torch, name, make_iter, to_inputs, model, opt,
                                                        a.mednist_epochs, device, a.max_steps)})
        return model, opt

    loader = torch.utils.data.DataLoader(folder, batch_size=300, shuffle=True, num_workers=a.workers,
                                         pin_memory=True, persistent_workers=True, prefetch_factor=4)
    python_run(f"DataLoader, {a.workers} workers, per-sample transforms, pin_memory, non_blocking", lambda: loader,
               lambda b: (b[0].to(device, non_blocking=True), b[1].to(device, non_blocking=True)))
    runs.append(shardtrain(torch, a.shardtrain, shards, os.path.join(a.work, "st-densenet"),
                           ["--model", "densenet121", "--batch", "300", "--lr", "1e-5", "--epochs",
                            str(a.mednist_epochs), "--rotate", "15", "--flip-x", "--scale", "0.1", "--seed", "0"],
                           "shardtrain --model densenet121", a.max_steps and a.max_steps * a.mednist_epochs))
    kind = "cuda" if device.type == "cuda" else "cpu"
    inline = shardify.Loader(shards, batch_size=300, seed=0, device=kind, transform=T.preset("mednist"),
                             transform_ahead=0)
    python_run('shardify.Loader(device="cuda", transform=T.preset("mednist"), transform_ahead=0)', lambda: inline,
               lambda b: (b["image"], b["label"]))
    inline.close()
    sl = shardify.Loader(shards, batch_size=300, seed=0, device=kind, transform=T.preset("mednist"))
    model, opt = python_run('shardify.Loader(device="cuda", transform=T.preset("mednist"))', lambda: sl,
                            lambda b: (b["image"], b["label"]))
    overlap = None
    if device.type == "cuda":
        overlap = profile_loader(torch, device, model, opt, sl, min(20, len(sl) - 1),
                                 os.path.join(a.work, "densenet-trace.json"))
        # What the Loader's next() spends on the transform: host time of launching it on
        # one device batch (queued, not waited for), against the step's data-wait.
        plain = shardify.Loader(shards, batch_size=300, seed=0, device=kind)
        batch = next(iter(plain))
        pipeline = T.preset("mednist")
        pipeline(dict(batch), seed=0, epoch=0, step=0)  # warm-up
        start = time.perf_counter()
        for k in range(20):
            pipeline(dict(batch), seed=0, epoch=0, step=k + 1)
        overlap["transform_host_ms"] = (time.perf_counter() - start) / 20 * 1000
        torch.cuda.synchronize()
        plain.close()
        log(f"  the mednist preset's host time per batch of 300: {overlap['transform_host_ms']:.2f} ms")
    return runs, overlap


class TimedTransform:
    """A Loader transform that adds up the host time of the one it wraps (bound to the patch
    as the Loader binds it)."""

    wants_position = True

    def __init__(self, inner, bound=False):
        self.inner, self.bound, self.seconds, self.calls = inner, bound, 0.0, 0
        self.margin = getattr(inner, "margin", None) if bound else None

    def bind(self, patch):
        return TimedTransform(self.inner.bind(patch=patch) if hasattr(self.inner, "bind") else self.inner, True)

    def __call__(self, batch, seed, epoch, step):
        t = time.perf_counter()
        out = self.inner(batch, seed=seed, epoch=epoch, step=step)
        self.seconds += time.perf_counter() - t
        self.calls += 1
        return out


def scale_intensity(x):
    lo, hi = x.min(), x.max()
    return (x - lo) / (hi - lo) if hi > lo else x - lo


def part_unet3d(torch, a, device, shardify):
    import shardify.transforms as T
    from unet3d_patches import unet3d
    log("== 3. UNet-3D on real MRI patches with nnU-Net's augmentation")
    p = a.patch
    steps = a.unet_steps
    runs = [shardtrain(torch, a.shardtrain, a.brain, os.path.join(a.work, "st-unet3d"),
                       ["--model", "unet3d", "--patch", f"{p}x{p}x{p}", "--batch", "2", "--base-channels", "16",
                        "--classes", "8", "--repeats", str(2 * steps), "--epochs", "2", "--optimizer", "sgd",
                        "--lr", "1e-2", "--seed", "0"], "shardtrain --model unet3d",
                       a.max_steps and a.max_steps * 2)]
    kind = "cuda" if device.type == "cuda" else "cpu"

    def inputs(b):
        x = b["image"].float()
        x = (x - x.mean()) / x.std().clamp_min(1e-6)
        y = b["mask"][:, 0].long()
        return x, torch.where(y >= 8, torch.full_like(y, -1), y)
    for ahead in (0, 2):
        timed = TimedTransform(T.preset("nnunet", spatial_dims=3))
        loader = shardify.Loader(a.brain, split="train", patch=(p, p, p), batch_size=2, repeats=2 * steps, seed=0,
                                 device=kind, transform=timed, transform_ahead=ahead)
        torch.manual_seed(0)
        model = unet3d(1, 8, 16).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.99, nesterov=True)
        name = f'shardify.Loader(patch=, device="cuda", transform=T.preset("nnunet"), transform_ahead={ahead})'
        runs.append({"name": name,
                     "epochs": train_loop(torch, f"Loader unet3d ahead {ahead}", lambda: loader, inputs, model, opt,
                                          2, device, a.max_steps, loss_fn=torch.nn.CrossEntropyLoss(ignore_index=-1))})
        bound = loader.transform
        runs[-1]["transform_host_ms"] = 1000 * bound.seconds / max(bound.calls, 1)
        log(f"  the nnunet preset's host time per batch (transform_ahead={ahead}): {runs[-1]['transform_host_ms']:.2f} ms")
        loader.close()
    return runs


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build", help="build directory (bin/shardtrain, python/)")
    p.add_argument("--fmnist", required=True, help="Fashion-MNIST training images as shards (shardify, idx layout)")
    p.add_argument("--fmnist-idx", required=True, help="folder of train-images/labels idx .gz files")
    p.add_argument("--brain", help="brain MRI image/mask shards converted with --patch-size")
    p.add_argument("--work", default="gpu-compare-work")
    p.add_argument("--out", default="gpu-compare.json")
    p.add_argument("--parts", default="mnist,mednist,unet3d")
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--mnist-epochs", type=int, default=5)
    p.add_argument("--mednist-images", type=int, default=15000)
    p.add_argument("--mednist-epochs", type=int, default=2)
    p.add_argument("--patch", type=int, default=64)
    p.add_argument("--unet-steps", type=int, default=40, help="batches of 2 patches per epoch")
    p.add_argument("--device", default=None)
    p.add_argument("--max-steps", type=int, default=None, help="batches per epoch at most (a quick check)")
    a = p.parse_args()
    a.shardtrain = os.path.join(a.build, "bin", "shardtrain")
    sys.path.insert(0, os.path.join(a.build, "python"))
    import torch
    import torchvision

    import shardify
    device = torch.device(a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.backends.cudnn.benchmark = True
    os.makedirs(a.work, exist_ok=True)
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or "cpu",
              "cpu_cores": os.cpu_count(),
              "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__,
                           "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                           "python": platform.python_version(), "shardify": shardify.__version__},
              "settings": {k: v for k, v in vars(a).items() if k not in ("shardtrain",)}}
    parts = a.parts.split(",")

    def save():
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)

    for part in parts:
        try:
            if part == "mnist":
                runs = part_mnist(torch, a, device, shardify)
            elif part == "mednist":
                runs, result["densenet_copy_overlap"] = part_mednist(torch, a, device, shardify)
            elif part == "overlap":
                result["overlap"] = part_overlap(torch, a, device, shardify)
                save()
                continue
            elif part == "unet3d":
                runs = part_unet3d(torch, a, device, shardify)
            else:
                raise SystemExit(f"unknown part {part!r}")
            for r in runs:
                r["summary"] = summary(r)
            result[part] = runs
        except Exception as e:  # one part's failure is recorded; the others still run
            import traceback
            traceback.print_exc()
            result[part] = {"error": f"{type(e).__name__}: {e}"}
        save()
    log(json.dumps({k: [(r["name"], r["summary"]) for r in v] if isinstance(v, list) else v
                    for k, v in result.items() if k in parts}, indent=1))


if __name__ == "__main__":
    main()
