"""shardify.Dataset: random access to a shard dataset, as numpy arrays and Python values."""

from __future__ import annotations

import math
import os
from typing import Any, Iterable, SupportsIndex

import numpy as np

from . import _core

_IO_MODES = ("mmap", "pread")


def _cache_limit(limit):
    """cache_limit as the C++ side takes it: "" (the default), or bytes as text ("2G" too)."""
    if limit is None:
        return ""
    if isinstance(limit, bool) or not isinstance(limit, (int, str)):
        raise TypeError(f"cache_limit must be bytes (int) or a size like '2G', got {type(limit).__name__}")
    if isinstance(limit, int) and limit < 1:
        raise ValueError(f"cache_limit must be at least 1 byte, got {limit}")
    return str(limit)


class Dataset:
    """A shard dataset directory (``manifest.sfm`` + ``shard-*.sfs``), opened for reading.

    ``ds[i]`` decodes sample ``i`` (any split) into a dict: ndarray fields as new numpy
    arrays in their stored dtype and shape, ``int``/``float`` fields as Python numbers,
    ``string`` fields as ``str`` and ``bytes`` fields as ``bytes``. Only the manifest is
    read when opening; each shard is opened and fully checked the first time it is used.
    ``io="mmap"`` (default) reads shards through a memory mapping, ``io="pread"`` with
    pread(2) (no page faults: for NFS or FUSE); both give the same values and checks.
    ``max_open_shards`` caps the shard files open at once (the least recently used is
    closed; its checked index stays in memory). ``None`` chooses: with mmap every shard of
    a dataset of up to 8,192 stays mapped (a mapping holds no file descriptor); with pread,
    a quarter of the process's soft file-descriptor limit (``ulimit -n``).

    It is a map-style dataset: ``torch.utils.data.DataLoader(ds, ...)`` works, worker
    processes included (a pickled Dataset reopens its path; in a forked child it reopens
    itself on first use, since a Loader of the parent may have been reading it at the
    fork). For training, prefer :class:`shardify.Loader`, which batches with C++ threads
    and needs no workers.

    ``path`` may also be an ``s3://bucket/prefix`` location (credentials, region and
    endpoint from the AWS variables and files; see docs/remote.md) or an ``http://`` or
    ``https://`` URL of a dataset directory. Its
    manifest is read at open; each shard is fetched whole into a local cache when first
    used, checked against the manifest, and kept there while it is open. ``cache_dir``
    (default ``$SHARDIFY_CACHE_DIR``, else ``~/.cache/shardify``) and ``cache_limit`` (bytes,
    or a size like ``"20G"``; default ``$SHARDIFY_CACHE_LIMIT``, else the dataset's size
    capped at half the free space) bound it; the processes of a node share one cache
    safely. Reading fewer shards at once than the limit holds (``order="shard_windowed"``)
    lets a cache smaller than the dataset serve every epoch; see docs/remote.md. With a
    cache smaller than the dataset, ``dataset[i]`` reads a shard the cache does not have by
    HTTP range requests (one per sample, nothing cached) instead of fetching it whole;
    ``SHARDIFY_REMOTE_FETCH=whole`` or ``ranges`` makes that choice for every dataset.

    Errors: a missing dataset raises ``FileNotFoundError``; bytes that disagree with the
    format or their checksum raise :class:`shardify.CorruptionError` (an ``OSError``)
    naming the file, sample and field; an index out of range raises ``IndexError``. A shard
    truncated or rewritten while it is read raises an ``OSError`` (or CorruptionError)
    naming it, never a crash.
    """

    def __init__(self, path: str | os.PathLike[str], *, verify_checksums: bool = True,
                 max_open_shards: int | None = None, io: str = "mmap", cache_dir: str | os.PathLike[str] | None = None,
                 cache_limit: int | str | None = None) -> None:
        path = os.fspath(path)
        if max_open_shards is not None:
            if max_open_shards < 1:
                raise ValueError(f"max_open_shards must be None or >= 1, got {max_open_shards}")
            max_open_shards = int(max_open_shards)
        if io not in _IO_MODES:
            raise ValueError(f"io must be one of {_IO_MODES}, got {io!r}")
        self._options = dict(verify_checksums=bool(verify_checksums), max_open_shards=max_open_shards, io=io,
                             cache_dir="" if cache_dir is None else os.fspath(cache_dir),
                             cache_limit=_cache_limit(cache_limit))
        self._opened = self._open_core(path)
        self._pid = os.getpid()
        self._path = path
        self._field_names = [f["name"] for f in self._opened.fields()]
        self._split_stats = {}

    def _open_core(self, path):
        o = self._options
        return _core.Dataset(path, verify_checksums=o["verify_checksums"],
                             max_open_shards=o["max_open_shards"] or 0, io=o["io"], cache_dir=o["cache_dir"],
                             cache_limit=o["cache_limit"])

    @property
    def _core(self):
        """The C++ dataset, reopened in a forked child: a thread of the parent (a Loader's)
        may have held its shard cache's lock at the fork, and no thread will release it
        in the child."""
        if self._pid != os.getpid():
            self._opened = self._open_core(self._path)
            self._pid = os.getpid()
        return self._opened

    @property
    def path(self) -> str:
        return self._path

    @property
    def _shown(self):
        """The path as messages and repr show it: a URL's query (it may hold a token) as
        "?..." (the C++ dataset's dir(), storage::ShownLocation)."""
        return self._opened.path

    def __len__(self) -> int:
        return self._core.num_samples

    def __getitem__(self, index: SupportsIndex) -> dict[str, Any]:
        return self.get(index)

    def get(self, index: SupportsIndex, fields: str | Iterable[str] | None = None) -> dict[str, Any]:
        """Sample ``index`` as a dict; ``fields`` (names) limits what is decoded. An
        unknown name raises ValueError listing the fields there are."""
        index = self._index(index)
        if fields is not None:
            fields = [fields] if isinstance(fields, str) else list(fields)
            for name in fields:
                self._check_field(name)
        return self._core.sample(index, fields)

    def shape(self, index: SupportsIndex, field: str) -> tuple[int, ...]:
        """The shape of ndarray ``field`` in sample ``index``, read from the shard's index:
        nothing is decoded (a field of varying shape has its own in each sample)."""
        index = self._index(index)
        self._check_field(field)
        return self._core.shape(index, field)

    def region(self, index: SupportsIndex, field: str, start: Iterable[int], size: Iterable[int]) -> np.ndarray:
        """The box ``[start, start + size)`` of ndarray ``field`` of sample ``index``.

        Only the chunks the box touches are decompressed (chunked fields, written with
        ``patch_size``); parts outside the array are zero."""
        index = self._index(index)
        self._check_field(field)
        return self._core.region(index, field, [int(s) for s in start], [int(s) for s in size])

    @property
    def splits(self) -> dict[str, int]:
        """``{name: number of samples}``, in dataset order."""
        return {name: count for name, _, count in self._core.splits()}

    def split_range(self, name: str) -> range:
        """The global sample indices of split ``name``, as a ``range``."""
        for split, first, count in self._core.splits():
            if split == name:
                return range(first, first + count)
        raise ValueError(f"{self._shown} has no split {name!r}; it has {sorted(self.splits)}")

    @property
    def classes(self) -> list[str]:
        """Class names: label ``i`` is ``classes[i]``."""
        return self._core.classes()

    @property
    def fields(self) -> list[dict[str, Any]]:
        """One dict per field: name, kind, dtype, shape (``None`` where it varies),
        chunk_shape and meta."""
        return self._core.fields()

    @property
    def provenance(self) -> dict[str, Any]:
        return self._core.provenance()

    @property
    def stats(self) -> list[dict[str, Any]]:
        """Per-field statistics recorded by the converter (min, max, mean, std, count) over
        every split. To normalize inputs use ``split_stats("train")``: these include the
        validation and test samples."""
        return self._core.stats()

    def split_stats(self, split: str, fields: str | Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Statistics of the samples of split ``split`` alone, as ``stats`` gives them: one
        dict per ndarray field (or per name in ``fields``) with field, count, min, max,
        mean and std over every element (NaN left out; std is the population's).

        Computed on the first call by decoding the split once with a Loader's C++ threads
        (memory: a few batches), then kept."""
        self.split_range(split)  # names the splits there are
        names = self._ndarray_fields(fields)
        key = (split, tuple(names))
        if key not in self._split_stats:
            self._split_stats[key] = _compute_stats(self, split, names)
        return [dict(s) for s in self._split_stats[key]]

    @property
    def format_version(self) -> int:
        return self._core.format_version

    def __repr__(self) -> str:
        return f"shardify.Dataset({self._shown!r}, samples={len(self)}, splits={self.splits})"

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self._path, "options": self._options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], **state["options"])

    def _check_field(self, name):
        if name not in self._field_names:
            raise ValueError(f"{self._shown} has no field {name!r}; it has {self._field_names}")

    def _ndarray_fields(self, fields):
        kinds = {f["name"]: f["kind"] for f in self.fields}
        if fields is None:
            return [name for name, kind in kinds.items() if kind == "ndarray"]
        fields = [fields] if isinstance(fields, str) else list(fields)
        for name in fields:
            self._check_field(name)
            if kinds[name] != "ndarray":
                raise ValueError(f"field {name!r} is of kind {kinds[name]}; statistics are of ndarray fields")
        return fields

    def _index(self, index):
        if not isinstance(index, int):
            try:
                index = index.__index__()
            except AttributeError:
                raise TypeError(f"sample index must be an integer, not {type(index).__name__}") from None
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"sample index out of range (dataset has {n} samples)")
        return index


# Bytes of samples per batch when computing statistics (the float64 copies are 8x that at most).
_STATS_BATCH_BYTES = 4 << 20


class _Moments:
    """Count, mean, sum of squared deviations, min and max of a field's elements, merged
    part by part (Chan, Golub and LeVeque's pairwise update, as the converter's).

    The Python side's one home of that update: the C++ one is ``Moments`` in
    format/moments.h (the writer, merging parts, ``shardtool stats``); this one merges
    the numpy batches a Loader gives."""

    def __init__(self):
        self.n, self.mean, self.m2, self.min, self.max = 0, 0.0, 0.0, math.inf, -math.inf

    def add(self, values):
        values = values.reshape(-1)
        if values.dtype.kind == "f":
            values = values[~np.isnan(values)]
        if values.size == 0:
            return
        x = values.astype(np.float64)
        n, mean = x.size, float(x.mean())
        m2 = float(np.square(x - mean).sum())
        total = self.n + n
        delta = mean - self.mean
        self.mean += delta * n / total
        self.m2 += m2 + delta * delta * self.n * n / total
        self.n = total
        self.min, self.max = min(self.min, float(x.min())), max(self.max, float(x.max()))

    def as_dict(self, field):
        return {"field": field, "count": self.n, "min": self.min, "max": self.max, "mean": self.mean,
                "std": math.sqrt(self.m2 / self.n)}


def _compute_stats(dataset, split, names):
    from ._loader import Loader  # _loader imports this module
    by_name = {f["name"]: f for f in dataset.fields}
    sample_bytes = 0
    for name in names:
        f = by_name[name]
        elements = math.prod(256 if d is None else d for d in f["shape"])  # a guess where sizes vary
        sample_bytes += elements * np.dtype(_NUMPY_DTYPES.get(f["dtype"], "f8")).itemsize
    batch_size = max(1, min(1024, _STATS_BATCH_BYTES // max(1, sample_bytes)))
    moments = {name: _Moments() for name in names}
    loader = Loader(dataset, split=split, batch_size=batch_size, order="sequential", fields=names, output="numpy",
                    rank=0, world_size=1, prefetch=2)
    try:
        for batch in loader:
            for name in names:
                values, shapes = batch[name], batch.get(name + ".shape")
                if shapes is None:
                    moments[name].add(values)
                    continue
                for k, shape in enumerate(shapes):  # padded to the batch maximum: each sample's own box
                    moments[name].add(values[k][tuple(slice(0, int(d)) for d in shape)])
    finally:
        loader.close()
    return [moments[name].as_dict(name) for name in names if moments[name].n > 0]


_NUMPY_DTYPES = {"u8": "u1", "i8": "i1", "u16": "u2", "i16": "i2", "u32": "u4", "i32": "i4", "i64": "i8",
                 "f16": "f2", "f32": "f4", "f64": "f8"}
