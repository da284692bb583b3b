"""shardify.convert: the converter, with the command line's options as keyword arguments."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from . import _core


@dataclass
class ConvertSummary:
    """What convert() did. ``str(summary)`` is the summary the command line prints."""
    layout: str
    splits: dict[str, int]
    classes: list[str]
    fields: list[str]  # "image u8 [1, 28, 28]", ...
    samples: int
    shards: int
    bytes_in: int
    bytes_out: int
    seconds: float
    dry_run: bool
    dictionary: bool
    codec: str
    ignored_files: int
    warnings: list[str] = field(default_factory=list)
    preprocessing: list[str] = field(default_factory=list)  # what was promoted, cropped, normalized, resampled
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (input, reason) pairs
    part: str | None = None         # "2/4" when one part was converted (part="2/4")
    part_complete: bool = False     # that part was complete (or merged) already: nothing written
    uploaded_to: str | None = None  # "s3://bucket/prefix" when dst was one
    uploaded_objects: int = 0       # the objects put there (shards, then the manifest)
    text: str = ""

    def __str__(self) -> str:
        return self.text


@dataclass
class MergeSummary:
    """What merge() did. ``str(summary)`` is the summary ``shardify merge`` prints."""
    parts: int
    samples: int
    shards: int
    splits: dict[str, int]
    shards_rewritten: int  # copied with new sample numbers (inputs skipped in an earlier part)
    bytes_rewritten: int
    skipped: int           # inputs listed in skipped.tsv
    already_merged: bool   # dst already was the dataset merged from its parts
    text: str = ""

    def __str__(self) -> str:
        return self.text


# What convert() and write() take as progress: True (a line on stderr), False or None
# (nothing), or f(phase, done, total, bytes_in).
Progress = Union[bool, None, Callable[[str, int, int, int], object]]


def convert(src: str | os.PathLike[str], dst: str | os.PathLike[str], *, progress: Progress = True,
            **options: Any) -> ConvertSummary:
    """Converts the dataset at ``src`` into shards at ``dst`` (a directory, or
    ``s3://bucket/prefix``: converted locally, then uploaded, the manifest last; see
    docs/remote.md); returns a ConvertSummary.

    Every option of the ``shardify`` command line is a keyword argument, its name with
    ``_`` for ``-``: ``layout="folder"``, ``split="train=0.8,val=0.2"`` (or a dict),
    ``level=9``, ``codec="raw"``, ``shard_size="64M"``, ``classes=[...]``, ``patch_size=(128, 128, 128)``,
    ``overwrite=True``, ``dry_run=True``, ``dict=False`` (``--no-dict``), ``shuffle=False``
    (``--no-shuffle``), ``fsync=False``, ``on_error="skip"``, ``threads=4``, ``seed=1``,
    ``part="2/4"`` (or ``"auto"``; then ``merge(dst)`` once every part is done);
    preprocessing: ``spacing={"x": 0.8, "y": 0.8, "z": 1.5}`` (or ``1.0`` for every axis, or
    ``"auto"``), ``crop="nonzero"``,
    ``normalize="ct"`` (or ``"ct,zscore"``, one per channel), ``dtype="f16"``,
    ``resample_image="linear"``, ``resample_mask="nearest"``.
    The list with their help is in ``shardify.convert_options()``.

    ``progress``: True prints a line to sys.stderr about once a second, False nothing, or a
    callable ``f(phase, done, total, bytes_in)`` called at the start of each phase ("scan",
    "inspect", "convert") and about ten times a second. Ctrl-C (or an exception raised by
    the callable) cancels cleanly: nothing that looks like a dataset is left at ``dst``
    (unless the conversion had already completed), and the exception propagates.

    Errors: bad options raise ValueError, a missing source FileNotFoundError, an existing
    dataset without ``overwrite=True`` FileExistsError, a destination another process is
    writing BlockingIOError, a bad input OSError or shardify.CorruptionError naming the file.
    """
    if not _core.HAVE_CONVERT:
        raise RuntimeError("this shardify build has no converter (it was built without ITK)")
    args = [os.fspath(src), "-o", os.fspath(dst)] + _flag_args(options)
    callback = _ConsoleProgress() if progress is True else (None if progress in (False, None) else progress)
    if callback is not None and not callable(callback):
        raise TypeError(f"progress must be True, False or a callable, not {type(progress).__name__}")
    try:
        result = _core.convert(args, callback)
    finally:
        if isinstance(callback, _ConsoleProgress):
            callback.done()
    return ConvertSummary(**result)


def merge(dst: str | os.PathLike[str], *, fsync: bool = True) -> MergeSummary:
    """Makes ``dst`` the dataset from its parts, once every ``convert(src, dst, part="K/N")``
    (K = 1..N) is done, like ``shardify merge DST``; returns a MergeSummary.

    Checks that the parts are all there, once each, from one source with the same options;
    moves their shards into ``dst`` (nothing is re-encoded); combines splits, statistics and
    skipped.tsv; writes the manifest last and removes ``dst/parts``. Safe to run again after
    an interruption; on a ``dst`` already merged it reports ``already_merged``. ``dst`` may
    be ``"s3://bucket/prefix"`` (parts converted there): the parts are fetched into a
    staging folder, merged and put back, the manifest last, and their objects deleted.

    Errors: a missing or incomplete part FileNotFoundError, a part being written
    BlockingIOError, parts of different conversions ValueError, a ``dst`` holding a dataset
    not converted in parts FileExistsError, a damaged part shardify.CorruptionError; each
    names the part.
    """
    if not _core.HAVE_CONVERT:
        raise RuntimeError("this shardify build has no converter (it was built without ITK)")
    return MergeSummary(**_core.merge(os.fspath(dst), bool(fsync)))


def convert_options() -> dict[str, str]:
    """``{keyword: help}`` for every keyword argument of convert()."""
    if not _core.HAVE_CONVERT:
        return {}
    out = {}
    for name, takes_value, help_text in _core.convert_flags():
        if name in ("output", "quiet"):
            continue
        key = name.replace("-", "_")
        if not takes_value and key.startswith("no_"):
            key = key[3:]
            help_text = f"False: {help_text}"
        out.setdefault(key, help_text)
    return out


def _flag_args(options):
    flags = {name: takes_value for name, takes_value, _ in _core.convert_flags()}
    args = []
    for key, value in options.items():
        name = key.replace("_", "-")
        if name in ("output", "quiet") or (name not in flags and f"no-{name}" not in flags):
            raise TypeError(f"convert() got an unexpected keyword argument {key!r}; "
                            f"the options are {sorted(convert_options())}")
        if value is None:
            continue
        if isinstance(value, bool):
            if name in flags and not flags[name]:
                if value:
                    args.append(f"--{name}")
            elif f"no-{name}" in flags:
                if not value:
                    args.append(f"--no-{name}")
            else:
                raise ValueError(f"{key} takes a value, not {value!r}")
            continue
        if name in flags and not flags[name]:
            raise ValueError(f"{key} must be True or False, got {value!r}")
        args += [f"--{name}", _flag_value(key, value)]
    return args


def _flag_value(key, value):
    if isinstance(value, dict):  # split={"train": 0.8, "val": 0.2}
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, (tuple, list)):
        if key == "patch_size":
            return "x".join(str(int(v)) for v in value)
        return ",".join(str(v) for v in value)
    return str(value)


class _ConsoleProgress:
    """Prints 'shardify: phase done/total' to sys.stderr at most once a second."""

    def __init__(self):
        self._last = 0.0
        self._start = time.monotonic()
        self._shown = False

    def __call__(self, phase, done, total, bytes_in):
        now = time.monotonic()
        if now - self._last < 1.0 and done != total:
            return
        self._last = now
        share = f" ({100.0 * done / total:.0f}%)" if total else ""
        print(f"\rshardify: {phase} {done}/{total}{share}, {now - self._start:.1f} s", end="", file=sys.stderr,
              flush=True)
        self._shown = True

    def done(self):
        if self._shown:
            print(file=sys.stderr, flush=True)
