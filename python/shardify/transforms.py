"""Batched augmentation on whatever device the batch is on: ``shardify.transforms``.

    import shardify, shardify.transforms as T
    aug = T.preset("nnunet", spatial_dims=3)      # nnU-Net v2's default training augmentation
    loader = shardify.Loader(ds, patch=(64, 64, 64), batch_size=2, transform=aug, device="cuda")
    own = T.Compose([T.RandFlip(axes=(0,), p=0.5), T.RandAffine(rotate=15, scale=(0.9, 1.1), p=0.5),
                     T.ScaleIntensity()])
    batch = own({"image": images, "mask": masks})  # also on a plain dict of tensors

A transform takes a dict of tensors ``[B, C, spatial...]`` and returns a new dict (the
input is not modified). Images (``keys``, default ``("image",)``) become float32 when they
are integers and are resampled linearly (``mode="bicubic"`` in 2D); masks (``mask_keys``,
default ``("mask",)``) keep their dtype and move by nearest neighbour, each channel on its
own (label maps ``[B, 1, ...]`` and multi-label masks ``[B, K, ...]`` alike; ``[B, spatial...]``
is taken as one channel). Other entries pass through. Keys that are absent are skipped.

Every sample draws its own parameters, on the host, from (seed, epoch, step): inside a
:class:`shardify.Loader` these are the Loader's seed and the batch's position (with the rank
folded into the step, as ``shardtrain`` does), so a resumed Loader yields the same augmented
batches as an uninterrupted one. Called outside a Loader, a transform counts its calls
(epoch 0, step = calls so far) unless given ``epoch=`` and ``step=``. A transform's own
``seed`` is added to the one it is called with.
"""

import copy

from . import _nnunet
from ._checks import non_negative as _non_negative
from ._draw import position
from ._loader import bind_transform

__all__ = ["Transform", "Compose", "NnUnet", "RandFlip", "RandAffine", "RandRotate", "RandZoom", "RandGaussianNoise",
           "ScaleIntensity", "NormalizeIntensity", "preset", "PRESETS", "save_grid"]

_MASK64 = (1 << 64) - 1
_STREAMS_PER_CHILD = 1000  # Compose: child i draws from streams stream + 1000 * i + ...


def _torch():
    import torch
    return torch


class Transform:
    """Base of the transforms: seeded, batched, dict in, dict out."""

    wants_position = True  # the Loader passes seed, epoch and step
    margin = None  # voxels a bound transform needs around a patch (see bind)

    def __init__(self, keys=("image",), mask_keys=("mask",), seed=0):
        self.keys = _names("keys", keys)
        self.mask_keys = _names("mask_keys", mask_keys)
        self.seed = _non_negative("seed", seed)
        self._calls = 0

    def __call__(self, batch, *, seed=0, epoch=None, step=None):
        if not isinstance(batch, dict):
            raise TypeError(f"{type(self).__name__} takes a dict of tensors, got {type(batch).__name__}")
        if (epoch is None) != (step is None):
            raise ValueError("give both epoch= and step=, or neither")
        if epoch is None:
            epoch, step = 0, self._calls
            self._calls += 1
        seed, epoch, step = position(seed, epoch, step)
        out = dict(batch)
        self._apply(out, (seed + self.seed) & _MASK64, epoch, step, 0)
        return out

    def bind(self, patch, dataset=None):
        """The transform for a Loader reading patches of size `patch` (None: whole
        samples) from `dataset` (a shardify.Dataset, or None). Transforms that need context
        around the patch return a copy whose ``margin`` says how much; the Loader then reads
        patch + 2 * margin per axis and the transform crops it off."""
        return self

    def _apply(self, batch, seed, epoch, step, stream):
        raise NotImplementedError

    def _images(self, batch):
        """(key, float tensor) of each image present."""
        torch = _torch()
        for key in self.keys:
            if key in batch:
                x = batch[key]
                if not torch.is_tensor(x):
                    raise TypeError(f"batch[{key!r}] is a {type(x).__name__}, not a tensor")
                if x.dim() < 3:
                    raise ValueError(f"batch[{key!r}] of shape {list(x.shape)} is not [B, C, spatial...]")
                yield key, (x if x.is_floating_point() else x.float())

    def _masks(self, batch, image):
        """(key, tensor [B, K, spatial...], had a channel axis) of each mask present."""
        for key in self.mask_keys:
            if key not in batch:
                continue
            m = batch[key]
            if m.dim() == image.dim() - 1:
                m, channel = m.unsqueeze(1), False
            else:
                channel = True
            if m.shape[0] != image.shape[0] or m.shape[2:] != image.shape[2:]:
                raise ValueError(f"batch[{key!r}] of shape {list(batch[key].shape)} does not match the image "
                                 f"{list(image.shape)}")
            yield key, m, channel

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"T.{type(self).__name__}({fields})"


