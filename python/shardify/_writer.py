"""shardify.Writer and shardify.write: any samples into a shard dataset."""

from __future__ import annotations

import numbers
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from . import _core, _write_record

if TYPE_CHECKING:
    from types import TracebackType

    from ._convert import Progress

_SCALARS = ("int", "float", "string", "bytes")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_FG_LOCATIONS = "mask.fg_locations"
_DTYPES = {"uint8": "u8", "int8": "i8", "uint16": "u16", "int16": "i16", "uint32": "u32", "int32": "i32",
           "float16": "f16", "float32": "f32", "float64": "f64", "int64": "i64"}


def _size_bytes(size):
    """256 * 2**20, "256M", "64K", "1G" -> bytes."""
    if isinstance(size, numbers.Integral):
        return int(size)
    text = str(size).strip().upper().rstrip("B").rstrip("I")
    unit = text[-1:] if text[-1:] in _UNITS else ""
    try:
        return int(float(text[:len(text) - len(unit)]) * _UNITS[unit])
    except ValueError:
        raise ValueError(f"shard_size must be bytes or a size like '256M', got {size!r}") from None


def _dtype_name(dtype):
    """shardify's name of a dtype: "u16", np.uint16 and "uint16" give "u16" (but note
    that numpy reads the string "u8" as uint64; here it is shardify's u8, uint8)."""
    if isinstance(dtype, str) and dtype in _DTYPES.values():
        return dtype
    dtype = np.dtype(dtype)
    names = _DTYPES
    if dtype.name not in names or not dtype.isnative:
        raise ValueError(f"dtype {dtype} cannot be stored; the dtypes are {sorted(names.values())} in native byte order")
    return names[dtype.name]


def _field(name, spec):
    """A field given as "int" | "float" | "string" | "bytes" | (dtype, shape) | dict."""
    if isinstance(spec, str):
        if spec not in _SCALARS:
            raise ValueError(f"field {name!r}: {spec!r} is not a kind; give one of {_SCALARS} or (dtype, shape)")
        return {"name": name, "kind": spec}
    if isinstance(spec, dict) and spec.get("kind", "ndarray") != "ndarray":
        out = _field(name, spec["kind"])
        out.update((k, v) for k, v in spec.items() if k in ("meta", "finite"))
        out["meta"] = list(dict(out.get("meta", {})).items())
        return out
    if isinstance(spec, dict):
        spec = dict(spec)
        spec.pop("kind", None)
        dtype, shape = spec.pop("dtype"), spec.pop("shape")
    elif isinstance(spec, (tuple, list)) and len(spec) == 2:
        dtype, shape, spec = spec[0], spec[1], {}
    else:
        raise ValueError(f"field {name!r}: expected a kind or (dtype, shape), got {spec!r}")
    out = {"name": name, "kind": "ndarray", "dtype": _dtype_name(dtype),
           "shape": [-1 if d is None else int(d) for d in shape]}
    for key in ("chunks", "meta", "finite"):
        if key in spec:
            out[key] = spec.pop(key)
    out["meta"] = [(str(k), str(v)) for k, v in dict(out.get("meta", {})).items()]
    if spec:
        raise ValueError(f"field {name!r}: unknown keys {sorted(spec)}")
    return out


def infer_fields(sample):
    """The schema of ``sample`` as Writer's ``fields``: arrays keep their dtype and shape,
    Python and numpy numbers become int or float, str string, bytes bytes."""
    out = {}
    for name, value in sample.items():
        if isinstance(value, np.ndarray):
            out[name] = (value.dtype, value.shape)
        elif isinstance(value, (bool, numbers.Integral)):
            out[name] = "int"
        elif isinstance(value, numbers.Real):
            out[name] = "float"
        elif isinstance(value, str):
            out[name] = "string"
        elif isinstance(value, (bytes, bytearray, memoryview)):
            out[name] = "bytes"
        else:
            raise ValueError(f"field {name!r}: cannot infer a field from {type(value).__name__}; give fields=")
    return out


