"""Pictures for shardify.view: planes of sample arrays, windowed to 8 bits, masks drawn over
them, scaled, encoded as PNG. numpy only; torch is imported for the augmentation preview alone.

Arrays are read as ``shardtool grid`` reads them: ``[H, W]``, ``[C, H, W]`` and
``[C, D, H, W]`` (channels first). A volume's spatial axis 0 is D, 1 is H, 2 is W."""

from __future__ import annotations

import struct
import zlib

import numpy as np

from ._palette import COLOURS
# The largest side of a picture the viewer makes, in pixels.
MAX_SIDE = 1024


class RenderError(ValueError):
    """A request that the array cannot satisfy (a bad axis, slice, window); the message says why."""


def png(pixels: np.ndarray) -> bytes:
    """PNG bytes of 8-bit gray ``[H, W]`` or RGB ``[H, W, 3]`` pixels (no interlace, filter 0)."""
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    height, width = pixels.shape[:2]
    colour_type = 0 if pixels.ndim == 2 else 2
    rows = np.zeros((height, 1 + pixels[0].size), dtype=np.uint8)  # a 0 filter byte starts each row
    rows[:, 1:] = pixels.reshape(height, -1)

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) +
            chunk(b"IEND", b""))


def spatial_shape(shape) -> tuple[int, ...] | None:
    """The spatial shape of an array (or a field's shape) drawn as a picture, None when it is not one."""
    shape = tuple(shape)
    if len(shape) == 2:
        return shape
    if len(shape) in (3, 4) and all(d is None or d > 0 for d in shape):  # None: the size varies
        return shape[1:]
    return None


def _channels_first(array):
    return array[np.newaxis] if array.ndim == 2 else array


def plane(array: np.ndarray, axis: int, index: int | None) -> np.ndarray:
    """``[C, h, w]``: the array itself (2D) or its slice at ``index`` along spatial ``axis``
    (3D; None: the middle)."""
    a = _channels_first(array)
    index = slice_index(array.shape, axis, index)
    return a if index is None else np.take(a, index, axis=1 + axis)


def slice_index(shape, axis: int, index: int | None) -> int | None:
    """The slice that ``plane`` takes of an array of ``shape`` along spatial ``axis`` (None
    for a 2D array: the array itself), or the RenderError it raises."""
    spatial = tuple(shape)[-2:] if len(shape) < 4 else tuple(shape)[1:]
    axes = len(spatial) if len(spatial) == 3 else 1
    if not 0 <= axis < axes:
        raise RenderError(f"axis must be 0..{axes - 1} for an array of shape {list(shape)}, got {axis}")
    if len(spatial) == 2:
        if index not in (None, 0):
            raise RenderError(f"a 2D array has one slice (0), got slice {index}")
        return None
    size = spatial[axis]
    index = size // 2 if index is None else index
    if not 0 <= index < size:
        raise RenderError(f"slice must be 0..{size - 1} along axis {axis}, got {index}")
    return index


def finite_values(array: np.ndarray) -> np.ndarray:
    """The array's finite values (all of an integer array's), float arrays widened to float64."""
    if array.dtype.kind != "f":
        return array
    a = array.astype(np.float64, copy=False)
    return a[np.isfinite(a)]


def value_range(array: np.ndarray) -> tuple[float, float]:
    """(min, max) of the array's finite values; (0, 0) when there are none."""
    finite = finite_values(array)
    if finite.size == 0:
        return 0.0, 0.0
    return float(finite.min()), float(finite.max())


def summary(array: np.ndarray) -> tuple[float, float, float | None, int]:
    """(min, max, mean, count) of the array's finite values, in float64: NaN and infinities
    (a normalization's unbounded clip, an empty region) are left out, not averaged into NaN.
    Mean None (min and max 0) when there are none."""
    finite = finite_values(array)
    if finite.size == 0:
        return 0.0, 0.0, None, 0
    return float(finite.min()), float(finite.max()), float(finite.mean(dtype=np.float64)), int(finite.size)


def to_8bit(values: np.ndarray, window: tuple[float, float]) -> np.ndarray:
    """Values mapped linearly from window (lo, hi) onto 0..255, rounded and clipped; NaN as 0."""
    lo, hi = window
    v = values.astype(np.float64)
    scaled = np.zeros_like(v) if hi <= lo else (v - lo) * (255.0 / (hi - lo))
    return np.clip(np.rint(np.nan_to_num(scaled, nan=0.0)), 0, 255).astype(np.uint8)


