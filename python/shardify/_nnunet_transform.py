"""T.NnUnet: nnU-Net v2's default training augmentation as a transform (the parameter
draws are in _nnunet.py, the tensor operations in _nnunet_apply.py)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from . import _nnunet
from ._checks import non_negative as _non_negative
from ._transform_base import Transform, _torch

if TYPE_CHECKING:
    from ._dataset import Dataset


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

    def __init__(self, spatial_dims: int = 3, p: Mapping[str, float] | None = None, image_pad: float = 0.0,
                 label_pad: int = -1, mask_mode: str = "linear", ignore_label: int | None = None,
                 mask_image_channels: Iterable[int] | None = None, keys: str | Sequence[str] = ("image",),
                 mask_keys: str | Sequence[str] = ("mask",), seed: int = 0) -> None:
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

    def bind(self, patch: Sequence[int] | None, dataset: Dataset | None = None) -> NnUnet:
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

    def masked_channels(self, channels: int) -> list[int]:
        """The image channels masked outside the labelled data, for images of `channels`."""
        if self.mask_image_channels is not None:
            return list(self.mask_image_channels)
        return _nnunet.mask_image_channels(*self._zscore, channels)

    def geometry(self, spatial_shape: Sequence[int]) -> _nnunet.Geometry:
        """The rotation range and margin for inputs of `spatial_shape`."""
        if self._patch_geometry is not None:
            g = self._patch_geometry
            want = [p + 2 * m for p, m in zip(g.patch, g.margin)]
            if list(spatial_shape) != want:
                raise ValueError(f"NnUnet bound to patch {tuple(g.patch)} with margin {tuple(g.margin)} needs inputs of "
                                 f"spatial size {tuple(want)}, got {tuple(spatial_shape)}")
            return g
        return _nnunet.Geometry(spatial_shape, self._probability, margin=False)

    def draw(self, batch: int, channels: int, spatial_shape: Sequence[int], seed: int, epoch: int,
             step: int) -> _nnunet.Plan:
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
