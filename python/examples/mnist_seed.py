"""The MNIST seed experiment, fed four ways in one run.

MLP 784-128-64-10, batch 64, Adam 1e-3, 5 epochs on Fashion-MNIST (Debian's
dataset-fashion-mnist, written first as the class-folder PNGs users have), fed by
torchvision's ImageFolder + DataLoader with num_workers 0, 2, and 2 with pin_memory, and by
shardify.Loader over the same images converted once. Prints one table: epoch time,
samples/s, data-wait share and test accuracy.

    PYTHONPATH=build/python /usr/bin/python3 python/examples/mnist_seed.py [--epochs 5] [--work DIR]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import shardify  # noqa: E402


def mlp():
    import torch.nn as nn
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="fmnist-work", help="where the PNGs and shards go (reused)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--workers", type=int, default=2, help="num_workers of the DataLoader runs")
    p.add_argument("--limit", type=int, default=None, help="train on the first N images only")
    p.add_argument("--device", default="cuda" if _cuda() else "cpu")
    p.add_argument("--only", choices=["dataloader", "shardify"], default=None)
    args = p.parse_args()

    import torch
    import torchvision

    torch.manual_seed(0)
    device = torch.device(args.device)
    train_png = common.write_class_folders(os.path.join(args.work, "png-train"), "train", limit=args.limit)
    test_png = common.write_class_folders(os.path.join(args.work, "png-test"), "t10k")
    shards = os.path.join(args.work, "shards-train")
    if not os.path.exists(os.path.join(shards, "manifest.sfm")):
        print(shardify.convert(train_png, shards, progress=False))
    test_shards = os.path.join(args.work, "shards-test")
    if not os.path.exists(os.path.join(test_shards, "manifest.sfm")):
        shardify.convert(test_png, test_shards, progress=False)
    test = shardify.Loader(test_shards, batch_size=1000, shuffle=False)

    def from_shards(batch):
        x = batch["image"].to(device, non_blocking=True).float().div_(255)
        return x, batch["label"].to(device, non_blocking=True)

    def from_dataloader(batch):
        return batch[0].to(device, non_blocking=True), batch[1].to(device, non_blocking=True)

    transform = torchvision.transforms.ToTensor()
    folder = torchvision.datasets.ImageFolder(train_png, transform=transform, loader=common.gray_loader)
    runs = []
    if args.only in (None, "dataloader"):
        for name, workers, pin in [("DataLoader, num_workers=0", 0, False),
                                   (f"DataLoader, num_workers={args.workers}", args.workers, False),
                                   (f"DataLoader, num_workers={args.workers}, pin_memory", args.workers, True)]:
            loader = torch.utils.data.DataLoader(folder, batch_size=args.batch, shuffle=True, num_workers=workers,
                                                 pin_memory=pin and device.type == "cuda",
                                                 persistent_workers=workers > 0)
            runs.append((name, lambda loader=loader: loader, from_dataloader))
    if args.only in (None, "shardify"):
        loader = shardify.Loader(shards, batch_size=args.batch, seed=0,
                                 device="cuda" if device.type == "cuda" else "cpu")
        runs.append(("shardify.Loader", lambda: loader, from_shards))

    rows = []
    for name, batches, to_inputs in runs:
        torch.manual_seed(0)
        model = mlp().to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        epochs = common.run_epochs(model, optimizer, batches, args.epochs, device, to_inputs)
        acc = common.accuracy(model, lambda: test, from_shards)
        seconds = sum(e[0] for e in epochs)
        samples = sum(e[1] for e in epochs)
        wait = sum(e[2] for e in epochs)
        rows.append((name, seconds / len(epochs), samples / seconds, wait / seconds, acc))
        print(f"{name}: {seconds / len(epochs):.2f} s/epoch, test accuracy {acc:.3f}", flush=True)

    print(f"\nMLP 784-128-64-10, batch {args.batch}, Adam 1e-3, {args.epochs} epochs, device {device}")
    print("| reader | epoch time | samples/s | data-wait share | test accuracy |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, epoch, rate, wait, acc in rows:
        print(f"| {name} | {epoch:.2f} s | {rate:,.0f} | {100 * wait:.1f}% | {acc:.3f} |")


def _cuda():
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


if __name__ == "__main__":
    main()