def label_plane(mask_plane: np.ndarray, multi_label: bool) -> np.ndarray:
    """``[h, w]`` labels of a mask plane ``[C, h, w]``: the values of a one-channel label map, or
    1 + the first channel above 0 of a one-channel-per-class mask; 0 is background (and so is
    a negative value, which marks a voxel unlabelled)."""
    if mask_plane.shape[0] == 1 and not multi_label:
        return np.where(mask_plane[0] > 0, mask_plane[0], 0).astype(np.int64)
    on = mask_plane > 0
    return np.where(on.any(axis=0), on.argmax(axis=0) + 1, 0)


def compose(image_plane: np.ndarray, window, labels: np.ndarray | None, channel: int | None) -> np.ndarray:
    """8-bit pixels of an image plane ``[C, h, w]``: RGB when it has three channels and no
    channel is chosen, else gray of ``channel`` (0 by default); labels > 0 blended in colour."""
    if channel is None and image_plane.shape[0] == 3:
        pixels = np.stack([to_8bit(image_plane[c], window) for c in range(3)], axis=-1)
    else:
        pixels = to_8bit(image_plane[channel or 0], window)
    if labels is None or not (labels > 0).any():
        return pixels
    if pixels.ndim == 2:
        pixels = np.repeat(pixels[..., np.newaxis], 3, axis=-1)
    colours = np.array(COLOURS, dtype=np.uint16)[(np.maximum(labels, 1) - 1) % len(COLOURS)]
    blended = ((pixels.astype(np.uint16) + colours) // 2).astype(np.uint8)
    return np.where((labels > 0)[..., np.newaxis], blended, pixels)


def display_size(height: int, width: int, spacing: tuple[float, float] | None,
                 size: int | None) -> tuple[int, int]:
    """(rows, columns) a plane of ``height`` x ``width`` pixels is drawn at: stretched so
    that each pixel covers its ``spacing`` (row, column; None: square pixels), the finer
    spacing keeping one pixel per voxel; then scaled so that the longer side is ``size``
    (None: as it is, but at most MAX_SIDE)."""
    rows, cols = float(height), float(width)
    if spacing is not None:
        unit = min(spacing)
        rows, cols = height * spacing[0] / unit, width * spacing[1] / unit
    longest = max(rows, cols)
    target = min(size or longest, MAX_SIDE)
    return max(1, round(rows * target / longest)), max(1, round(cols * target / longest))


def fit(pixels: np.ndarray, size: int | None, spacing: tuple[float, float] | None = None) -> np.ndarray:
    """Pixels scaled (nearest neighbour) to their display_size."""
    height, width = pixels.shape[:2]
    h, w = display_size(height, width, spacing, size)
    if (h, w) == (height, width):
        return pixels
    rows = np.arange(h) * height // h
    cols = np.arange(w) * width // w
    return pixels[rows][:, cols]


def plane_spacing(spacing: tuple[float, ...] | None, axis: int) -> tuple[float, float] | None:
    """(row, column) spacing of the plane ``plane(array, axis, ...)`` draws, from the array's
    spatial spacing in axis order (None: unknown)."""
    if spacing is None:
        return None
    if len(spacing) == 2:
        return spacing[0], spacing[1]
    rows, cols = (a for a in range(3) if a != axis)
    return spacing[rows], spacing[cols]


def side_by_side(tiles: list[np.ndarray], gap: int = 4) -> np.ndarray:
    """RGB tiles of one height in a row, ``gap`` black pixels between them."""
    tiles = [t if t.ndim == 3 else np.repeat(t[..., np.newaxis], 3, axis=-1) for t in tiles]
    height = max(t.shape[0] for t in tiles)
    width = sum(t.shape[1] for t in tiles) + gap * (len(tiles) - 1)
    out = np.zeros((height, width, 3), dtype=np.uint8)
    x = 0
    for t in tiles:
        out[:t.shape[0], x:x + t.shape[1]] = t
        x += t.shape[1] + gap
    return out


def augmented(image: np.ndarray, mask: np.ndarray | None, preset: str, draws: int, seed: int):
    """``draws`` augmentations of one sample by ``shardify.transforms.preset(preset)``, as a list
    of (image ``[C, *spatial]``, mask or None) numpy pairs. Raises ImportError without torch."""
    import torch  # noqa: F401  (ImportError here, before the transforms ask for it)

    from . import transforms as T
    image = _channels_first(image)
    batch = {"image": torch.from_numpy(image.astype(np.float32)).unsqueeze(0).repeat(draws, *[1] * image.ndim)}
    if mask is not None:
        mask = _channels_first(mask)
        batch["mask"] = torch.from_numpy(mask.astype(np.int64)).unsqueeze(0).repeat(draws, *[1] * mask.ndim)
    transform = T.preset(preset, spatial_dims=image.ndim - 1, seed=seed)
    out = transform(batch, seed=seed)
    images = out["image"].detach().cpu().numpy()
    masks = out["mask"].detach().cpu().numpy() if "mask" in out else None
    return [(images[k], None if masks is None else masks[k]) for k in range(draws)]