def _chunked(fields, chunks):
    """Applies ``chunks``: {field: shape}, or one spatial shape for every ndarray field of
    that rank or one more (a leading channel axis gets 1)."""
    if chunks is None:
        return
    by_name = {f["name"]: f for f in fields}
    if isinstance(chunks, dict):
        for name, shape in chunks.items():
            if name not in by_name or by_name[name]["kind"] != "ndarray":
                raise ValueError(f"chunks for {name!r}, which is not an ndarray field")
            by_name[name]["chunks"] = [int(d) for d in shape]
        return
    chunks = [int(d) for d in chunks]
    for f in fields:
        if f["kind"] == "ndarray" and "chunks" not in f and len(f["shape"]) in (len(chunks), len(chunks) + 1):
            f["chunks"] = [1] * (len(f["shape"]) - len(chunks)) + chunks


_ITEMSIZE = {name: np.dtype(numpy_name).itemsize for numpy_name, name in _DTYPES.items()}
# A size of an array that varies per sample, when a chunk shape is chosen from the patch:
# only the patch then bounds the chunk, as for the largest case of shardify --patch-size.
_UNBOUNDED = 1 << 30


def _chunked_for_patch(fields, patch):
    """Chunks as ``shardify --patch-size`` chooses them (format/chunking.h), for every
    ndarray field without chunks of the patch's spatial rank or one more (a leading channel
    axis gets patch 1)."""
    patch = list(patch)
    for f in fields:
        if f["kind"] != "ndarray" or "chunks" in f or len(f["shape"]) not in (len(patch), len(patch) + 1):
            continue
        shape = [d if d >= 1 else _UNBOUNDED for d in f["shape"]]
        full = [1] * (len(shape) - len(patch)) + patch
        f["chunks"] = _core.choose_chunk_shape(shape, full, _ITEMSIZE[f["dtype"]])


