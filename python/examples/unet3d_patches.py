"""A small UNet-3D trained in plain PyTorch from random patches of a volume dataset, with
nnU-Net's augmentation on the Loader's device (T.preset("nnunet", spatial_dims=3)).

SRC is an image/mask pair layout (images/<case>.nii.gz, masks/<case>.nii.gz) or a dataset
converted with patch_size. Without SRC, ITK's example brain MRI and its k-means
segmentation (7 labels, Debian's insighttoolkit5-examples) stand in. Prints the loss and the
foreground Dice of the training patches, samples/s and the data-wait share per epoch.

    PYTHONPATH=build/python /usr/bin/python3 python/examples/unet3d_patches.py [SRC] [--epochs 3]
"""

import argparse
import os
import shutil
import time

import shardify
import shardify.transforms as T

ITK_DATA = "/usr/share/doc/insighttoolkit5-examples/examples/Data"


def brain_pair(root):
    for sub, name in (("images", "KmeansTest_T1UCharRaw.nii.gz"), ("masks", "KmeansTest_T1KmeansPrelimSegmentation.nii.gz")):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
        shutil.copyfile(os.path.join(ITK_DATA, name), os.path.join(root, sub, "case0.nii.gz"))
    return root


def unet3d(in_channels, classes, base):
    """Two levels down, two up: conv-InstanceNorm-LeakyReLU blocks, as nnU-Net's."""
    import torch.nn as nn

    def block(i, o):
        return nn.Sequential(nn.Conv3d(i, o, 3, padding=1), nn.InstanceNorm3d(o, affine=True), nn.LeakyReLU(0.01),
                             nn.Conv3d(o, o, 3, padding=1), nn.InstanceNorm3d(o, affine=True), nn.LeakyReLU(0.01))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.down = nn.ModuleList([block(in_channels, base), block(base, 2 * base), block(2 * base, 4 * base)])
            self.pool = nn.MaxPool3d(2)
            self.up = nn.ModuleList([nn.ConvTranspose3d(4 * base, 2 * base, 2, 2), nn.ConvTranspose3d(2 * base, base, 2, 2)])
            self.merge = nn.ModuleList([block(4 * base, 2 * base), block(2 * base, base)])
            self.head = nn.Conv3d(base, classes, 1)

        def forward(self, x):
            skips = []
            for i, level in enumerate(self.down):
                x = level(x)
                if i < len(self.down) - 1:
                    skips.append(x)
                    x = self.pool(x)
            for up, merge in zip(self.up, self.merge):
                import torch
                x = merge(torch.cat([up(x), skips.pop()], 1))
            return self.head(x)

    return UNet()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", nargs="?", default=None, help="image/mask pairs, or a converted dataset")
    p.add_argument("--work", default="unet3d-work")
    p.add_argument("--patch", type=int, default=48, help="patch edge in voxels (divisible by 4)")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=20, help="batches per epoch")
    p.add_argument("--base", type=int, default=8, help="channels of the first level")
    p.add_argument("--classes", type=int, default=8, help="labels 0..classes-1 (the brain's k-means: 7, and 0)")
    p.add_argument("--grid", default=None, help="also write a PNG of one augmented batch here")
    p.add_argument("--device", default=None)
    args = p.parse_args()

    import torch
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    patch = (args.patch,) * 3
    src = args.src or brain_pair(os.path.join(args.work, "brain"))
    if os.path.exists(os.path.join(src, "manifest.sfm")):
        shards = src
    else:
        shards = os.path.join(args.work, "shards")
        if not os.path.exists(os.path.join(shards, "manifest.sfm")):
            print(shardify.convert(src, shards, patch_size=patch, progress=False))
    ds = shardify.Dataset(shards)
    mask_field = next(f for f in ds.fields if f["name"] == "mask")
    classes = args.classes

    kind = "cuda" if device.type == "cuda" else "cpu"
    # A patch per sample, read with the margin nnU-Net's rotation and scaling need, then
    # augmented on the device and cropped to the patch; the mask moves with its image.
    loader = shardify.Loader(ds, split="train", patch=patch, batch_size=args.batch, repeats=args.steps * args.batch,
                             seed=0, device=kind, transform=T.preset("nnunet", spatial_dims=3))
    image_field = next(f for f in ds.fields if f["name"] == "image")
    print(f"{shards}: image {image_field['dtype']} {image_field.get('shape')}, mask {mask_field['dtype']}, "
          f"{classes} classes, patch {patch} read with margin {loader.transform.margin}")

    torch.manual_seed(0)
    model = unet3d(1, classes, args.base).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.99, nesterov=True)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-1)
    for epoch in range(args.epochs):
        model.train()
        start, wait, samples, total, dice = time.perf_counter(), 0.0, 0, 0.0, []
        it = iter(loader)
        for _ in range(args.steps):
            t = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            x = batch["image"]
            x = (x - x.mean()) / x.std().clamp_min(1e-6)
            y = batch["mask"][:, 0].long()
            y = torch.where(y >= classes, torch.full_like(y, -1), y)  # labels past the model's: ignored
            wait += time.perf_counter() - t
            optimizer.zero_grad(set_to_none=True)
            logits = model(x)
            loss = loss_fn(logits, y)
            loss.backward()
            optimizer.step()
            total += loss.item() * x.shape[0]
            samples += x.shape[0]
            pred, valid = logits.argmax(1), y >= 0
            fg_p, fg_y = (pred > 0) & valid, (y > 0) & valid
            dice.append(float(2 * (fg_p & fg_y).sum() / ((fg_p.sum() + fg_y.sum()).clamp_min(1))))
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        print(f"epoch {epoch}: loss {total / max(samples, 1):.4f}, train foreground Dice {sum(dice) / max(len(dice), 1):.3f}, "
              f"{samples / seconds:.1f} samples/s, data-wait {100 * wait / seconds:.1f}%", flush=True)
    if args.grid:
        T.save_grid(next(iter(loader)), args.grid)


if __name__ == "__main__":
    main()
