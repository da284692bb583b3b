"""The general transforms of shardify.transforms: flips, one affine resampling per sample,
noise and intensity scaling. Each draws per sample from its own SplitMix64 stream."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

from . import _nnunet_apply as A
from ._draw import Rng
from ._transform_base import Transform, _torch

if TYPE_CHECKING:
    import torch

_MODES = ("bilinear", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")


def _probability(p):
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    return p


def _per_axis(name, value, rank):
    values = list(value) if isinstance(value, (tuple, list)) else [value] * rank
    if len(values) != rank or any(float(v) < 0 for v in values):
        raise ValueError(f"{name} must be one non-negative number or {rank} of them, got {value!r}")
    return [float(v) for v in values]


class _Spatial(Transform):
    """A transform that moves each picked sample by an affine map: output offset o (voxels
    from the centre, array axis order) samples the input at A o + t. Maps of consecutive
    spatial transforms in a Compose are composed and resampled once."""

    mode, padding, label_pad = "bilinear", "zeros", 0

    def _maps(self, rng, rank, size, batch):
        """Per sample (A, t), or None where the sample stays as it is."""
        raise NotImplementedError

    def _apply(self, batch, seed, epoch, step, stream):
        for key, x in self._images(batch):
            maps = self._maps(Rng(seed, epoch, step, stream + 1), x.dim() - 2, list(x.shape[2:]), x.shape[0])
            _resample(batch, key, x, list(self._masks(batch, x)), maps, self.mode, self.padding, self.label_pad)
            return


class RandFlip(_Spatial):
    """Mirrors each spatial axis in `axes` (0: the first spatial axis) of a sample with
    probability p, independently per axis and sample."""

    def __init__(self, axes: int | Sequence[int] = (0,), p: float = 0.5, **kw: Any) -> None:
        super().__init__(**kw)
        self.axes = tuple(int(a) for a in ((axes,) if isinstance(axes, int) else axes))
        if any(a < 0 for a in self.axes):
            raise ValueError(f"axes are spatial axes counted from 0, got {axes!r}")
        self.p = _probability(p)

    def _flips(self, rng, rank, batch):
        if any(a >= rank for a in self.axes):
            raise ValueError(f"RandFlip(axes={self.axes}) on a batch with {rank} spatial axes")
        return [[rng.bernoulli(self.p) for _ in self.axes] for _ in range(batch)]

    def _maps(self, rng, rank, size, batch):
        maps = []
        for flips in self._flips(rng, rank, batch):
            sign = [1.0] * rank
            for a, f in zip(self.axes, flips):
                sign[a] = -1.0 if f else 1.0
            maps.append(([[sign[i] if i == j else 0.0 for j in range(rank)] for i in range(rank)], [0.0] * rank)
                        if any(flips) else None)
        return maps

    def _apply(self, batch, seed, epoch, step, stream):  # alone: exact flips, no resampling
        rng = Rng(seed, epoch, step, stream + 1)
        for key, x in self._images(batch):
            flips = self._flips(rng, x.dim() - 2, x.shape[0])
            masks = list(self._masks(batch, x))
            for k, a in enumerate(self.axes):
                pick = [f[k] for f in flips]
                x = A._on_picked(x, pick, lambda v, idx: v.flip(a + 2))
                masks = [(mk, A._on_picked(m, pick, lambda v, idx: v.flip(a + 2)), ch) for mk, m, ch in masks]
            _store(batch, key, x, masks)
            return


class RandAffine(_Spatial):
    """Rotates, zooms and shifts each picked sample (probability p) with one affine
    resampling: image by `mode` ("bilinear", or "bicubic" in 2D), masks by nearest.

    rotate: degrees, drawn uniformly in [-r, r] (2D: in-plane; 3D: about each axis, or one
    value per axis). scale: (lo, hi) zoom drawn uniformly (> 1 enlarges), or None.
    translate: fraction of the size per axis, drawn in [-t, t]. padding: "zeros" (masks:
    label_pad), "border" or "reflection".
    """

    def __init__(self, rotate: float | Sequence[float] = 0.0, scale: Sequence[float] | None = None,
                 translate: float | Sequence[float] = 0.0, p: float = 1.0, mode: str = "bilinear",
                 padding: str = "zeros", label_pad: int = 0, **kw: Any) -> None:
        super().__init__(**kw)
        self.rotate = rotate
        self.scale = None if scale is None else (float(scale[0]), float(scale[1]))
        if self.scale is not None and not 0 < self.scale[0] <= self.scale[1]:
            raise ValueError(f"scale must be (lo, hi) with 0 < lo <= hi, got {scale!r}")
        self.translate = translate
        self.p = _probability(p)
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
        if padding not in _PADDINGS:
            raise ValueError(f"padding must be one of {_PADDINGS}, got {padding!r}")
        self.mode, self.padding, self.label_pad = mode, padding, int(label_pad)
        _per_axis("rotate", rotate, 3 if isinstance(rotate, (tuple, list)) else 1)

    def _maps(self, rng, rank, size, batch):
        angles = _per_axis("rotate", self.rotate, 1 if rank == 2 else 3)
        shifts = _per_axis("translate", self.translate, rank)
        maps = []
        for _ in range(batch):
            if not rng.bernoulli(self.p):
                maps.append(None)
                continue
            a = [rng.uniform(-r, r) * math.pi / 180 if r > 0 else 0.0 for r in angles] + [0.0] * (3 - len(angles))
            zoom = 1.0
            if self.scale is not None:
                zoom = rng.uniform(*self.scale) if self.scale[0] != self.scale[1] else self.scale[0]
            t = [rng.uniform(-s, s) * size[i] if s > 0 else 0.0 for i, s in enumerate(shifts)]
            m = A._spatial_matrix(a, 1.0, rank, False)
            maps.append(([[v / zoom for v in row] for row in m], t))
        return maps


def compose_maps(first, then):
    """The map of `first` followed by `then` (None: identity): output o samples `then`'s
    input at A2 o + t2, which samples the input at A1 (A2 o + t2) + t1."""
    if first is None or then is None:
        return then if first is None else first
    (a1, t1), (a2, t2) = first, then
    n = len(t1)
    a = [[sum(a1[i][k] * a2[k][j] for k in range(n)) for j in range(n)] for i in range(n)]
    t = [sum(a1[i][k] * t2[k] for k in range(n)) + t1[i] for i in range(n)]
    return a, t


def _settings(t):
    """How a spatial transform resamples (None for a flip, which joins any)."""
    return None if isinstance(t, RandFlip) else (t.mode, t.padding, t.label_pad)


def spatial_runs(transforms):
    """Index ranges [i, j) of `transforms` that resample once: runs of consecutive spatial
    transforms on the same keys whose mode and padding agree (flips join any run); every
    other transform is a run of its own."""
    runs, i = [], 0
    while i < len(transforms):
        j, first = i + 1, transforms[i]
        if isinstance(first, _Spatial):
            settings = _settings(first)
            while j < len(transforms):
                t = transforms[j]
                if not isinstance(t, _Spatial) or (t.keys, t.mask_keys) != (first.keys, first.mask_keys):
                    break
                if _settings(t) is not None and settings not in (None, _settings(t)):
                    break
                settings = settings or _settings(t)
                j += 1
        runs.append((i, j))
        i = j
    return runs


def apply_spatial_run(members, batch, seeds, epoch, step, streams):
    """Applies spatial transforms one after the other as one resampling: each draws from its
    own stream exactly as alone, their maps are composed per sample."""
    first = members[0]
    settings = next((_settings(t) for t in members if _settings(t) is not None),
                    (first.mode, first.padding, first.label_pad))
    for key, x in first._images(batch):
        rank, size, n = x.dim() - 2, list(x.shape[2:]), x.shape[0]
        maps = [None] * n
        for t, seed, stream in zip(members, seeds, streams):
            drawn = t._maps(Rng(seed, epoch, step, stream + 1), rank, size, n)
            maps = [compose_maps(a, b) for a, b in zip(maps, drawn)]
        _resample(batch, key, x, list(first._masks(batch, x)), maps, *settings)
        return


def _affine_grid(theta, size):
    """torch's affine_grid (align_corners=False) by broadcasting: a few multiply-adds per
    point instead of a batched matrix product over tiny matrices, several times faster."""
    torch = _torch()
    n, rank = theta.shape[0], len(size)
    bases = []  # normalized centre of each voxel along grid axis h (x: the last array axis)
    for h in range(rank):
        axis = rank - 1 - h
        shape = [1] * (rank + 1)
        shape[axis + 1] = size[axis]
        bases.append(((torch.arange(size[axis], dtype=theta.dtype, device=theta.device) * 2 + 1) / size[axis] - 1)
                     .view(shape))
    view = [n] + [1] * rank
    axes = []
    for g in range(rank):
        c = theta[:, g, rank].view(view)
        for h in range(rank):
            c = c + theta[:, g, h].view(view) * bases[h]
        axes.append(c.expand([n] + list(size)))
    return torch.stack(axes, -1)


def _resample(batch, key, x, masks, maps, mode, padding, label_pad):
    """One grid_sample of the samples that have a map; the others stay as they are."""
    torch = _torch()
    rank, size = x.dim() - 2, list(x.shape[2:])
    if mode == "bicubic" and rank != 2:
        raise ValueError("RandAffine(mode='bicubic') resamples 2D images only (torch's grid_sample)")
    idx = [s for s, m in enumerate(maps) if m is not None]
    if idx:
        grid = _affine_grid(A.theta([maps[s] for s in idx], size, size, x.device), size)

        def sample(v, how):
            return torch.nn.functional.grid_sample(v, grid.to(v.dtype), mode=how, padding_mode=padding,
                                                   align_corners=False)

        x = A._merge(x, idx, sample(A._rows(x, idx), mode))
        masks = [(mk, A._merge(m, idx, A.sample_labels(sample, A._rows(m, idx), label_pad)), ch) for mk, m, ch in masks]
    _store(batch, key, x, masks)


class RandRotate(RandAffine):
    """Rotation by up to `degrees` with probability p; borders repeat (as MONAI's RandRotate)."""

    def __init__(self, degrees: float | Sequence[float], p: float = 0.5, mode: str = "bilinear",
                 padding: str = "border", **kw: Any) -> None:
        super().__init__(rotate=degrees, p=p, mode=mode, padding=padding, **kw)


class RandZoom(RandAffine):
    """Zoom by a factor in [min_zoom, max_zoom] with probability p (> 1 enlarges); borders
    repeat (as MONAI's RandZoom with keep_size)."""

    def __init__(self, min_zoom: float = 0.9, max_zoom: float = 1.1, p: float = 0.5, mode: str = "bilinear",
                 padding: str = "border", **kw: Any) -> None:
        super().__init__(scale=(min_zoom, max_zoom), p=p, mode=mode, padding=padding, **kw)


class RandGaussianNoise(Transform):
    """Adds Gaussian noise of a std drawn in [0, std] to each picked sample (probability p),
    one field for all its channels; the noise is a counter-based hash, the same on any device."""

    def __init__(self, std: float = 0.1, p: float = 0.1, **kw: Any) -> None:
        super().__init__(**kw)
        self.std, self.p = float(std), _probability(p)

    def _apply(self, batch, seed, epoch, step, stream):
        rng = Rng(seed, epoch, step, stream + 1)
        for key, x in self._images(batch):
            sigma = [rng.uniform(0.0, self.std) if rng.bernoulli(self.p) else 0.0 for _ in range(x.shape[0])]
            noise_seed = rng.next()

            def noisy(v, idx):
                shape = [len(idx), 1] + list(v.shape[2:])
                s = A._floats([sigma[i] for i in idx], v.device).view([len(idx)] + [1] * (v.dim() - 1))
                return v + A.hash_normal(shape, noise_seed, v.dtype, v.device) * s

            batch[key] = A._on_picked(x, [s > 0 for s in sigma], noisy)


class ScaleIntensity(Transform):
    """Scales each sample linearly to [minv, maxv] (over all its channels, or each channel
    with channel_wise=True); a constant sample becomes minv."""

    def __init__(self, minv: float = 0.0, maxv: float = 1.0, channel_wise: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.minv, self.maxv, self.channel_wise = float(minv), float(maxv), bool(channel_wise)

    def _apply(self, batch, seed, epoch, step, stream):
        for key, x in self._images(batch):
            flat = x.flatten(2) if self.channel_wise else x.flatten(1).unsqueeze(1)
            lo, hi = flat.min(-1)[0], flat.max(-1)[0]
            view = list(lo.shape) + [1] * (x.dim() - lo.dim())
            lo, span = lo.view(view), (hi - lo).view(view)
            batch[key] = (x - lo) / span.clamp_min(1e-12) * (self.maxv - self.minv) + self.minv


class NormalizeIntensity(Transform):
    """(x - mean) / std per sample, by the rules of MONAI's NormalizeIntensity (its
    subtrahend and divisor are mean and std here). Where mean or std is None it is the
    sample's own: over all its channels, or each channel with channel_wise=True, and the
    population std (N, not N - 1). Given, it is one number, or one per channel (e.g. from
    ``Dataset.split_stats`` of the training split). A std of 0 divides by 1. nonzero=True
    computes and normalizes over the nonzero values alone: zeros stay, and a sample (or
    channel) without any nonzero value stays as it is. Computed in float32; the result in
    `dtype` (None: the image's own float dtype).

    monai/transforms/intensity/array.py: NormalizeIntensity.__init__, _mean, _std,
    _normalize, __call__ (Project-MONAI/MONAI@d388d1c6fec8cb3a0eebee5b5a0b9776ca59ca83)."""

    def __init__(self, mean: float | Sequence[float] | None = None, std: float | Sequence[float] | None = None,
                 nonzero: bool = False, channel_wise: bool = False, dtype: str | torch.dtype | None = "float32",
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.mean, self.std = mean, std
        self.nonzero, self.channel_wise, self.dtype = bool(nonzero), bool(channel_wise), dtype

    def _apply(self, batch, seed, epoch, step, stream):
        torch = _torch()
        for key, x in self._images(batch):
            flat = x.float().flatten(2)  # [B, C, N]
            n, channels = flat.shape[:2]
            groups = flat if self.channel_wise else flat.reshape(n, 1, -1)
            keep = groups != 0 if self.nonzero else None
            mean, std = (t.expand(n, channels, 1) for t in _moments(groups, keep))
            mean = mean if self.mean is None else self._given("mean", self.mean, key, channels, x.device)
            std = std if self.std is None else self._given("std", self.std, key, channels, x.device)
            z = (flat - mean) / torch.where(std == 0, torch.ones_like(std), std)
            if self.nonzero:
                z = torch.where(flat != 0, z, flat)
            dtype = getattr(torch, self.dtype) if isinstance(self.dtype, str) else self.dtype
            batch[key] = z.view(x.shape).to(dtype or x.dtype)

    @staticmethod
    def _given(name, value, key, channels, device):
        values = [float(v) for v in value] if isinstance(value, (tuple, list)) else [float(value)]
        if len(values) not in (1, channels):
            raise ValueError(f"NormalizeIntensity: batch[{key!r}] has {channels} channels, but {name} has "
                             f"{len(values)} values")
        return A.upload(values, _torch().float32, device).view(1, -1, 1)


def _moments(groups, keep):
    """Mean and population std of each row of `groups` [B, G, N] ([B, G, 1] each), over the
    values where `keep` (None: all). The mean takes a second pass, so that a row of equal
    values has a std of exactly 0 (one pass, as torch.std, can leave a rounding error to
    divide by)."""
    w = None if keep is None else keep.to(groups.dtype)
    count = None if w is None else w.sum(-1, keepdim=True).clamp_min(1)

    def mean_of(v):
        return v.mean(-1, keepdim=True) if w is None else (v * w).sum(-1, keepdim=True) / count

    mean = mean_of(groups)
    mean = mean + mean_of(groups - mean)
    return mean, mean_of((groups - mean) ** 2).sqrt()


def _store(batch, key, x, masks):
    batch[key] = x
    for mkey, m, channel in masks:
        batch[mkey] = m if channel else m.squeeze(1)