class Compose(Transform):
    """Runs transforms in order; each draws from its own streams of the same position.
    Consecutive spatial transforms (RandFlip, RandAffine and its kin, on the same keys) are
    composed and resampled once, as MONAI's lazy resampling does: the same draws, one
    interpolation instead of several. fuse=False resamples after each."""

    def __init__(self, transforms, fuse=True):
        super().__init__()
        self.transforms = list(transforms)
        self.fuse = bool(fuse)
        for t in self.transforms:
            if not callable(t):
                raise TypeError(f"Compose takes callables, got {t!r}")
        margins = [t for t in self.transforms if getattr(t, "margin", None)]
        if len(margins) > 1:
            raise ValueError("Compose: only one transform may read a margin around the patch")
        self.margin = margins[0].margin if margins else None

    def bind(self, patch, dataset=None):
        bound = copy.copy(self)
        bound.transforms = [bind_transform(t, patch, dataset) for t in self.transforms]
        Compose.__init__(bound, bound.transforms, self.fuse)
        return bound

    def _apply(self, batch, seed, epoch, step, stream):
        from ._transforms_basic import apply_spatial_run, spatial_runs
        runs = spatial_runs(self.transforms) if self.fuse else [(i, i + 1) for i in range(len(self.transforms))]
        for i, j in runs:
            seeds = [(seed + t.seed) & _MASK64 for t in self.transforms[i:j]]
            streams = [stream + _STREAMS_PER_CHILD * k for k in range(i, j)]
            t = self.transforms[i]
            if j - i > 1:
                apply_spatial_run(self.transforms[i:j], batch, seeds, epoch, step, streams)
            elif isinstance(t, Transform):
                t._apply(batch, seeds[0], epoch, step, streams[0])
            else:
                out = t(batch)
                if not isinstance(out, dict):
                    raise TypeError(f"Compose: {t!r} returned a {type(out).__name__}, not a dict")
                batch.clear()
                batch.update(out)

    def __repr__(self):
        return "T.Compose([" + ", ".join(repr(t) for t in self.transforms) + "])"


