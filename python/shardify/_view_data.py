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
from ._view_provenance import preprocessing

# Array elements listed in full in a sample's JSON; larger arrays are summarized.
_LIST_ELEMENTS = 16
# Characters of a string field shown.
_STRING_CHARS = 400
# Mask labels listed from the statistics when the mask names none.
_MAX_LISTED_LABELS = 64
# Labels counted by number when the dataset names no classes (an idx dataset's digits).
_MAX_UNNAMED_CLASSES = 1000
# Samples, spread over the dataset, that a field's histogram counts.
HISTOGRAM_SAMPLES = 16
# Roles of ndarray fields that describe a sample rather than picture it.
_NOT_PICTURES = ("fg_locations", "geometry", "source_grid", "normalization")


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


def _json_object(meta: dict[str, str], key: str) -> dict:
    try:
        value = json.loads(meta.get(key, "{}"))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _declared_labels(mask_meta: dict[str, str]) -> dict[int, str]:
    """{value: name} of the mask's "labels" meta (name -> value, as dataset.json has them)."""
    return {v: str(name) for name, v in _json_object(mask_meta, "labels").items()
            if isinstance(v, int) and not isinstance(v, bool)}


def _is_multi_label(mask_meta: dict[str, str], channels: int | None) -> bool:
    """Whether a mask holds one 0/1 channel per class, as docs/fields.md says (and the trainer
    reads it): its "multi_label" meta, else K > 1 channels whose labels name exactly the
    classes 0..K-1."""
    flag = mask_meta.get("multi_label")
    if flag:
        return flag == "true"
    labels = _json_object(mask_meta, "labels")
    values = sorted(v for v in labels.values() if isinstance(v, int) and not isinstance(v, bool))
    numbered = len(values) == len(labels) and values == list(range(channels or 0))
    return bool(channels and channels > 1 and numbered)


def _colour(drawn: int) -> str:
    """The colour of label ``drawn`` (1, 2, ...) as label_plane draws it."""
    return "#%02x%02x%02x" % R.COLOURS[(drawn - 1) % len(R.COLOURS)]


def _mask_labels(mask_meta: dict[str, str], stats: dict[str, Any] | None, channels: int | None,
                 per_channel: bool) -> list[dict[str, Any]]:
    """[{value, name, colour}] of the mask's foreground labels. A label map's values are its
    labels: the names of its "labels" meta where there is one, else 1..max of its statistics.
    A mask of one channel per class has the channel as value (the "labels" meta maps names
    to channels), named "channel k" where the meta names none."""
    declared = _declared_labels(mask_meta)
    if per_channel:
        count = channels or (max(declared) + 1 if declared else 0)
        names = {c: declared.get(c, f"channel {c}") for c in range(min(count, _MAX_LISTED_LABELS))}
        return [{"value": c, "name": n, "colour": _colour(c + 1)} for c, n in names.items()]
    names = {v: n for v, n in declared.items() if v > 0}
    if not names and stats and stats.get("max") is not None and stats["max"] >= 1:
        names = {v: f"label {v}" for v in range(1, min(int(stats["max"]), _MAX_LISTED_LABELS) + 1)}
    return [{"value": v, "name": n, "colour": _colour(v)} for v, n in sorted(names.items())]