class Writer:
    """Writes samples into a shard dataset at ``path``, the one the converter writes.

        with shardify.Writer("out", fields={"image": ("u16", (1, None, None)), "label": "int"},
                             classes=["benign", "malignant"]) as w:
            for rec in records:
                w.write({"image": arr, "label": 1}, split="train")

    ``fields``: {name: spec}, in the order the dataset stores them; a spec is ``"int"``,
    ``"float"``, ``"string"``, ``"bytes"``, or ``(dtype, shape)`` for an array, None for a
    size that varies per sample, or a dict with ``dtype``, ``shape`` and optionally
    ``chunks``, ``meta`` ({key: value} strings) and ``finite`` (refuse NaN and infinity;
    on by default for geometry fields such as ``image.spacing``), or a dict with ``kind``
    (a scalar kind), ``meta`` and ``finite``. Omitted: inferred from
    the first sample (arrays keep its exact shape). Fields named by the conventions
    (``image``, ``label``, ``mask``, ``path``, ``<f>.spacing``, ``.origin``, ``.direction``,
    ``.nifti_header``; docs/fields.md) get their role, so ``shardtool`` and the Loader
    treat them as a converted dataset's.

    ``patch_size``: the spatial size of the training patches, e.g. ``(64, 64, 64)``: each
    array of that rank (or one more, a channel axis in front) is chunked as ``shardify
    --patch-size`` chunks it (format/chunking.h: about a quarter of the patch per axis,
    grown to at least 64 KiB a chunk), so that a random patch decodes little more than
    itself; reading patches is then as fast as from the converter's datasets. Prefer it
    to ``chunks``: a chunk as large as the patch makes a patch decode up to 8 of them.
    ``chunks``: a spatial chunk shape such as ``(32, 32, 32)`` for every array of that rank
    (a channel axis in front gets 1), or {field: chunk shape}; it wins over ``patch_size``
    for the fields it names. ``meta``: {field: {key:
    value}}. ``fg_locations``: with a chunked ``mask``, store ``mask.fg_locations`` with
    at most this many voxels per class and sample (default 10000 when ``mask`` is
    chunked; 0 for none), as ``shardify --patch-size`` does.

    ``classes``: names of the ``label`` values. ``shard_size``: bytes or "256M".
    ``codec``: "zstd" or "raw"; ``level``: zstd's level (1..19). ``dict``: train a zstd
    dictionary for each array field of one fixed shape of at most 64 KiB a sample (not
    chunked) from the first 2,000 samples, which are held until then; by default (None)
    when at least 1,000 samples are written, as ``shardify --dict`` decides; True also
    from fewer; False never. Not for a part (``part=``, ``shardify.write``): the parts of
    one dataset would need one dictionary. ``stats``: per-field
    min/max/mean/std in the manifest. ``overwrite``: replace a dataset at ``path``
    atomically (the old one stays readable until close()). ``threads``: encode threads
    (default: every core). ``part``: ``(index, count, first_sample, samples)`` to write
    one part of a dataset written in parts (then ``shardify.merge``). ``provenance``:
    {key: value}, text added to the manifest's provenance options.

    write() checks the sample and copies its arrays once, then returns; encoding,
    checksums and writing run on C++ threads without the GIL. The manifest is written last
    at close() (or at the end of the ``with`` block). An exception inside the block, or a
    writer dropped without close(), removes what was written: no dataset that looks
    complete is left. The same samples in the same order give the same bytes.

    Errors: a sample that does not fit the schema (a missing or unknown field, an array of
    another dtype, rank or size, a value in a list or a number that the field's dtype does
    not hold exactly, such as 300 for u8, NaN in a finite field, a split that resumes)
    raises ValueError naming the sample, the field and the value, before anything of it is
    written; an existing
    dataset without ``overwrite`` FileExistsError; a destination another process writes
    BlockingIOError.
    """

    def __init__(self, path: str | os.PathLike[str], fields: Mapping[str, Any] | None = None, *,
                 classes: Iterable[str] | None = None, shard_size: int | str = "256M", codec: str = "zstd",
                 level: int = 3, dict: bool | None = None,
                 chunks: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
                 patch_size: Sequence[int] | None = None,
                 meta: Mapping[str, Mapping[str, Any]] | None = None, fg_locations: int | None = None,
                 stats: bool = True, overwrite: bool = False, fsync: bool = True, threads: int = 0,
                 part: Sequence[int] | None = None, source: str | None = None,
                 provenance: Mapping[str, Any] | None = None) -> None:
        self._path = os.fspath(path)
        self._chunks, self._meta, self._fg = chunks, meta or {}, fg_locations
        self._patch = None if patch_size is None else tuple(int(d) for d in patch_size)
        if self._patch is not None and (not self._patch or min(self._patch) < 1):
            raise ValueError(f"patch_size must be positive sizes, got {self._patch}")
        self._options = {"shard_bytes": _size_bytes(shard_size), "codec": codec, "level": int(level),
                         "dict": None if dict is None else bool(dict),
                         "stats": bool(stats), "overwrite": bool(overwrite), "fsync": bool(fsync),
                         "threads": int(threads), "classes": list(classes or []), "source": source or "",
                         "part": None if part is None else [int(x) for x in part],
                         "provenance": [(str(k), str(v)) for k, v in (provenance or {}).items()]}
        self._core = None
        self._summary = None
        self._fields = None
        if fields is not None:
            self._open(fields)

    def _open(self, fields):
        specs = [_field(name, spec) for name, spec in fields.items()]
        _chunked(specs, self._chunks)
        if self._patch is not None:
            _chunked_for_patch(specs, self._patch)
        for name, kv in self._meta.items():
            match = [f for f in specs if f["name"] == name]
            if not match:
                raise ValueError(f"meta for {name!r}, which is not a field")
            match[0]["meta"] = match[0]["meta"] + [(str(k), str(v)) for k, v in kv.items()]
        options = dict(self._options)
        mask = next((f for f in specs if f["name"] == "mask" and f["kind"] == "ndarray"), None)
        fg = self._fg if self._fg is not None else (10000 if mask is not None and "chunks" in mask else 0)
        if fg and not any(f["name"] == _FG_LOCATIONS for f in specs):
            if mask is None:
                raise ValueError("fg_locations needs an ndarray field 'mask'")
            specs.append({"name": _FG_LOCATIONS, "kind": "ndarray", "dtype": "i32",
                          "shape": [-1, len(mask["shape"])], "computed": True,
                          "meta": [("max_per_class", str(int(fg)))]})
            options["fg_locations"] = int(fg)
        self._core = _core.Writer(self._path, specs, options)
        self._fields = specs

    @property
    def path(self) -> str:
        return self._path

    @property
    def fields(self) -> list[dict[str, Any]]:
        """The schema: [{name, kind, dtype, shape, ...}], as written into the manifest."""
        return [dict(f) for f in self._fields or []]

    @property
    def samples_written(self) -> int:
        return 0 if self._core is None else self._core.samples_written

    def write(self, sample: Mapping[str, Any], split: str = "train") -> None:
        """Queues ``sample`` ({field: value}) in ``split``. Samples of a split form one
        contiguous run."""
        if self._summary is not None:
            raise ValueError("write() after close()")
        if self._core is None:
            self._open(infer_fields(sample))
        self._core.write(sample, split)

    def close(self) -> dict[str, Any]:
        """Writes what is queued and the manifest; returns {samples, shards, bytes,
        dictionaries} (the fields that got a dictionary).
        Closing twice returns the same."""
        if self._summary is None:
            if self._core is None:
                raise ValueError("close() before any write(): the schema is unknown (give fields=)")
            self._summary = self._core.close()
        return self._summary

    def abort(self) -> None:
        """Stops and removes what was written; a dataset this one was to replace stays."""
        if self._core is not None and self._summary is None:
            self._core.abort()
            self._summary = {}

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False

    def __del__(self) -> None:
        if getattr(self, "_core", None) is not None and self._summary is None:
            self._core.abort()