class NnUnet(Transform):
    """nnU-Net v2's default training augmentation (the table in ``T.NNUNET_TABLE``, the
    same as ``shardtrain --aug nnunet``): rotation, scaling, Gaussian noise and blur,
    brightness, contrast, low resolution, gamma (inverted and not), mirroring, then the
    image masked and the mask's outside label removed.

    p: {name: probability} overrides ({"all": 0} turns everything off; names as
    ``shardtrain --aug-p``). image_pad / label_pad: values outside the input (label_pad is
    taken in the mask's dtype, as the Loader pads: -1 in uint8 is 255). mask_mode:
    "linear" (nnU-Net's: each label's one-hot map resampled linearly, the largest wins) or
    "nearest". Mask voxels outside the labelled data (label_pad, or any negative label)
    become background 0, or ``ignore_label`` (in the mask's dtype) when given.
    mask_image_channels: image channels set to 0 where the mask is outside the labelled data
    (nnU-Net's use_mask_for_norm); None: those the Loader's dataset records (provenance
    ``zscore_region``), none outside a Loader. Inside a Loader with ``patch=``, the Loader
    reads the margin that rotation and scaling need and this transform crops it off; on
    whole samples the output has the input's size.
    """

    def __init__(self, spatial_dims=3, p=None, image_pad=0.0, label_pad=-1, mask_mode="linear", ignore_label=None,
                 mask_image_channels=None, keys=("image",), mask_keys=("mask",), seed=0):
        super().__init__(keys, mask_keys, seed)
        if spatial_dims not in (2, 3):
            raise ValueError(f"spatial_dims must be 2 or 3, got {spatial_dims!r}")
        if mask_mode not in _nnunet.MASK_MODES:
            raise ValueError(f"mask_mode must be one of {_nnunet.MASK_MODES}, got {mask_mode!r}")
        self.spatial_dims = spatial_dims
        self.p = dict(p or {})
        self._probability = _nnunet.probabilities(self.p)
        self.image_pad = float(image_pad)
        self.label_pad = int(label_pad)
        self.mask_mode = mask_mode
        self.ignore_label = None if ignore_label is None else int(ignore_label)
        self.mask_image_channels = None if mask_image_channels is None else tuple(
            _non_negative("mask_image_channels", c) for c in mask_image_channels)
        self._patch_geometry = None
        self._zscore = ("", "")  # the bound dataset's provenance: zscore_region, normalize

    def bind(self, patch, dataset=None):
        if patch is not None and len(patch) != self.spatial_dims:
            raise ValueError(f"NnUnet(spatial_dims={self.spatial_dims}) cannot augment patches of {len(patch)} axes")
        bound = copy.copy(self)
        if dataset is not None:
            options = dataset.provenance["options"]
            bound._zscore = (options.get("zscore_region", ""), options.get("normalize", ""))
        if patch is not None:
            bound._patch_geometry = _nnunet.Geometry(patch, self._probability, margin=True)
            bound.margin = tuple(bound._patch_geometry.margin)
        return bound

    def masked_channels(self, channels):
        """The image channels masked outside the labelled data, for images of `channels`."""
        if self.mask_image_channels is not None:
            return list(self.mask_image_channels)
        return _nnunet.mask_image_channels(*self._zscore, channels)

    def geometry(self, spatial_shape):
        """The rotation range and margin for inputs of `spatial_shape`."""
        if self._patch_geometry is not None:
            g = self._patch_geometry
            want = [p + 2 * m for p, m in zip(g.patch, g.margin)]
            if list(spatial_shape) != want:
                raise ValueError(f"NnUnet bound to patch {tuple(g.patch)} with margin {tuple(g.margin)} needs inputs of "
                                 f"spatial size {tuple(want)}, got {tuple(spatial_shape)}")
            return g
        return _nnunet.Geometry(spatial_shape, self._probability, margin=False)

    def draw(self, batch, channels, spatial_shape, seed, epoch, step):
        """The parameters of one batch (an object with per-sample lists)."""
        return _nnunet.draw(self.geometry(spatial_shape), self._probability, batch, channels, seed, epoch, step)

    def _apply(self, batch, seed, epoch, step, stream):
        from . import _nnunet_apply
        torch = _torch()
        images = list(self._images(batch))
        if not images:
            return
        key, x = images[0]  # the first image present; its masks move with it
        if x.dim() != self.spatial_dims + 2:
            raise ValueError(f"NnUnet(spatial_dims={self.spatial_dims}) needs batch[{key!r}] as [B, C, "
                             f"{self.spatial_dims} spatial axes], got {list(x.shape)}")
        g = self.geometry(x.shape[2:])
        plan = _nnunet.draw(g, self._probability, x.shape[0], x.shape[1], seed, epoch, step, stream)
        masks = list(self._masks(batch, x))
        mask, pads, ignore = None, [], []
        if masks:
            dtypes = {m.dtype for _, m, _ in masks}
            mask = torch.cat([m if len(dtypes) == 1 else m.long() for _, m, _ in masks], 1)
            for _, m, _ in masks:  # the labels as the mask's dtype holds them, per channel
                pads += [int(torch.tensor(self.label_pad).to(m.dtype).long())] * m.shape[1]
                if self.ignore_label is not None:
                    ignore += [int(torch.tensor(self.ignore_label).to(m.dtype).long())] * m.shape[1]
        out, out_mask = _nnunet_apply.apply(x, mask, plan, g, self.image_pad, pads or self.label_pad, self.mask_mode,
                                            ignore or None, self.masked_channels(x.shape[1]))
        batch[key] = out
        at = 0
        for mkey, m, channel in masks:
            part = out_mask.narrow(1, at, m.shape[1]).to(m.dtype)
            at += m.shape[1]
            batch[mkey] = part if channel else part.squeeze(1)


def _names(what, keys):
    if isinstance(keys, str):
        keys = (keys,)
    keys = tuple(keys)
    if not all(isinstance(k, str) for k in keys):
        raise TypeError(f"{what} must be field names, got {keys!r}")
    return keys


NNUNET_TABLE = _nnunet.TABLE

from ._transforms_basic import (  # noqa: E402  (they build on Transform above)
    NormalizeIntensity, RandAffine, RandFlip, RandGaussianNoise, RandRotate, RandZoom, ScaleIntensity)
from ._presets import PRESETS, preset, save_grid  # noqa: E402,F401

