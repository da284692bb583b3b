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

# The facade: the code is in _transform_base.py (Transform, Compose), _transforms_basic.py,
# _nnunet_transform.py and _presets.py, which import _transform_base and never this module.
from . import _nnunet
from ._nnunet_transform import NnUnet
from ._presets import PRESETS, preset, save_grid
from ._transform_base import Compose, Transform
from ._transforms_basic import (NormalizeIntensity, RandAffine, RandFlip, RandGaussianNoise, RandRotate, RandZoom,
                                ScaleIntensity)

__all__ = ["Transform", "Compose", "NnUnet", "RandFlip", "RandAffine", "RandRotate", "RandZoom", "RandGaussianNoise",
           "ScaleIntensity", "NormalizeIntensity", "preset", "PRESETS", "save_grid"]

NNUNET_TABLE = _nnunet.TABLE
