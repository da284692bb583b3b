"""Named augmentation pipelines (T.preset) and a picture of augmented samples (T.save_grid)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping

from ._nnunet_transform import NnUnet
from ._palette import COLOURS
from ._transform_base import Compose, Transform, _torch
from ._transforms_basic import RandFlip, RandRotate, RandZoom, ScaleIntensity

if TYPE_CHECKING:
    import os

    import torch


def _nnunet(spatial_dims: int = 3, **kw: Any) -> NnUnet:
    return NnUnet(spatial_dims=spatial_dims, **kw)


def _mednist(spatial_dims: int = 2, seed: int = 0) -> Compose:
    """The tutorial's transforms as they act on the picture. MONAI's readers index x first
    (a picture [W, H], a volume [x, y, z]), so its spatial axis a is shardify's axis
    spatial_dims - 1 - a (monai/data/image_reader.py: PILReader.get_data swaps axes 0 and 1,
    ITKReader._get_array_data transposes; Project-MONAI/MONAI@d388d1c6fec8cb3a0eebee5b5a0b9776ca59ca83).
    RandFlip(spatial_axis=0) mirrors left-right: the last axis here. In 3D, range_x turns
    about x (monai/transforms/utils.py: _create_rotate), the last axis here: RandAffine's
    third angle. Swapping two axes turns a rotation by +a into one by -a, which the
    symmetric range draws alike; RandZoom draws one factor for every axis."""
    if spatial_dims not in (2, 3):
        raise ValueError(f"spatial_dims must be 2 or 3, got {spatial_dims!r}")
    rotate = 15.0 if spatial_dims == 2 else (0.0, 0.0, 15.0)
    return Compose([ScaleIntensity(seed=seed), RandRotate(rotate, p=0.5, seed=seed),
                    RandFlip(axes=(spatial_dims - 1,), p=0.5, seed=seed), RandZoom(0.9, 1.1, p=0.5, seed=seed)])


def _none(spatial_dims: int | None = None, seed: int = 0) -> Compose:
    return Compose([])


# name: (builder, what it is). The values and their sources are in docs/transforms.md.
PRESETS: dict[str, tuple[Callable[..., Transform], str]] = {
    "nnunet": (_nnunet, "nnU-Net v2's default training augmentation (nnUNetTrainer.get_training_transforms)"),
    "mednist": (_mednist, "MONAI's MedNIST tutorial: ScaleIntensity, RandRotate(15 deg, p 0.5), "
                          "RandFlip(left-right, p 0.5), RandZoom(0.9-1.1, p 0.5)"),
    "none": (_none, "no augmentation"),
}


def preset(name: str, spatial_dims: int | None = None, **kwargs: Any) -> Transform:
    """A named pipeline: "nnunet" (spatial_dims 3 by default; keywords as T.NnUnet),
    "mednist" (2D by default) or "none"."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    build = PRESETS[name][0]
    return build(**kwargs) if spatial_dims is None else build(spatial_dims=spatial_dims, **kwargs)




def _captions(batch, n, skip):
    """Per sample: "key value" for each key holding one number per sample (a label, a case
    id), or its index in the batch when there is none."""
    torch = _torch()
    keys = []
    for key, value in batch.items():
        if key in skip or not torch.is_tensor(value) or value.dim() == 0 or value.shape[0] < n:
            continue
        if value[:n].reshape(n, -1).shape[1] == 1:
            keys.append(key)
    out = []
    for i in range(n):
        parts = []
        for key in keys:
            v = batch[key][i].reshape(-1)[0].item()
            parts.append("%s %s" % (key, ("%.3g" % v) if isinstance(v, float) else v))
        out.append(", ".join(parts) if parts else "#%d" % i)
    return out


def save_grid(batch: Mapping[str, torch.Tensor], path: str | os.PathLike[str], image: str = "image",
              mask: str = "mask", columns: int = 8, max_samples: int = 32, alpha: float = 0.45,
              min_tile: int = 96) -> str | os.PathLike[str]:
    """Writes a PNG of the first `max_samples` samples of a batch (a dict of tensors, e.g.
    augmented by a transform or from a Loader with ``transform=``): the first channel of
    each image scaled to its own range, the mask's labels (> 0) overlaid in colour, volumes
    by their middle slice along the first spatial axis. Small images are enlarged (by a
    whole factor, pixels kept square and sharp) to at least `min_tile` pixels on their longer
    side; each tile is captioned with the sample's per-sample values ("label 3") or its
    index. Needs Pillow (python3-pil)."""
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError as e:
        raise ImportError("save_grid needs Pillow (Debian: python3-pil)") from e
    torch = _torch()
    x = batch[image].detach().float().cpu()
    n = min(x.shape[0], max_samples)
    if n == 0:
        raise ValueError("save_grid: the batch is empty")
    captions = _captions(batch, n, (image, mask))
    x = x[:n, 0]
    m = batch.get(mask)
    if m is not None:
        m = m.detach().cpu()[:n]
        m = m[:, 0] if m.dim() == batch[image].dim() else m
        m = m.long()
    if x.dim() == 4:  # volumes: the middle slice
        x = x[:, x.shape[1] // 2]
        m = m[:, m.shape[1] // 2] if m is not None else None
    flat = x.flatten(1)
    lo, hi = flat.min(1)[0].view(-1, 1, 1), flat.max(1)[0].view(-1, 1, 1)
    gray = ((x - lo) / (hi - lo).clamp_min(1e-12) * 255).round().to(torch.uint8)
    rgb = gray.unsqueeze(-1).repeat(1, 1, 1, 3).float()
    if m is not None:
        colours = torch.tensor(COLOURS, dtype=torch.float32)
        labelled = m > 0
        colour = colours[(m.clamp_min(1) - 1) % len(COLOURS)]
        rgb = torch.where(labelled.unsqueeze(-1), rgb * (1 - alpha) + colour * alpha, rgb)
    rgb = rgb.round().to(torch.uint8)
    zoom = max(1, -(-int(min_tile) // max(rgb.shape[1], rgb.shape[2])))
    if zoom > 1:
        rgb = rgb.repeat_interleave(zoom, 1).repeat_interleave(zoom, 2)
    columns = max(1, min(columns, n))
    rows = (n + columns - 1) // columns
    h, w = rgb.shape[1], rgb.shape[2]
    font = ImageFont.load_default()
    caption_h = 12
    canvas = torch.zeros(rows * (h + caption_h + 2), columns * (w + 2), 3, dtype=torch.uint8)
    for i in range(n):
        r, c = divmod(i, columns)
        top, left = r * (h + caption_h + 2) + 1, c * (w + 2) + 1
        canvas[top:top + h, left:left + w] = rgb[i]
    sheet = Image.fromarray(canvas.numpy(), "RGB")
    draw = ImageDraw.Draw(sheet)
    for i in range(n):
        r, c = divmod(i, columns)
        text = captions[i]
        while text and draw.textlength(text, font=font) > w:
            text = text[:-1]
        draw.text((c * (w + 2) + 1, r * (h + caption_h + 2) + 1 + h), text, fill=(235, 235, 235), font=font)
    sheet.save(path)
    return path