def write(path: str | os.PathLike[str], fn: Callable[[Any], Mapping[str, Any] | None], inputs: Iterable[Any], *,
          workers: int = 0, split: str | Sequence[str] | Callable[[Any], str] = "train", parts: int | None = None,
          progress: Progress = True, start_method: str | None = None, fields: Mapping[str, Any] | None = None,
          key: str | None = None, overwrite: bool = False, **writer_options: Any) -> dict[str, Any]:
    """Writes ``fn(input)`` for every input into a shard dataset at ``path``, in parallel;
    returns {samples, skipped, parts, resumed, shards}.

        shardify.write("out", load, paths, workers=4, split="train", classes=[...])

    ``fn(input)`` returns a sample dict, as Writer.write takes it, or None to skip the
    input. ``inputs`` is cut into ``parts`` contiguous slices (default: one per 10,000
    inputs, at least 16, at most one per input), written by ``workers`` processes
    (default: every core), each slice into one part with its own Writer, then merged into
    ``path`` (``shardify.merge``). Processes, not threads: ``fn`` is Python code (decoding,
    reading files), which runs in parallel only in separate interpreters. They are forked
    where the platform can (so ``fn`` may be a lambda or closure); ``start_method="spawn"``
    needs ``fn`` and ``inputs`` to pickle. ``workers=1`` writes in this process.

    Resuming: parts are complete once written, so running the same call again after a
    crash or an exception writes only the parts that were not complete, then merges. Each
    part records what it was made from: the inputs (by their repr()), ``fn`` (by its
    qualified name; a lambda by its code too), the split names, ``fields`` and the Writer
    options. A part made otherwise is not resumed: FileExistsError says what differs.
    ``key``: any text, recorded instead of the inputs and ``fn`` (for inputs whose repr()
    changes from run to run); a part is then resumed by a run with the same key.
    ``overwrite=True`` discards the parts an earlier run left and writes them all again;
    a dataset already merged at ``path`` is never written over: remove it first.

    ``split``: one name, or a name per input (a sequence, or a callable ``split(input)``);
    each split must form one contiguous run of inputs. ``fields``: as for Writer; when
    omitted, inferred from the first sample (``fn`` runs once more for it).
    ``progress``: True prints a line to stderr about once a second, or a callable
    ``f(phase, done, total, 0)``. Other keyword arguments are Writer's (``classes``,
    ``shard_size``, ``codec``, ``chunks``, ...). The output depends only on the inputs,
    ``fn``, ``parts`` and the options, not on ``workers``.

    The worker processes end when the calling process ends, killed included.

    Errors: an exception raised by ``fn`` propagates (with a note naming the input) after
    the other workers stop; parts or a dataset at ``path`` made by another run raise
    FileExistsError, naming what differs.
    """
    from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
    import multiprocessing
    path = os.fspath(path)
    inputs = list(inputs)
    n = len(inputs)
    splits = _split_names(split, inputs)
    if writer_options.get("part") is not None:
        raise ValueError("write() writes parts itself: no part=")
    if fields is None:
        fields = _infer_from(fn, inputs)
    canonical = [_field(name, spec) for name, spec in fields.items()]
    record = _write_record.make(fn, inputs, splits, canonical, writer_options, key)
    if os.path.exists(os.path.join(path, "manifest.sfm")):
        return _merged_before(path, record, overwrite)
    if overwrite:
        _core.remove_parts(path)
    count = int(parts) if parts else min(n, max(16, -(-n // 10000)))
    if count < 1:
        raise ValueError("write() needs at least one input")
    plan = []
    for k in range(count):
        first = k * (n // count) + min(k, n % count)
        plan.append((k + 1, count, first, n // count + (1 if k < n % count else 0)))
    todo = [p for p in plan if not _part_done(path, p, record)]
    report = _progress_callback(progress)
    method = start_method or ("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    context = multiprocessing.get_context(method)
    done = context.Value("q", n - sum(p[3] for p in todo))  # its lock of the context the workers start in
    provenance = {**dict(writer_options.get("provenance") or {}), **record}
    job = (path, fn, inputs, splits, fields, dict(writer_options, provenance=provenance), done)
    written = 0
    try:
        workers = int(workers) or os.cpu_count() or 1
        if workers == 1 or len(todo) <= 1:
            _start_worker(job)
            for p in todo:
                _write_part(p)
                _report(report, done, n)
        else:
            parent = 0 if method == "forkserver" else os.getpid()  # 0: the forkserver starts them
            with ProcessPoolExecutor(min(workers, len(todo)), mp_context=context, initializer=_start_worker,
                                     initargs=(job, parent)) as pool:
                pending = {pool.submit(_write_part, p) for p in todo}
                while pending:
                    finished, pending = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
                    for f in finished:
                        if f.exception() is not None:
                            for other in pending:
                                other.cancel()
                            raise f.exception()
                    _report(report, done, n)
        merged = _core.merge_parts(path)
        written = merged["samples"]
    finally:
        if hasattr(report, "done"):
            report.done()
    return dict(samples=written, skipped=n - written, parts=count, resumed=count - len(todo), shards=merged["shards"])


def _split_names(split, inputs):
    if isinstance(split, str):
        return split
    names = [split(x) for x in inputs] if callable(split) else list(split)
    if len(names) != len(inputs):
        raise ValueError(f"split names {len(names)} splits for {len(inputs)} inputs")
    seen = set()
    for i, name in enumerate(names):
        if name in seen and name != names[i - 1]:
            raise ValueError(f"input {i}: split {name!r} must be one contiguous run of inputs; it resumes here")
        seen.add(name)
    return names


def _infer_from(fn, inputs):
    for x in inputs:
        sample = fn(x)
        if sample is not None:
            return infer_fields(sample)
    raise ValueError("fn returned None for every input: nothing to write")


def _merged_before(path, record, overwrite):
    """``path`` holds a dataset: the one this run merged before (its summary), else
    FileExistsError."""
    from ._dataset import Dataset
    found = Dataset(path).provenance["options"]
    differs = _write_record.differences(found, record)
    if differs or overwrite:
        what = (" not written by shardify.write" if not _write_record.written_by_write(found) else
                f" written by another run ({differs})" if differs else "")
        raise FileExistsError(f"{path}: already holds a dataset{what}; parts are never written over a dataset "
                              "(overwrite=True discards parts only): remove it first")
    merged = _core.merge_parts(path)  # finishes removing the parts of a merge interrupted
    return dict(samples=merged["samples"], skipped=None, parts=merged["parts"], resumed=merged["parts"],
                shards=merged["shards"])


def _part_done(path, part, record):
    """Whether ``part`` is complete; FileExistsError where another run wrote it."""
    state = _core.part_state(path, part[0], part[1])
    if state is None:
        return False
    differs = _write_record.differences(state[3], record)
    if tuple(state[:2]) != part[2:]:
        slices = f"inputs {state[0]}..{state[0] + state[1] - 1} there, {part[2]}..{part[2] + part[3] - 1} in this call"
        differs = "; ".join(filter(None, [slices, differs]))
    if differs:
        raise FileExistsError(f"{path}: part {part[0]}/{part[1]} was written by another run ({differs}); resume with "
                              "the same inputs, fn and options, or pass overwrite=True to discard the parts and write "
                              "them all again")
    return True


_JOB = None


def _start_worker(job, parent=None):
    """Sets up a worker process (``parent``: the pid of the process that started it, 0 when
    a forkserver did), or this process for ``workers=1`` (``parent`` None)."""
    global _JOB
    _JOB = job
    if parent is not None:
        _end_with_parent(parent)


def _end_with_parent(parent):
    """Ends this worker when the process that started it ends, killed included, so that none
    is left waiting for work: at once on Linux (PR_SET_PDEATHSIG), elsewhere within half a
    second (its parent id changes). A forkserver's worker watches the end of its pipe from
    the caller instead: the forkserver lives as long as its workers."""
    if sys.platform.startswith("linux"):
        import ctypes
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if parent == 0:
        import multiprocessing
        wait = multiprocessing.parent_process().join
    elif os.getppid() != parent:  # it ended before this worker could watch it
        os._exit(1)
    else:
        def wait():
            while os.getppid() == parent:
                time.sleep(0.5)

    def watch():
        wait()
        os._exit(1)

    threading.Thread(target=watch, name="shardify-write-parent", daemon=True).start()


def _write_part(part):
    path, fn, inputs, splits, fields, options, done = _JOB
    first, samples = part[2], part[3]
    options = dict(options, threads=options.get("threads", 1))  # the processes fill the cores
    with Writer(path, fields, part=part, **options) as w:
        for i in range(first, first + samples):
            try:
                sample = fn(inputs[i])
            except Exception as e:
                e.add_note(f"shardify.write: input {i} ({inputs[i]!r:.80})")
                raise
            if sample is not None:
                w.write(sample, split=splits if isinstance(splits, str) else splits[i])
            if (i - first) % 64 == 63:
                with done.get_lock():
                    done.value += 64
    with done.get_lock():
        done.value += samples % 64
    return part


def _progress_callback(progress):
    from ._convert import _ConsoleProgress
    if progress is True:
        return _ConsoleProgress()
    if progress in (False, None) or callable(progress):
        return progress or None
    raise TypeError(f"progress must be True, False or a callable, not {type(progress).__name__}")


def _report(report, done, total):
    if report is not None:
        report("write", done.value, total, 0)
