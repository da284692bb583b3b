"""Shared pieces of the examples: Debian's Fashion-MNIST as the image folders users have,
and a training loop that times epochs and the wait for data."""

import gzip
import os
import struct
import time

import numpy as np

FMNIST = "/usr/share/datasets/fashion-mnist"
CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]


def read_idx(path):
    """An idx-ubyte(.gz) file (MNIST's format) as a numpy array."""
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    dims = struct.unpack(">" + "I" * data[3], data[4:4 + 4 * data[3]])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * data[3]).reshape(dims)


def write_class_folders(root, split="train", size=None, limit=None, suffix=".png"):
    """Writes Fashion-MNIST `split` ("train" or "t10k") as root/<class>/<n><suffix>, resized
    to size x size when given, the first `limit` images when given. Skips work already done."""
    done = os.path.join(root, ".complete")
    if os.path.exists(done):
        return root
    from PIL import Image
    images = read_idx(os.path.join(FMNIST, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(FMNIST, f"{split}-labels-idx1-ubyte.gz"))
    n = len(images) if limit is None else min(limit, len(images))
    for name in CLASSES:
        os.makedirs(os.path.join(root, name), exist_ok=True)
    for i in range(n):
        image = Image.fromarray(images[i])
        if size is not None:
            image = image.resize((size, size), Image.BILINEAR)
        image.save(os.path.join(root, CLASSES[labels[i]], f"{i:05d}{suffix}"))
    open(done, "w").close()
    return root


def gray_loader(path):
    """ImageFolder's loader for gray images (its default converts to RGB)."""
    from PIL import Image
    with open(path, "rb") as f:
        return Image.open(f).convert("L")


def train_epoch(model, optimizer, batches, to_inputs, device, loss_fn=None, max_steps=None, forward=None, step=None,
                on_step=None):
    """One timed training epoch over the iterable `batches`, the loop every example and
    benchmark shares. `to_inputs(batch)` gives the (x, y) tensors on `device`; the time it
    and the fetch of the batch take is the data-wait. Optional: `loss_fn` (cross-entropy),
    at most `max_steps` steps, `forward()` a context around the forward pass (autocast),
    `step()` a context around each whole step (CUDA events), `on_step(step, loss)` after
    each. Returns {"seconds", "samples", "wait", "loss"} (the mean training loss)."""
    import contextlib

    import torch
    loss_fn = loss_fn or torch.nn.CrossEntropyLoss()
    forward = forward or contextlib.nullcontext
    step_context = step or contextlib.nullcontext
    model.train()
    loss_sum = torch.zeros((), device=device)
    samples, wait, n = 0, 0.0, 0
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    it = iter(batches)
    while max_steps is None or n < max_steps:
        t = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            break
        x, y = to_inputs(batch)
        wait += time.perf_counter() - t
        with step_context():
            optimizer.zero_grad(set_to_none=True)
            with forward():
                loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            loss_sum += loss.detach().float() * y.shape[0]
        samples += y.shape[0]
        if on_step is not None:
            on_step(n, loss)
        n += 1
    if device.type == "cuda":
        torch.cuda.synchronize()
    return {"seconds": time.perf_counter() - start, "samples": samples, "wait": wait,
            "loss": float(loss_sum) / max(samples, 1)}


def run_epochs(model, optimizer, batches, epochs, device, to_inputs):
    """Trains for `epochs`; `batches()` gives an epoch's iterable and `to_inputs(batch)` the
    (x, y) tensors on `device`. Returns per-epoch (seconds, samples, data-wait seconds)."""
    results = []
    for _ in range(epochs):
        r = train_epoch(model, optimizer, batches(), to_inputs, device)
        results.append((r["seconds"], r["samples"], r["wait"]))
    return results


def accuracy(model, batches, to_inputs):
    import torch
    model.eval()
    right = total = 0
    with torch.no_grad():
        for batch in batches():
            x, y = to_inputs(batch)
            right += (model(x).argmax(1) == y).sum().item()
            total += y.shape[0]
    return right / max(total, 1)
