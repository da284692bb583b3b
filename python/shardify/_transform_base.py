"""What every transform of ``shardify.transforms`` builds on: :class:`Transform` (seeded,
batched, dict in, dict out), :class:`Compose`, and the helpers they share.

The transform modules import this one, never the ``transforms`` facade that gathers them,
so each of them imports on its own in a fresh interpreter, as unpickling a transform does.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ._checks import non_negative as _non_negative
from ._draw import position
from ._loader import bind_transform

if TYPE_CHECKING:
    import torch

    from ._dataset import Dataset

_MASK64 = (1 << 64) - 1
_STREAMS_PER_CHILD = 1000  # Compose: child i draws from streams stream + 1000 * i + ...


def _torch():
    import torch
    return torch


class Transform:
    """Base of the transforms: seeded, batched, dict in, dict out."""

    wants_position: bool = True  # the Loader passes seed, epoch and step
    margin: tuple[int, ...] | None = None  # voxels a bound transform needs around a patch (see bind)

    def __init__(self, keys: str | Sequence[str] = ("image",), mask_keys: str | Sequence[str] = ("mask",),
                 seed: int = 0) -> None:
        self.keys = _names("keys", keys)
        self.mask_keys = _names("mask_keys", mask_keys)
        self.seed = _non_negative("seed", seed)
        self._calls = 0

    def __call__(self, batch: dict[str, torch.Tensor], *, seed: int = 0, epoch: int | None = None,
                 step: int | None = None) -> dict[str, torch.Tensor]:
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

    def bind(self, patch: Sequence[int] | None, dataset: Dataset | None = None) -> Transform:
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

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"T.{type(self).__name__}({fields})"


class Compose(Transform):
    """Runs transforms in order; each draws from its own streams of the same position.
    Consecutive spatial transforms (RandFlip, RandAffine and its kin, on the same keys) are
    composed and resampled once, as MONAI's lazy resampling does: the same draws, one
    interpolation instead of several. fuse=False resamples after each."""

    def __init__(self, transforms: Iterable[Callable[..., dict[str, Any]]], fuse: bool = True) -> None:
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

    def bind(self, patch: Sequence[int] | None, dataset: Dataset | None = None) -> Compose:
        bound = copy.copy(self)
        bound.transforms = [bind_transform(t, patch, dataset) for t in self.transforms]
        Compose.__init__(bound, bound.transforms, self.fuse)
        return bound

    def _apply(self, batch, seed, epoch, step, stream):
        from ._transforms_basic import apply_spatial_run, spatial_runs  # it imports this module
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

    def __repr__(self) -> str:
        return "T.Compose([" + ", ".join(repr(t) for t in self.transforms) + "])"


def _names(what, keys):
    if isinstance(keys, str):
        keys = (keys,)
    keys = tuple(keys)
    if not all(isinstance(k, str) for k in keys):
        raise TypeError(f"{what} must be field names, got {keys!r}")
    return keys
