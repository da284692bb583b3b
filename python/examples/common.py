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


def run_epochs(model, optimizer, batches, epochs, device, to_inputs):
    """Trains for `epochs`; `batches()` gives an epoch's iterable and `to_inputs(batch)` the
    (x, y) tensors on `device`. Returns per-epoch (seconds, samples, data-wait seconds)."""
    import torch
    loss_fn = torch.nn.CrossEntropyLoss()
    results = []
    for _ in range(epochs):
        model.train()
        samples, wait = 0, 0.0
        start = time.perf_counter()
        it = iter(batches())
        while True:
            t = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            x, y = to_inputs(batch)
            wait += time.perf_counter() - t
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            samples += y.shape[0]
        if device.type == "cuda":
            torch.cuda.synchronize()
        results.append((time.perf_counter() - start, samples, wait))
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