def _channel_names(meta: dict[str, str], channels: int) -> list[str] | None:
    """The names of an image's channels from its "channel_names" meta (nnU-Net's), None without."""
    names = _json_object(meta, "channel_names")
    if not names:
        return None
    return [str(names.get(str(c), f"channel {c}")) for c in range(channels)]


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
                               and f["meta"].get("role") not in _NOT_PICTURES]
        image = _role_field(self.fields, "image", "ndarray")
        if image not in self.picture_fields:
            image = next((n for n in self.picture_fields if n != self.mask_field), None)
        self.image_field = image
        mask = self._by_name[self.mask_field] if self.mask_field else {"meta": {}, "shape": None}
        shape = mask["shape"]
        channels = shape[0] if shape is not None and len(shape) in (3, 4) else 1 if shape is not None else None
        self.multi_label = _is_multi_label(mask["meta"], channels)
        per_channel = self.multi_label or (channels is not None and channels > 1)
        self.mask_labels = (_mask_labels(mask["meta"], self.stats.get(self.mask_field), channels, per_channel)
                            if self.mask_field else [])
        self.preprocessing = preprocessing(dataset.provenance,
                                           self._by_name[self.image_field]["meta"] if self.image_field else {})
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
            "preprocessing": self.preprocessing, "multi_label": self.multi_label,
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
        fields = [_describe(f, s.get(f["name"])) for f in self.fields]
        present, focus = [], None
        if self.mask_field is not None and isinstance(s.get(self.mask_field), np.ndarray):
            m = s[self.mask_field]
            focus = _focus(m)
            if self._per_channel(m):
                present = [c for c in range(m.shape[0]) if (m[c] > 0).any()]
            else:
                present = [int(v) for v in np.unique(m)[:_MAX_LISTED_LABELS + 1] if v > 0]
        label = int(s[self.label_field]) if self.label_field and s.get(self.label_field) is not None else None
        pictures = {}
        for name in self.picture_fields:
            a = s.get(name)
            if isinstance(a, np.ndarray) and R.spatial_shape(a.shape) is not None:
                pictures[name] = self._describe_picture(s, name, a)
        return _jsonable({"index": index, "split": self.split_of(index), "label": label,
                          "class": None if label is None else self.class_of(label), "fields": fields,
                          "pictures": pictures, "image_field": self.image_field, "mask_field": self.mask_field,
                          "mask_labels_present": present, "mask_focus": focus})

    def _describe_picture(self, sample: dict[str, Any], name: str, a: np.ndarray) -> dict[str, Any]:
        """What the page needs to draw an array: shapes, range, the spacing and the size each
        view is drawn at, and each channel's name and range."""
        spatial = R.spatial_shape(a.shape)
        spacing = self.spacing(sample, name)
        views = []
        for axis in range(3 if len(spatial) == 3 else 1):
            rows, cols = (spatial[k] for k in range(len(spatial)) if len(spatial) == 2 or k != axis)
            views.append(list(R.display_size(rows, cols, R.plane_spacing(spacing, axis), None)))
        lo, hi = R.value_range(a)
        channels = 1 if a.ndim == 2 else a.shape[0]
        out = {"shape": list(a.shape), "spatial_shape": list(spatial), "channels": channels, "min": lo, "max": hi,
               "spacing": None if spacing is None else list(spacing), "views": views,
               "channel_names": _channel_names(self._by_name[name]["meta"], channels)}
        if channels > 1:
            out["channel_ranges"] = [list(R.value_range(a[c])) for c in range(channels)]
        return out

    def spacing(self, sample: dict[str, Any], field: str) -> tuple[float, ...] | None:
        """The spatial spacing of ndarray ``field`` of a decoded sample, in array axis order
        (z, y, x): its ``<field>.spacing`` (ITK order x, y, z), else the image's when it lies
        on the image's grid (a mask without its own); None when unknown, not one positive
        finite value per spatial axis."""
        image = sample.get(self.image_field) if self.image_field else None
        return self._spacing(field, sample[field].shape, image.shape if isinstance(image, np.ndarray) else None,
                             sample.get)

    def _spacing(self, field: str, shape, image_shape, value) -> tuple[float, ...] | None:
        """spacing() from the shapes of ``field`` and of the image (None: none) and ``value``,
        which gives a field's value by name (None where there is none)."""
        spatial = R.spatial_shape(shape)
        names = [f"{field}.spacing"]
        if field != self.image_field and image_shape is not None and R.spatial_shape(image_shape) == spatial:
            names.append(f"{self.image_field}.spacing")
        for name in names:
            v = value(name)
            if isinstance(v, np.ndarray) and v.shape == (len(spatial),) and v.dtype.kind in "fiu":
                v = v.astype(np.float64)[::-1]
                if np.isfinite(v).all() and (v > 0).all():
                    return tuple(float(x) for x in v)
        return None

    def _per_channel(self, mask: np.ndarray) -> bool:
        """Whether a mask array holds a channel per class (else a label map)."""
        return mask.ndim > 2 and (self.multi_label or mask.shape[0] > 1)

    def picture(self, index: int, field: str | None, axis: int, slice_index: int | None, size: int | None,
                window: tuple[float, float] | None, channel: int | None, overlay: bool, aspect: bool = True) -> bytes:
        """PNG of a plane of ndarray ``field`` of sample ``index``, mask drawn over it, each
        pixel as wide and high as its voxel's spacing (``aspect``; else square)."""
        field = self._picture_field(field)
        key = ("picture", index, field, axis, slice_index, size, window, channel, overlay, aspect)
        cached = self.pictures.get(key)
        if cached is not None:
            return cached
        self.check_index(index)
        if window is not None and self._samples.get(index) is None and len(self._by_name[field]["shape"]) == 4:
            array, plane, mask_plane, spacing = self._read_plane(index, field, axis, slice_index)
        else:
            array, plane, mask_plane, spacing = self._decoded_plane(index, field, axis, slice_index)
        if channel is not None and not 0 <= channel < plane.shape[0]:
            raise BadRequest(f"channel must be 0..{plane.shape[0] - 1}, got {channel}")
        masked = mask_plane() if overlay else None
        labels = None if masked is None else R.label_plane(masked, self.multi_label)
        if window is None:
            window = R.value_range(array if channel is None or array.ndim == 2 else array[channel])
        pixels = R.compose(plane, window, labels, channel)
        data = R.png(R.fit(pixels, size, R.plane_spacing(spacing(), axis) if aspect else None))
        self.pictures.put(key, data, len(data))
        return data

    # The parts of picture(): the field's array (None where only the plane was read), the
    # plane, and functions giving the mask's plane (None: no mask on the field's grid) and
    # the field's spacing, each read only when called.

    def _decoded_plane(self, index: int, field: str, axis: int, slice_index: int | None):
        """picture()'s parts from the decoded sample."""
        s = self.arrays(index)
        array = s[field]
        mask = s.get(self.mask_field) if self.mask_field and field != self.mask_field else None

        def mask_plane():
            if isinstance(mask, np.ndarray) and R.spatial_shape(mask.shape) == R.spatial_shape(array.shape):
                return R.plane(mask, axis, slice_index)
            return None

        return array, R.plane(array, axis, slice_index), mask_plane, lambda: self.spacing(s, field)

    def _read_plane(self, index: int, field: str, axis: int, slice_index: int | None):
        """picture()'s parts of a volume ([C, D, H, W]) with only the plane (and the mask's)
        read: of a chunked field, the chunks it touches."""
        shape = self._shape(index, field)
        k = R.slice_index(shape, axis, slice_index)

        def mask_plane():
            if not self.mask_field or field == self.mask_field:
                return None
            mask_shape = self._shape(index, self.mask_field)
            if R.spatial_shape(mask_shape) != R.spatial_shape(shape):
                return None
            return self._plane(index, self.mask_field, mask_shape, axis, k)

        def spacing():
            image_shape = self._shape(index, self.image_field) if self.image_field else None
            return self._spacing(field, shape, image_shape, lambda name: self._value(index, name))

        return None, self._plane(index, field, shape, axis, k), mask_plane, spacing

    def _shape(self, index: int, field: str) -> tuple[int, ...]:
        with self._lock:
            return self.dataset.shape(index, field)

    def _plane(self, index: int, field: str, shape, axis: int, k: int) -> np.ndarray:
        """R.plane(field of sample index, axis, k) of a [C, D, H, W] field, read with region()."""
        start, box = [0] * len(shape), list(shape)
        start[1 + axis], box[1 + axis] = k, 1
        with self._lock:
            slab = self.dataset.region(index, field, start, box)
        return np.take(slab, 0, axis=1 + axis)

    def _value(self, index: int, name: str) -> Any:
        """Field ``name`` of sample ``index`` (only it decoded), None where the dataset has none."""
        return self._decoded(index, name) if name in self._by_name else None

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
        spacing = R.plane_spacing(self.spacing(s, field), 0)
        tiles = []
        for img, m in R.augmented(image, mask, preset, draws, seed):
            plane = R.plane(img, 0, None)
            labels = None if m is None else R.label_plane(R.plane(m, 0, None), self.multi_label)
            tiles.append(R.fit(R.compose(plane, R.value_range(img), labels, None), size, spacing))
        data = R.png(R.side_by_side(tiles))
        self.pictures.put(key, data, len(data))
        return data

    def histogram(self, field: str | None, bins: int) -> dict[str, Any]:
        """Counts of the finite values of ndarray ``field`` (default the image) in ``bins``
        equal bins from its recorded minimum to maximum, over HISTOGRAM_SAMPLES samples
        spread evenly over the dataset (every sample of a smaller one)."""
        field = self._picture_field(field)
        key = ("histogram", field, bins)
        cached = self.pictures.get(key)
        if cached is not None:
            return cached
        n = len(self.dataset)
        chosen = sorted({int(i) for i in np.linspace(0, n - 1, min(n, HISTOGRAM_SAMPLES)).round()}) if n else []
        stats = self.stats.get(field) or {}
        lo, hi = stats.get("min"), stats.get("max")
        if lo is None or hi is None:  # none recorded: the samples' own range, a pass first
            ranges = [R.value_range(self._decoded(i, field)) for i in chosen]
            lo, hi = min((r[0] for r in ranges), default=0.0), max((r[1] for r in ranges), default=0.0)
        if not hi > lo:
            lo, hi = lo - 0.5, hi + 0.5  # one value: a bin around it
        counts = np.zeros(bins, dtype=np.int64)
        for i in chosen:
            values = R.finite_values(self._decoded(i, field))
            counts += np.histogram(values.astype(np.uint8) if values.dtype.kind == "b" else values, bins=bins,
                                   range=(lo, hi))[0]
        result = {"field": field, "min": float(lo), "max": float(hi), "bins": bins, "samples": len(chosen),
                  "of": n, "counts": counts.tolist()}
        self.pictures.put(key, result, 16 * bins)
        return result

    def _decoded(self, index: int, field: str) -> np.ndarray:
        """Field ``field`` of sample ``index`` (only it decoded), from the kept samples where there."""
        kept = self._samples.get(index)
        if kept is not None:
            return kept[field]
        with self._lock:
            return self.dataset.get(index, fields=field)[field]

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
        if value.size <= _LIST_ELEMENTS:  # JSON has no NaN or infinity: those as text ("inf")
            out["values"] = [v if not isinstance(v, float) or math.isfinite(v) else str(v)
                             for v in value.reshape(-1).tolist()]
        if value.size and value.dtype.kind in "biuf":
            lo, hi, mean, count = R.summary(value)
            out.update({"min": lo, "max": hi, "mean": mean})
            if count < value.size:
                out["not_finite"] = value.size - count
    elif isinstance(value, bytes):
        out["bytes"] = len(value)
    elif isinstance(value, str):
        out["value"] = value[:_STRING_CHARS]
        out["truncated"] = len(value) > _STRING_CHARS
    else:
        out["value"] = value
    return out
