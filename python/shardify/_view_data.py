"""What shardify.view shows of a dataset: the overview, pages of samples, one sample, its
pictures. Plain functions of a Dataset returning JSON-ready values or PNG bytes; the HTTP
side (shardify.view) parses requests into their arguments."""

from __future__ import annotations

import collections
import json
import math
import threading
from typing import Any

import numpy as np

from . import _view_render as R
from ._dataset import Dataset

# Array elements listed in full in a sample's JSON; larger arrays are summarized.
_LIST_ELEMENTS = 16
# Characters of a string field shown.
_STRING_CHARS = 400
# Mask labels listed from the statistics when the mask names none.
_MAX_LISTED_LABELS = 64
# Labels counted by number when the dataset names no classes (an idx dataset's digits).
_MAX_UNNAMED_CLASSES = 1000


class NotFound(LookupError):
    """A sample, field or split that the dataset does not have (HTTP 404)."""


class BadRequest(ValueError):
    """A parameter out of its range or of the wrong kind (HTTP 400)."""


def _finite(x):
    """JSON has no NaN or infinity: those become None."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    return _finite(value)


class _Lru:
    """A bounded map, least recently used out first; safe across threads."""

    def __init__(self, entries: int, max_bytes: int = 1 << 62) -> None:
        self._items: collections.OrderedDict = collections.OrderedDict()
        self._entries, self._max_bytes, self._bytes = entries, max_bytes, 0
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key][0]

    def put(self, key, value, size: int = 0) -> None:
        with self._lock:
            if key in self._items:
                self._bytes -= self._items.pop(key)[1]
            self._items[key] = (value, size)
            self._bytes += size
            while len(self._items) > self._entries or (self._bytes > self._max_bytes and len(self._items) > 1):
                self._bytes -= self._items.popitem(last=False)[1][1]

    def __len__(self) -> int:
        return len(self._items)


def _role_field(fields, role, kind=None):
    for f in fields:
        if f["meta"].get("role") == role and (kind is None or f["kind"] == kind):
            return f["name"]
    return None


def _mask_labels(mask_meta: dict[str, str], stats: dict[str, Any] | None) -> list[dict[str, Any]]:
    """[{value, name, colour}] of the mask's foreground labels: its "labels" meta (name -> value,
    as dataset.json has them) where there is one, else 1..max of its statistics."""
    names = {}
    try:
        declared = json.loads(mask_meta.get("labels", "{}"))
    except ValueError:
        declared = {}
    if isinstance(declared, dict):
        for name, value in declared.items():
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                names[value] = str(name)
    if not names and stats and stats.get("max") is not None and stats["max"] >= 1:
        names = {v: f"label {v}" for v in range(1, min(int(stats["max"]), _MAX_LISTED_LABELS) + 1)}
    return [{"value": v, "name": n, "colour": "#%02x%02x%02x" % R.COLOURS[(v - 1) % len(R.COLOURS)]}
            for v, n in sorted(names.items())]


class DatasetView:
    """A dataset as the viewer shows it. Thread-safe: decoding is serialized, pictures are
    cached (``cache_entries`` PNGs, ``cache_bytes`` at most) and so are the last few samples."""

    def __init__(self, dataset: Dataset, cache_entries: int = 512, cache_bytes: int = 64 << 20) -> None:
        self.dataset = dataset
        self.fields = dataset.fields
        self._by_name = {f["name"]: f for f in self.fields}
        self.classes = dataset.classes
        self.splits = [(name, r.start, len(r)) for name, r in
                       ((name, dataset.split_range(name)) for name in dataset.splits)]
        self.stats = {s["field"]: {k: _finite(v) for k, v in s.items()} for s in dataset.stats}
        self.label_field = _role_field(self.fields, "label", "int")
        self.mask_field = _role_field(self.fields, "mask", "ndarray")
        self.picture_fields = [f["name"] for f in self.fields
                               if f["kind"] == "ndarray" and R.spatial_shape(f["shape"]) is not None
                               and f["meta"].get("role") not in ("fg_locations", "geometry")]
        image = _role_field(self.fields, "image", "ndarray")
        if image not in self.picture_fields:
            image = next((n for n in self.picture_fields if n != self.mask_field), None)
        self.image_field = image
        mask_meta = self._by_name[self.mask_field]["meta"] if self.mask_field else {}
        self.multi_label = mask_meta.get("multi_label") == "true"
        self.mask_labels = _mask_labels(mask_meta, self.stats.get(self.mask_field)) if self.mask_field else []
        self._lock = threading.Lock()
        self._labels = None
        self._samples = _Lru(4)
        self.pictures = _Lru(cache_entries, cache_bytes)

    # -- the dataset as a whole ------------------------------------------------------------
    def labels(self) -> np.ndarray:
        """The label of every sample (-1 where none), read once from the index."""
        with self._lock:
            if self._labels is None:
                labels = np.full(len(self.dataset), -1, dtype=np.int64)
                if self.label_field:
                    for i in range(len(self.dataset)):
                        labels[i] = self.dataset.get(i, fields=self.label_field)[self.label_field]
                self._labels = labels
            return self._labels

    def overview(self) -> dict[str, Any]:
        labels = self.labels()
        names = self.classes
        if not names and labels.size and 0 <= labels.max() < _MAX_UNNAMED_CLASSES:
            names = [str(c) for c in range(int(labels.max()) + 1)]  # no names: the labels by number
        counts = np.bincount(labels[labels >= 0], minlength=len(names)) if names else []
        classes = [{"index": c, "name": name, "count": int(counts[c])} for c, name in enumerate(names)]
        return _jsonable({
            "path": self.dataset._shown, "samples": len(self.dataset), "format_version": self.dataset.format_version,
            "splits": [{"name": n, "first": first, "count": count} for n, first, count in self.splits],
            "classes": classes, "named_classes": bool(self.classes),
            "unlabeled": int((labels < 0).sum()) if classes else None,
            "fields": [{"name": f["name"], "kind": f["kind"], "dtype": f["dtype"], "role": f["meta"].get("role"),
                        "shape": None if f["shape"] is None else list(f["shape"])} for f in self.fields],
            "stats": list(self.stats.values()), "provenance": self.dataset.provenance,
            "image_field": self.image_field, "mask_field": self.mask_field, "label_field": self.label_field,
            "picture_fields": self.picture_fields, "mask_labels": self.mask_labels})

    def split_of(self, index: int) -> str | None:
        for name, first, count in self.splits:
            if first <= index < first + count:
                return name
        return None

    def class_of(self, label: int) -> str | None:
        return self.classes[label] if 0 <= label < len(self.classes) else None

    def page(self, split: str | None, label: str | None, offset: int, limit: int) -> dict[str, Any]:
        """Sample indices of ``split`` (None: all) with class ``label`` (a name or a number;
        None: any), ``limit`` of them from ``offset``."""
        if split is None:
            chosen = np.arange(len(self.dataset))
        else:
            match = [(first, count) for name, first, count in self.splits if name == split]
            if not match:
                raise NotFound(f"no split {split!r}; the splits are {[s[0] for s in self.splits]}")
            chosen = np.arange(match[0][0], match[0][0] + match[0][1])
        labels = self.labels()
        if label is not None:
            chosen = chosen[labels[chosen] == self._label_value(label)]
        rows = [{"index": int(i), "split": self.split_of(int(i)), "label": int(labels[i]) if labels[i] >= 0 else None,
                 "class": self.class_of(int(labels[i]))} for i in chosen[offset:offset + limit]]
        return {"split": split, "label": label, "offset": offset, "limit": limit, "total": int(chosen.size),
                "samples": rows}

    def _label_value(self, label: str) -> int:
        if label in self.classes:
            return self.classes.index(label)
        if label.lstrip("-").isdigit() and len(label) < 12:
            return int(label)
        raise NotFound(f"no class {label!r}; the classes are {self.classes}")

    # -- one sample ------------------------------------------------------------------------
    def check_index(self, index: int) -> int:
        if not 0 <= index < len(self.dataset):
            raise NotFound(f"no sample {index}; the dataset has {len(self.dataset)} (0..{len(self.dataset) - 1})")
        return index

    def arrays(self, index: int) -> dict[str, Any]:
        """Sample ``index`` decoded (kept among the last few)."""
        sample = self._samples.get(index)
        if sample is None:
            with self._lock:
                sample = self.dataset[self.check_index(index)]
            self._samples.put(index, sample)
        return sample

    def sample(self, index: int) -> dict[str, Any]:
        s = self.arrays(index)
        fields = []
        for f in self.fields:
            fields.append(_describe(f, s.get(f["name"])))
        present, focus = [], None
        if self.mask_field is not None and isinstance(s.get(self.mask_field), np.ndarray):
            m = s[self.mask_field]
            focus = _focus(m)
            if m.ndim >= 1 and (self.multi_label or m.ndim == 2 or m.shape[0] > 1):
                present = [c + 1 for c in range(m.shape[0]) if (m[c] != 0).any()] if m.ndim > 2 else []
            if not present:
                present = [int(v) for v in np.unique(m)[:_MAX_LISTED_LABELS + 1] if v > 0]
        label = int(s[self.label_field]) if self.label_field and s.get(self.label_field) is not None else None
        pictures = {}
        for name in self.picture_fields:
            a = s.get(name)
            if isinstance(a, np.ndarray) and R.spatial_shape(a.shape) is not None:
                lo, hi = R.value_range(a)
                pictures[name] = {"shape": list(a.shape), "spatial_shape": list(R.spatial_shape(a.shape)),
                                  "channels": 1 if a.ndim == 2 else a.shape[0], "min": lo, "max": hi}
        return _jsonable({"index": index, "split": self.split_of(index), "label": label,
                          "class": None if label is None else self.class_of(label), "fields": fields,
                          "pictures": pictures, "image_field": self.image_field, "mask_field": self.mask_field,
                          "mask_labels_present": present, "mask_focus": focus})

    def picture(self, index: int, field: str | None, axis: int, slice_index: int | None, size: int | None,
                window: tuple[float, float] | None, channel: int | None, overlay: bool) -> bytes:
        """PNG of a plane of ndarray ``field`` of sample ``index``, mask drawn over it."""
        field = self._picture_field(field)
        key = ("picture", index, field, axis, slice_index, size, window, channel, overlay)
        cached = self.pictures.get(key)
        if cached is not None:
            return cached
        s = self.arrays(self.check_index(index))
        array = s[field]
        plane = R.plane(array, axis, slice_index)
        if channel is not None and not 0 <= channel < plane.shape[0]:
            raise BadRequest(f"channel must be 0..{plane.shape[0] - 1}, got {channel}")
        labels = None
        if overlay and self.mask_field and field != self.mask_field:
            mask = s.get(self.mask_field)
            if isinstance(mask, np.ndarray) and R.spatial_shape(mask.shape) == R.spatial_shape(array.shape):
                labels = R.label_plane(R.plane(mask, axis, slice_index), self.multi_label)
        picked = array if channel is None or array.ndim == 2 else array[channel]
        pixels = R.compose(plane, window or R.value_range(picked), labels, channel)
        data = R.png(R.fit(pixels, size))
        self.pictures.put(key, data, len(data))
        return data

    def augmentation(self, index: int, preset: str, draws: int, size: int, seed: int) -> bytes:
        """PNG of ``draws`` augmentations of sample ``index`` side by side (middle slice of a volume)."""
        key = ("augment", index, preset, draws, size, seed)
        cached = self.pictures.get(key)
        if cached is not None:
            return cached
        field = self._picture_field(None)
        s = self.arrays(self.check_index(index))
        image = s[field]
        mask = s.get(self.mask_field) if self.mask_field else None
        if not isinstance(mask, np.ndarray) or R.spatial_shape(mask.shape) != R.spatial_shape(image.shape):
            mask = None
        draws_out = R.augmented(image, mask, preset, draws, seed)
        tiles = []
        for img, m in draws_out:
            plane = R.plane(img, 0, None)
            labels = None if m is None else R.label_plane(R.plane(m, 0, None), self.multi_label)
            tiles.append(R.fit(R.compose(plane, R.value_range(img), labels, None), size))
        data = R.png(R.side_by_side(tiles))
        self.pictures.put(key, data, len(data))
        return data

    def _picture_field(self, field: str | None) -> str:
        if field is None:
            if self.image_field is None:
                raise NotFound("the dataset has no field drawn as a picture ([H, W], [C, H, W] or [C, D, H, W])")
            return self.image_field
        if field not in self.picture_fields:
            raise NotFound(f"no picture field {field!r}; the fields drawn as pictures are {self.picture_fields}")
        return field


def _focus(mask: np.ndarray) -> list[int] | None:
    """The middle of the box around a mask's labelled voxels, per spatial axis; None when it
    has none or is not a picture."""
    if R.spatial_shape(mask.shape) is None:
        return None
    on = (mask != 0) if mask.ndim == 2 else (mask != 0).any(axis=0)
    if not on.any():
        return None
    focus = []
    for axis in range(on.ndim):
        hits = np.flatnonzero(on.any(axis=tuple(a for a in range(on.ndim) if a != axis)))
        focus.append(int(hits[0] + hits[-1]) // 2)
    return focus


def _describe(field: dict[str, Any], value: Any) -> dict[str, Any]:
    """A field of one sample for the page: scalars as they are, arrays summarized."""
    out = {"name": field["name"], "kind": field["kind"], "dtype": field["dtype"], "role": field["meta"].get("role")}
    if isinstance(value, np.ndarray):
        out["shape"] = list(value.shape)
        if value.size <= _LIST_ELEMENTS:
            out["values"] = value.reshape(-1).tolist()
        if value.size and value.dtype.kind in "biuf":
            lo, hi = R.value_range(value)
            out.update({"min": lo, "max": hi, "mean": float(np.nanmean(value)) if value.dtype.kind == "f" else
                        float(value.mean())})
    elif isinstance(value, bytes):
        out["bytes"] = len(value)
    elif isinstance(value, str):
        out["value"] = value[:_STRING_CHARS]
        out["truncated"] = len(value) > _STRING_CHARS
    else:
        out["value"] = value
    return out
