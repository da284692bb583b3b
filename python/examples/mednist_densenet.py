"""A MedNIST-style run: DenseNet-121 (torchvision), 1 channel, 64x64, batch 300, Adam 1e-5,
on a class-folder dataset, fed by shardify.Loader with the tutorial's augmentation on the
Loader's device (T.preset("mednist")), or, with --reader dataloader, by torchvision's
ImageFolder + DataLoader with the same augmentation per sample in the workers. Prints loss, accuracy and AUC per
epoch, with samples/s and the data-wait share.

SRC is a folder of <class>/<image> files (MONAI's MedNIST has this layout). Without SRC,
Fashion-MNIST resized to 64x64 JPEGs stands in for it.

    PYTHONPATH=build/python /usr/bin/python3 python/examples/mednist_densenet.py [SRC] [--epochs 4]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import shardify  # noqa: E402
import shardify.transforms as T  # noqa: E402


def densenet121(classes):
    import torch.nn as nn
    import torchvision
    model = torchvision.models.densenet121(num_classes=classes)
    model.features.conv0 = nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
    return model


def auc_one_vs_rest(scores, labels, classes):
    """Mean one-vs-rest ROC AUC (rank statistic; ties share their mean rank)."""
    import torch
    aucs = []
    for c in range(classes):
        positive = labels == c
        p, n = int(positive.sum()), int((~positive).sum())
        if p == 0 or n == 0:
            continue
        s = scores[:, c]
        order = torch.argsort(s)
        ranks = torch.empty_like(s, dtype=torch.float64)
        ranks[order] = torch.arange(1, len(s) + 1, dtype=torch.float64)
        for value in torch.unique(s[order][1:][s[order][1:] == s[order][:-1]]):  # average tied ranks
            tied = s == value
            ranks[tied] = ranks[tied].mean()
        aucs.append(float((ranks[positive].sum() - p * (p + 1) / 2) / (p * n)))
    return sum(aucs) / max(len(aucs), 1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", nargs="?", default=None, help="class-folder dataset (default: Fashion-MNIST at 64x64)")
    p.add_argument("--work", default="mednist-work", help="where shards (and the stand-in images) go")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch", type=int, default=300)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--limit", type=int, default=6000, help="stand-in: images written (default 6000)")
    p.add_argument("--max-steps", type=int, default=None, help="stop each epoch after this many steps")
    p.add_argument("--reader", choices=["shardify", "dataloader"], default="shardify")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--device", default=None)
    args = p.parse_args()

    import torch
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    src = args.src or common.write_class_folders(os.path.join(args.work, "jpeg"), "train", size=64,
                                                  limit=args.limit, suffix=".jpeg")
    shards = os.path.join(args.work, "shards")
    if not os.path.exists(os.path.join(shards, "manifest.sfm")):
        print(shardify.convert(src, shards, split={"train": 0.8, "val": 0.1, "test": 0.1}, progress=False))
    ds = shardify.Dataset(shards)
    classes = len(ds.classes)

    if args.reader == "shardify":
        kind = "cuda" if device.type == "cuda" else "cpu"
        # The tutorial's augmentation on the Loader's device, every sample its own draw;
        # validation only scales the intensities, as the tutorial's val_transforms do.
        train = shardify.Loader(ds, split="train", batch_size=args.batch, seed=0, device=kind,
                                transform=T.preset("mednist"))
        val = shardify.Loader(ds, split="val", batch_size=args.batch, shuffle=False, device=kind,
                              transform=T.ScaleIntensity())

        def inputs(batch):
            return batch["image"].to(device, non_blocking=True), batch["label"].to(device, non_blocking=True)
    else:
        import torchvision
        tv = torchvision.transforms  # the tutorial's augmentation, per sample in the workers
        augment = tv.Compose([tv.ToTensor(), tv.RandomApply([tv.RandomRotation(15)], p=0.5),
                              tv.RandomHorizontalFlip(0.5),
                              tv.RandomApply([tv.RandomAffine(0, scale=(0.9, 1.1))], p=0.5)])
        folder = torchvision.datasets.ImageFolder(src, transform=augment, loader=common.gray_loader)
        # The same training images as the shards' train split (`path` is relative to SRC).
        train_paths = {ds.get(i, fields=["path"])["path"] for i in ds.split_range("train")}
        keep = [k for k, (path, _) in enumerate(folder.samples) if os.path.relpath(path, src) in train_paths]
        train = torch.utils.data.DataLoader(torch.utils.data.Subset(folder, keep), batch_size=args.batch,
                                            shuffle=True, num_workers=args.workers,
                                            pin_memory=device.type == "cuda")
        val = shardify.Loader(ds, split="val", batch_size=args.batch, shuffle=False, transform=T.ScaleIntensity())

        def inputs(batch):
            if isinstance(batch, dict):
                return batch["image"].to(device), batch["label"].to(device)
            return batch[0].to(device, non_blocking=True), batch[1].to(device, non_blocking=True)

    torch.manual_seed(0)
    model = densenet121(classes).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        def progress(step, loss, epoch=epoch):
            if step % 10 == 0:
                print(f"  epoch {epoch} step {step}: loss {loss.item():.4f}", flush=True)

        r = common.train_epoch(model, optimizer, train, inputs, device, max_steps=args.max_steps or None,
                               on_step=progress)
        seconds, samples, wait = r["seconds"], r["samples"], r["wait"]
        model.eval()
        scores, labels = [], []
        with torch.no_grad():
            for batch in val:
                x, y = inputs(batch)
                scores.append(torch.softmax(model(x), 1).cpu())
                labels.append(y.cpu())
        scores, labels = torch.cat(scores), torch.cat(labels)
        acc = float((scores.argmax(1) == labels).float().mean())
        print(f"epoch {epoch}: loss {r['loss']:.4f}, val accuracy {acc:.4f}, "
              f"val AUC {auc_one_vs_rest(scores, labels, classes):.4f}, {samples / seconds:,.0f} samples/s, "
              f"data-wait {100 * wait / seconds:.2f}%", flush=True)


if __name__ == "__main__":
    main()
