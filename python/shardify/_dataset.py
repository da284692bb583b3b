"""shardify.Dataset: random access to a shard dataset, as numpy arrays and Python values."""

import os

from . import _core

_IO_MODES = ("mmap", "pread")


class Dataset:
    """A shard dataset directory (``manifest.sfm`` + ``shard-*.sfs``), opened for reading.

    ``ds[i]`` decodes sample ``i`` (any split) into a dict: ndarray fields as new numpy
    arrays in their stored dtype and shape, ``int``/``float`` fields as Python numbers,
    ``string`` fields as ``str`` and ``bytes`` fields as ``bytes``. Only the manifest is
    read when opening; each shard is opened and fully checked the first time it is used.
    ``io="mmap"`` (default) reads shards through a memory mapping, ``io="pread"`` with
    pread(2) (no page faults: for NFS or FUSE); both give the same values and checks.

    It is a map-style dataset: ``torch.utils.data.DataLoader(ds, ...)`` works, worker
    processes included (a pickled Dataset reopens its path; in a forked child it reopens
    itself on first use, since a Loader of the parent may have been reading it at the
    fork). For training, prefer :class:`shardify.Loader`, which batches with C++ threads
    and needs no workers.

    Errors: a missing dataset raises ``FileNotFoundError``; bytes that disagree with the
    format or their checksum raise :class:`shardify.CorruptionError` (an ``OSError``)
    naming the file, sample and field; an index out of range raises ``IndexError``. A shard
    truncated or rewritten while it is read raises an ``OSError`` (or CorruptionError)
    naming it, never a crash.
    """

    def __init__(self, path, *, verify_checksums=True, max_open_shards=64, io="mmap"):
        path = os.fspath(path)
        if max_open_shards < 1:
            raise ValueError(f"max_open_shards must be >= 1, got {max_open_shards}")
        if io not in _IO_MODES:
            raise ValueError(f"io must be one of {_IO_MODES}, got {io!r}")
        self._options = dict(verify_checksums=bool(verify_checksums), max_open_shards=int(max_open_shards), io=io)
        self._opened = _core.Dataset(path, **self._options)
        self._pid = os.getpid()
        self._path = path

    @property
    def _core(self):
        """The C++ dataset, reopened in a forked child: a thread of the parent (a Loader's)
        may have held its shard cache's lock at the fork, and no thread will release it
        in the child."""
        if self._pid != os.getpid():
            self._opened = _core.Dataset(self._path, **self._options)
            self._pid = os.getpid()
        return self._opened

    @property
    def path(self):
        return self._path

    def __len__(self):
        return self._core.num_samples

    def __getitem__(self, index):
        return self.get(index)

    def get(self, index, fields=None):
        """Sample ``index`` as a dict; ``fields`` (names) limits what is decoded."""
        index = self._index(index)
        return self._core.sample(index, None if fields is None else list(fields))

    def region(self, index, field, start, size):
        """The box ``[start, start + size)`` of ndarray ``field`` of sample ``index``.

        Only the chunks the box touches are decompressed (chunked fields, written with
        ``patch_size``); parts outside the array are zero."""
        index = self._index(index)
        return self._core.region(index, field, [int(s) for s in start], [int(s) for s in size])

    @property
    def splits(self):
        """``{name: number of samples}``, in dataset order."""
        return {name: count for name, _, count in self._core.splits()}

    def split_range(self, name):
        """The global sample indices of split ``name``, as a ``range``."""
        for split, first, count in self._core.splits():
            if split == name:
                return range(first, first + count)
        raise ValueError(f"{self._path} has no split {name!r}; it has {sorted(self.splits)}")

    @property
    def classes(self):
        """Class names: label ``i`` is ``classes[i]``."""
        return self._core.classes()

    @property
    def fields(self):
        """One dict per field: name, kind, dtype, shape (``None`` where it varies),
        chunk_shape and meta."""
        return self._core.fields()

    @property
    def provenance(self):
        return self._core.provenance()

    @property
    def stats(self):
        """Per-field statistics recorded by the converter (min, max, mean, std, count)."""
        return self._core.stats()

    @property
    def format_version(self):
        return self._core.format_version

    def __repr__(self):
        return f"shardify.Dataset({self._path!r}, samples={len(self)}, splits={self.splits})"

    def __getstate__(self):
        return {"path": self._path, "options": self._options}

    def __setstate__(self, state):
        self.__init__(state["path"], **state["options"])

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
