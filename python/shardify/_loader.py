"""shardify.Loader: shuffled batches from shards, decoded by C++ threads, handed to torch
without a copy."""

from __future__ import annotations

import atexit
import inspect
import operator
import os
import re
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, NoReturn, Sequence

from . import _core
from ._ahead import TransformAhead
from ._checks import non_negative as _non_negative
from ._checks import positive as _positive
from ._dataset import Dataset

if TYPE_CHECKING:
    import torch

_OUTPUTS = ("torch", "numpy")
# The C++ loader's options are declared once, in the binding's table of them
# (python/src/loader_options.cpp, read through _core_options()). A keyword of Loader() that
# is one of them is passed on under its own name. These keywords are not: each sets the
# options listed (none: it stays in the Python layer, or goes to the Dataset it opens).
# test_loader.py checks the keywords and their defaults against the table and this mapping.
_KEYWORD_OPTIONS = {"dataset": (), "shuffle": ("order",), "device": ("cuda_device",),
                    "patch_fields": ("patch_image", "patch_label"), "transform": ("patch_margin",),
                    "transform_ahead": (), "output": (), "verify_checksums": (), "io": (), "cache_dir": (),
                    "cache_limit": (),
                    "augment": ("augment_nnunet", "augment_p", "augment_seed", "augment_image_pad", "augment_mask_mode",
                                "augment_ignore_label", "augment_mask_image_channels")}
# Options of the C++ loader set from where the Loader stands, rather than from a keyword.
_POSITION_OPTIONS = ("epochs", "resume")
# Epochs one C++ loader is opened for: far more than any run, so that batches of the next
# epoch are decoded while the current one ends. Opening costs nothing per epoch.
_EPOCH_SPAN = 1 << 20
# Keys of state_dict() that fix the order of batches; a state only loads where they match.
_ORDER_KEYS = ("split", "split_samples", "batch_size", "order", "seed", "world_size", "drop_last", "repeats",
               "window_shards", "patch", "patch_margin", "foreground_fraction")
# Decode threads allowed per core: more only adds contention (and a typo could start millions).
_THREADS_PER_CORE = 4
_IN_ONE_PROCESS = ("it already decodes with C++ threads: use it directly or in DataLoader(loader, "
                   "batch_size=None, num_workers=0), and create a Loader in each process that reads")
_STALE = ("this Loader iterator was superseded: a newer iter(loader), set_epoch(), load_state_dict() or close() "
          "took over. A Loader iterates one epoch at a time; the newer iteration goes on from where this one "
          "stopped, so use that one")


class Loader:
    """Batches of one split of a shard dataset, for a training loop.

    ``for batch in loader`` runs one epoch: each batch is a dict of tensors (numpy arrays
    with ``output="numpy"``): every loaded field as ``[B, ...]`` in its stored dtype
    (``int``/``float`` fields as int64/float64 ``[B]``), plus ``"index"``, the global
    sample indices (int64 ``[B]``, always on the CPU). Fields whose sample shapes vary are
    zero-padded to the batch maximum, and ``"<field>.shape"`` (int64 ``[B, rank]``) gives
    each sample's own shape. torch has no usable unsigned 16/32-bit type, so u16 and u32
    fields arrive widened to int32/int64 (one copy); every other field is zero-copy.

    C++ threads decode ``prefetch`` batches ahead into a ring of buffers; a batch's
    tensors share its buffer, which goes back to the ring when the last of them is freed.
    Keeping a batch keeps it valid (the ring grows by the batches you keep).

    Epochs: the Loader is a cursor over its batches. The first iteration is epoch 0; an
    iteration goes on from where the Loader stands to the end of that epoch, and after a
    complete epoch the next iteration is the next epoch (a new order). Breaking out of a
    loop and iterating again goes on with the batch after the last one handed out, which
    is what ``state_dict()`` says too (so ``next(iter(loader))`` moves the Loader by one
    batch). ``set_epoch(e)`` moves to the start of epoch ``e`` (or stays put when already
    in it); ``load_state_dict`` moves to a saved position. ``state_dict()`` taken at any
    point, loaded into a new Loader (also in a new process) gives exactly the batches the
    first would have produced next. One iteration at a time: ``iter(loader)`` takes over
    from any earlier iterator, which raises RuntimeError if it is advanced again.

    Processes: the decode threads belong to the process that created the Loader. It does
    not pickle, and in a forked child (e.g. a ``DataLoader`` worker, ``num_workers > 0``)
    iterating it raises RuntimeError: create the Loader in the process that reads, or
    keep ``num_workers=0``. A forked child may keep or drop batches and exits normally;
    its copy of the Loader is left alone (never joined or closed).

    Arguments (defaults just work):
      dataset: a path or a :class:`shardify.Dataset`.
      split: the split to read. batch_size: samples per batch.
      shuffle: a seeded permutation of the split every epoch (False: split order).
      seed: the order's seed (and the patch draws'). drop_last: drop the partial last batch.
      rank, world_size: this process's part of each epoch. Default: torch.distributed's when
        a process group is initialized, else the RANK / WORLD_SIZE environment variables,
        else 0 / 1. Every rank gets the same number of batches.
      batch_size: above the samples of a rank's epoch, one batch holds the whole epoch and
        only that much is allocated.
      threads: decode threads (0: all cores, divided by LOCAL_WORLD_SIZE when set); more
        than 4 per core (``os.cpu_count()``) raises ValueError.
      prefetch: batches decoded ahead. fields: names to load (default: every ndarray,
        int and float field; with ``patch``, the patch fields and every int and float field).
      device: "cpu", or "cuda" / "cuda:N": batches are copied to the GPU through pinned
        buffers on the Loader's own stream, ordered before the work you queue on the
        current torch stream, and the buffer is reused only after that stream has done
        the work queued before the batch was freed.
      patch: (D, H, W) for fields stored as [C, D, H, W], (H, W) for [C, H, W]: random
        training patches of the image (and mask) fields instead of whole samples, the last
        ``foreground_fraction`` of each batch centred on stored foreground (datasets
        converted with ``patch_size``).
      order: "shuffle", "sequential", "shard_windowed" or "class_balanced" (overrides
        shuffle). repeats: passes over the split per epoch. window_shards: shards mixed
        by "shard_windowed". patch_fields: (image field, label field or None).
        label_pad: label value outside a volume. pin_memory: pinned host buffers (default:
        only for device="cuda"; see docs/python.md before copying pinned batches yourself).
        output: "torch" or "numpy". verify_checksums: check every blob's XXH3. io: "mmap"
        or "pread", how shards are read; cache_dir, cache_limit: the local cache of an
        http(s):// dataset (see Dataset; these four when ``dataset`` is a path or URL). A
        cache_limit that cannot hold the shards of the batches in flight raises ValueError
        naming the smallest limit that can.
      transform: None, or a callable applied to every batch before it is handed out:
        called on the Loader's device after the copy, dict in, dict out (anything else
        raises TypeError). An object with ``bind(patch=...)`` is replaced by what that
        returns, with the patch tuple (or None), and the Dataset as ``dataset=`` when its
        bind takes that keyword; if the bound transform has a ``margin``
        (voxels per patch axis) and ``patch`` is set, patches are read with that margin
        (patch + 2 * margin per axis) for the transform to crop. A transform with
        ``wants_position = True`` is called as ``transform(batch, seed=, epoch=, step=)``,
        ``step`` being the batch's step within the epoch times world_size plus rank.
        shardify.transforms objects draw their random parameters from (seed, epoch, step,
        rank) so a resumed Loader yields the same augmented batches.
      augment: None, "nnunet", or a ``T.NnUnet`` (e.g. ``T.preset("nnunet")``), with
        ``patch``: nnU-Net's training augmentation applied to each patch by the Loader's
        C++ threads on the CPU, without the GIL, so that every core augments while Python
        trains. The same draws and, within float rounding, the same batches as
        ``transform=`` of that object (the image float32 [B, C, *patch], the mask in its
        dtype); "nnunet" is ``T.NnUnet(spatial_dims=len(patch))``. A ``transform`` then
        runs after it (and may not ask for a margin of its own).
      transform_ahead: batches the transform runs ahead of the loop, in a helper thread
        (on its own CUDA stream with device="cuda", ordered before the loop's stream as the
        copy is), so that next() takes a finished batch; 0 runs it inside next(). A
        transform that draws from torch's global generator (rather than from its position)
        then draws in another order relative to the model's own draws.
    """

    _torch_class = None

    def __new__(cls, *args: Any, **kwargs: Any) -> Loader:
        if cls is Loader and kwargs.get("output", "torch") == "torch":
            cls = _torch_loader_class()
        return super().__new__(cls)

    def __init__(self, dataset: str | os.PathLike[str] | Dataset, split: str = "train", batch_size: int = 64,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False, rank: int | None = None,
                 world_size: int | None = None, threads: int = 0, prefetch: int = 4,
                 fields: str | Sequence[str] | None = None, device: str | torch.device = "cpu",
                 patch: Sequence[int] | None = None, *, order: str | None = None, repeats: int = 1,
                 window_shards: int = 4, patch_fields: tuple[str, str | None] = ("image", "mask"),
                 foreground_fraction: float = 0.33, label_pad: int = -1, pin_memory: bool | None = None,
                 output: str = "torch", verify_checksums: bool = True, io: str = "mmap",
                 transform: Callable[..., dict[str, Any]] | None = None,
                 cache_dir: str | os.PathLike[str] | None = None, cache_limit: int | str | None = None,
                 transform_ahead: int = 2, augment: str | Any | None = None) -> None:
        if output not in _OUTPUTS:
            raise ValueError(f"output must be one of {_OUTPUTS}, got {output!r}")
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be callable (dict in, dict out), got {type(transform).__name__}")
        self._dataset = dataset if isinstance(dataset, Dataset) else Dataset(
            dataset, verify_checksums=verify_checksums, io=io, cache_dir=cache_dir, cache_limit=cache_limit)
        self._torch = _import_torch() if output == "torch" else None
        self._cuda = _parse_device(device, self._torch)
        opts = _core_options()
        opts["split"] = _check_split(self._dataset, split)
        opts["batch_size"] = _positive("batch_size", batch_size)
        opts["order"] = _core.sample_order(order if order is not None else ("shuffle" if shuffle else "sequential"))
        opts["seed"] = _non_negative("seed", seed)
        opts["drop_last"] = bool(drop_last)
        opts["rank"], opts["world_size"] = _rank_and_world(rank, world_size, self._torch)
        opts["threads"] = _threads(threads)
        opts["prefetch"] = _positive("prefetch", prefetch)
        opts["repeats"] = _positive("repeats", repeats)
        opts["window_shards"] = _positive("window_shards", window_shards)
        opts["fields"] = _check_fields(self._dataset, fields)
        opts["cuda_device"] = -1 if self._cuda is None else self._cuda
        opts["pin_memory"] = self._cuda is not None if pin_memory is None else bool(pin_memory)
        if patch is not None:
            _set_patch(opts, self._dataset, patch, patch_fields, foreground_fraction, label_pad)
            if fields is None:  # the patches, and the scalars (a case's label) that come with them
                opts["fields"] = _patch_batch_fields(self._dataset, opts)
        if augment is not None:
            _set_augment(opts, augment)
        self._transform, self._wants_position = _bind_transform(transform, opts, self._dataset)
        if augment is not None and opts["patch_margin"]:
            raise ValueError(f"transform {self._transform!r} asks for a margin around the patch, which augment= "
                             "already crops: give one of them, or a transform without a margin")
        self._transform_ahead = _non_negative("transform_ahead", transform_ahead)
        self._ahead = None  # the TransformAhead of the current iteration, if any
        self._opts = opts
        self._split_samples = self._dataset.splits[opts["split"]]
        self._widen = _widened_fields(self._dataset, opts) if self._torch is not None else {}
        self._convert = self._torch.utils.dlpack.from_dlpack if self._torch is not None else None
        self._core = None  # the C++ loader, opened at _core_pos by process _pid
        self._core_pos = None
        self._pid = os.getpid()
        self._generation = 0  # of the one iterator that may hand out batches
        self._pos = (0, 0)  # epoch and step of the next batch handed out (step < batches)
        self._open_core(0, 0)  # checks every option now, and starts decoding epoch 0

    # -- what a PyTorch user expects -------------------------------------------------------

    def __len__(self) -> int:
        """Batches per epoch for this rank."""
        return self._batches

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """The rest of the current epoch, from the batch after the last one handed out.
        Takes over from any earlier iterator of this Loader."""
        self._check_process()
        self._stop_ahead()
        epoch, step = self._pos
        if self._core is None or self._core_pos != (epoch, step):
            self._open_core(epoch, step)
        self._generation += 1
        return self._run(self._generation, epoch, step)

    def set_epoch(self, epoch: int) -> None:
        """Makes the next iteration epoch ``epoch`` (its own seeded order), from its first
        batch; when the Loader is already in that epoch (e.g. resumed there by
        ``load_state_dict``, or after a ``break``), it stays where it is."""
        epoch = _non_negative("epoch", epoch)
        if epoch != self._pos[0]:
            self._stop_ahead()
            self._pos = (epoch, 0)
            self._generation += 1

    @property
    def epoch(self) -> int:
        """The epoch of the next batch: during an iteration the current epoch, after a
        complete one the next (so after E whole epochs from the start, E)."""
        return self._pos[0]

    def state_dict(self) -> dict[str, Any]:
        """Where this Loader stands: the epoch and step of the next batch it would hand out
        (where the next iteration starts, also after a ``break``), with what fixes the
        order. A plain dict of numbers and strings (JSON-friendly)."""
        epoch, step = self._pos
        state = {"epoch": epoch, "step": step}
        state.update(self._order_identity())
        state["rank"] = self._opts["rank"]
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continues from ``state`` (from ``state_dict()``): the next iteration yields
        exactly the batches the saved Loader would have yielded next. Refuses a state whose
        order differs (batch size, seed, split, world size, ...) with ValueError."""
        try:
            epoch, step = int(state["epoch"]), int(state["step"])
        except (KeyError, TypeError, ValueError):
            raise ValueError("not a shardify.Loader state: it needs integer 'epoch' and 'step'") from None
        mine = self._order_identity()
        differ = [f"{k}: saved {state[k]!r}, here {mine[k]!r}" for k in _ORDER_KEYS
                  if k in state and _normalized(state[k]) != _normalized(mine[k])]
        if differ:
            raise ValueError("the saved Loader state has another batch order: " + "; ".join(differ))
        if epoch < 0 or not 0 <= step <= self._batches:
            raise ValueError(f"state epoch {epoch} step {step} is out of range ({self._batches} batches per epoch)")
        if step == self._batches:
            epoch, step = epoch + 1, 0
        self._stop_ahead()
        self._pos = (epoch, step)
        self._generation += 1

    def close(self) -> None:
        """Stops the decode threads now; batches already handed out stay valid. Iterating
        again reopens them (from where the Loader stands). Also runs at interpreter exit."""
        self._stop_ahead()
        if self._core is not None and self._pid == os.getpid():
            self._core.close()
        # In a forked child the C++ loader is only dropped: it then leaks its copy of the
        # parent's threads' state instead of waiting for threads the child does not have.
        self._core = None
        self._core_pos = None
        self._generation += 1

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def dataset(self) -> Dataset:
        return self._dataset

    @property
    def batch_size(self) -> int:
        return self._opts["batch_size"]

    @property
    def rank(self) -> int:
        return self._opts["rank"]

    @property
    def world_size(self) -> int:
        return self._opts["world_size"]

    @property
    def transform(self) -> Callable[..., dict[str, Any]] | None:
        """The transform applied to each batch, as bound to the patch (its ``margin`` is what
        patches are read with around them), or None."""
        return self._transform

    @property
    def ring_bytes(self) -> int:
        """Bytes of host batch buffers the C++ ring holds now."""
        return 0 if self._core is None else self._core.ring_bytes

    def __repr__(self) -> str:
        a = self._opts
        return (f"shardify.Loader({self._dataset._shown!r}, split={a['split']!r}, batch_size={a['batch_size']}, "
                f"order={a['order']!r}, rank={a['rank']}, world_size={a['world_size']}, batches={len(self)})")

    def __reduce__(self) -> NoReturn:
        raise TypeError("a shardify.Loader cannot be pickled (e.g. for DataLoader workers): " + _IN_ONE_PROCESS)

    # -- internals -------------------------------------------------------------------------

    def _check_process(self):
        if self._pid != os.getpid():
            raise RuntimeError(f"this shardify.Loader was created by process {self._pid}, and its decode threads "
                               f"do not exist in this forked child ({os.getpid()}), e.g. a DataLoader worker: "
                               + _IN_ONE_PROCESS)

    def _open_core(self, epoch, step):
        self._core = None  # stops the old workers first
        self._opts["resume"] = (epoch, step)
        self._opts["epochs"] = epoch + _EPOCH_SPAN
        self._core = _core.Loader(self._dataset._core, **self._opts)
        self._batches = self._core.batches_per_epoch
        self._core_pos = (epoch, step)
        _open_loaders.add(self)

    def _run(self, generation, epoch, step):
        if self._transform is not None and self._transform_ahead > 0:
            return self._run_ahead(generation, epoch, step)
        return self._run_inline(generation, epoch, step)

    def _run_ahead(self, generation, epoch, step):
        ahead = TransformAhead(self, self._core, epoch, step, self._transform_ahead)
        self._ahead = ahead
        try:
            while True:
                if generation != self._generation:
                    raise RuntimeError(_STALE)
                self._check_process()
                taken = ahead.take()
                if taken is None:
                    return
                batch, self._pos = taken
                yield batch
        finally:
            if self._ahead is ahead:
                self._stop_ahead()

    def _stop_ahead(self):
        ahead, self._ahead = self._ahead, None
        if ahead is not None and self._pid == os.getpid():  # a forked child has no helper thread
            ahead.stop()

    def _run_inline(self, generation, epoch, step):
        core, n = self._core, self._batches
        stream = 0
        while step < n:
            if generation != self._generation:
                raise RuntimeError(_STALE)
            self._check_process()
            if self._cuda is not None:
                stream = self._torch.cuda.current_stream(self._cuda).cuda_stream
            batch = core.next(self._convert, stream, self._torch is not None)
            if batch is None:
                return
            self._pos = self._core_pos = self._position_after(epoch, step)
            yield self._prepare(batch, epoch, step)
            step += 1

    def _position_after(self, epoch, step):
        """(epoch, step) of the batch after batch `step` of `epoch`: after an epoch's last
        batch, the next epoch's first (already decoding)."""
        return (epoch, step + 1) if step + 1 < self._batches else (epoch + 1, 0)

    def _prepare(self, batch, epoch, index):
        """The batch as handed out: widened fields, then the transform."""
        for name, bits in self._widen.items():
            if name in batch:
                batch[name] = _widen(self._torch, batch[name], bits)
        return batch if self._transform is None else self._apply_transform(batch, epoch, index)

    def _apply_transform(self, batch, epoch, index):
        a = self._opts
        if self._wants_position:
            out = self._transform(batch, seed=a["seed"], epoch=epoch, step=index * a["world_size"] + a["rank"])
        else:
            out = self._transform(batch)
        if not isinstance(out, dict):
            raise TypeError(f"transform {self._transform!r} returned {type(out).__name__}; it must return a dict "
                            "of batch fields")
        return out

    def _order_identity(self):
        a = self._opts
        return {"split": a["split"], "split_samples": self._split_samples, "batch_size": a["batch_size"],
                "order": a["order"], "seed": a["seed"], "world_size": a["world_size"], "drop_last": a["drop_last"],
                "repeats": a["repeats"], "window_shards": a["window_shards"], "patch": list(a["patch"]),
                "patch_margin": list(a["patch_margin"]) if a["patch_margin"] else None,
                "foreground_fraction": a["foreground_fraction"] if a["patch"] else None}


# Loaders with running threads, closed at exit so no thread outlives the interpreter.
_open_loaders = weakref.WeakSet()


@atexit.register
def _close_open_loaders():
    for loader in list(_open_loaders):
        if loader._pid == os.getpid():  # a forked child has none of its parent's threads
            loader.close()


def _torch_loader_class():
    """Loader that is also a torch IterableDataset (made on first use: torch loads lazily)."""
    if Loader._torch_class is None:
        from torch.utils.data import IterableDataset
        Loader._torch_class = type("Loader", (Loader, IterableDataset), {"__module__": __name__,
                                                                        "__doc__": Loader.__doc__})
    return Loader._torch_class


def _core_options():
    """The C++ loader's options at their defaults, {name: value}, a new dict each time."""
    return {name: default for name, default, _ in _core.loader_options()}


def _import_torch():
    try:
        import torch
        import torch.utils.dlpack
    except ImportError as e:
        raise ImportError("shardify.Loader(output='torch') needs torch; use output='numpy' without it") from e
    return torch


def _parse_device(device, torch):
    text = str(device)
    if text == "cpu":
        return None
    m = re.fullmatch(r"cuda(?::(\d+))?", text)
    if m is None:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    if torch is None:
        raise ValueError("device='cuda' needs output='torch'")
    if not torch.cuda.is_available():
        raise RuntimeError(f"device={text!r}: torch sees no CUDA device")
    if not _core.cuda_available():
        raise RuntimeError(f"device={text!r}: this shardify build has no CUDA runtime, or no device answers it")
    index = int(m.group(1)) if m.group(1) else torch.cuda.current_device()
    if index >= torch.cuda.device_count():
        raise ValueError(f"device={text!r}: there are {torch.cuda.device_count()} CUDA devices")
    return index


def _check_split(dataset, split):
    if split not in dataset.splits:
        raise ValueError(f"{dataset._shown} has no split {split!r}; it has {sorted(dataset.splits)}")
    return split


def _check_fields(dataset, fields):
    if fields is None:
        return []
    if isinstance(fields, str):
        fields = [fields]
    known = {f["name"]: f["kind"] for f in dataset.fields}
    for name in fields:
        if name not in known:
            raise ValueError(f"{dataset._shown} has no field {name!r}; it has {sorted(known)}")
        if known[name] in ("string", "bytes"):
            raise ValueError(f"field {name!r} is of kind {known[name]}, which is not batched")
    return list(fields)


def _rank_and_world(rank, world_size, torch):
    if rank is None or world_size is None:
        default_rank, default_world = 0, 1
        dist = getattr(torch, "distributed", None) if torch is not None else None
        if dist is not None and dist.is_available() and dist.is_initialized():
            default_rank, default_world = dist.get_rank(), dist.get_world_size()
        elif "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            try:
                default_rank, default_world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
            except ValueError:
                raise ValueError("RANK and WORLD_SIZE must be integers, got "
                                 f"{os.environ['RANK']!r} and {os.environ['WORLD_SIZE']!r}") from None
        rank = default_rank if rank is None else rank
        world_size = default_world if world_size is None else world_size
    world_size = _positive("world_size", world_size)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank!r}")
    return rank, world_size


def _threads(threads):
    threads = _non_negative("threads", threads)
    cores = os.cpu_count() or 1
    if threads > _THREADS_PER_CORE * cores:
        raise ValueError(f"threads={threads} is more than {_THREADS_PER_CORE} per core ({cores} cores here); "
                         "threads=0 uses every core")
    if threads == 0 and "LOCAL_WORLD_SIZE" in os.environ:
        try:
            local = max(1, int(os.environ["LOCAL_WORLD_SIZE"]))
        except ValueError:
            local = 1
        threads = max(1, (os.cpu_count() or 1) // local)
    return threads


def _set_patch(opts, dataset, patch, patch_fields, foreground_fraction, label_pad):
    try:
        size = [int(s) for s in patch]
    except (TypeError, ValueError):
        raise ValueError(f"patch must be a tuple of 2 or 3 positive sizes, got {patch!r}") from None
    if len(size) not in (2, 3) or min(size) < 1:
        raise ValueError(f"patch must be a tuple of 2 or 3 positive sizes, got {patch!r}")
    if not 0.0 <= float(foreground_fraction) <= 1.0:
        raise ValueError(f"foreground_fraction must be in [0, 1], got {foreground_fraction!r}")
    image, label = patch_fields
    by_name = {f["name"]: f for f in dataset.fields}
    if label is not None and label not in by_name and tuple(patch_fields) == ("image", "mask"):
        label = None  # the default pair on a dataset without masks: images only
    for name in (image, label):
        _check_patch_rank(by_name.get(name), tuple(size))
    opts["patch"] = size
    opts["patch_image"] = image
    opts["patch_label"] = label or ""
    opts["foreground_fraction"] = float(foreground_fraction)
    opts["label_pad"] = int(label_pad)


def _set_augment(opts, augment):
    """opts for the C++ augmentation of `augment` ("nnunet" or a T.NnUnet), after _set_patch."""
    from ._nnunet_transform import NnUnet
    if not opts["patch"]:
        raise ValueError("augment= needs patch=: the augmentation runs on the patches the Loader cuts")
    if isinstance(augment, str):
        if augment != "nnunet":
            raise ValueError(f"augment must be None, 'nnunet' or a T.NnUnet, got {augment!r}")
        augment = NnUnet(spatial_dims=len(opts["patch"]))
    if not isinstance(augment, NnUnet):
        raise TypeError(f"augment must be None, 'nnunet' or a T.NnUnet, got {type(augment).__name__}; other "
                        "transforms go to transform=")
    if augment.spatial_dims != len(opts["patch"]):
        raise ValueError(f"augment: NnUnet(spatial_dims={augment.spatial_dims}) cannot augment patches of "
                         f"{len(opts['patch'])} axes")
    if augment.label_pad != opts["label_pad"]:
        raise ValueError(f"augment: the NnUnet's label_pad {augment.label_pad} differs from the Loader's "
                         f"label_pad {opts['label_pad']}, which pads the patches")
    label = opts["patch_label"]
    if tuple(augment.keys) != (opts["patch_image"],) or (label and tuple(augment.mask_keys) != (label,)):
        raise ValueError(f"augment: the NnUnet's keys {tuple(augment.keys)} and mask_keys "
                         f"{tuple(augment.mask_keys)} must be the patch fields ({opts['patch_image']!r},) and "
                         f"({label!r},)")
    opts["augment_nnunet"] = True
    opts["augment_p"] = ",".join(f"{name}={float(p)!r}" for name, p in augment.p.items())
    opts["augment_seed"] = (opts["seed"] + augment.seed) & ((1 << 64) - 1)
    opts["augment_image_pad"] = augment.image_pad
    opts["augment_mask_mode"] = augment.mask_mode
    opts["augment_ignore_label"] = augment.ignore_label
    opts["augment_mask_image_channels"] = (None if augment.mask_image_channels is None
                                           else list(augment.mask_image_channels))


def _check_patch_rank(field, patch):
    """A field of shape [C, D, H, W] takes a 3-tuple, [C, H, W] a 2-tuple: one size per
    axis after the channel axis. (Missing fields are reported by the C++ loader.)"""
    if field is None or field["kind"] != "ndarray" or len(field["shape"]) == len(patch) + 1:
        return
    stored = "[" + ", ".join("?" if d is None else str(d) for d in field["shape"]) + "]"
    axes = len(field["shape"]) - 1
    wanted = {2: "a 2-tuple (H, W)", 3: "a 3-tuple (D, H, W)"}.get(axes, "no patch (it has no 2 or 3 spatial axes)")
    raise ValueError(f"patch={patch} does not fit field {field['name']!r} of stored shape {stored} "
                     f"(channels, then {axes} spatial axes): it takes {wanted}")


def _patch_batch_fields(dataset, opts):
    names = [opts["patch_image"]] + ([opts["patch_label"]] if opts["patch_label"] else [])
    return names + [f["name"] for f in dataset.fields if f["kind"] in ("int", "float") and f["name"] not in names]


def bind_transform(transform: Callable[..., Any], patch: tuple[int, ...] | None,
                   dataset: Dataset | None = None) -> Callable[..., Any]:
    """`transform` bound to a Loader's patch and dataset: by its ``bind(patch=...)``, which
    also gets ``dataset=`` when it takes one; a transform without bind as it is."""
    if not hasattr(transform, "bind"):
        return transform
    try:
        takes_dataset = "dataset" in inspect.signature(transform.bind).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        takes_dataset = False
    return transform.bind(patch=patch, **({"dataset": dataset} if takes_dataset else {}))


def _bind_transform(transform, opts, dataset):
    """The transform bound to the patch and dataset (sets opts["patch_margin"] from its
    margin), and whether it takes the batch's position."""
    if transform is None:
        return None, False
    patch = tuple(opts["patch"]) if opts["patch"] else None
    if hasattr(transform, "bind"):
        transform = bind_transform(transform, patch, dataset)
        if not callable(transform):
            raise TypeError(f"transform.bind() returned {type(transform).__name__}, which is not callable")
    margin = getattr(transform, "margin", None)
    if margin is not None and patch is not None:
        try:
            margin = tuple(operator.index(m) for m in margin)
        except TypeError:
            margin = ()
        if len(margin) != len(patch) or min(margin) < 0:
            raise ValueError(f"transform {transform!r} has margin {getattr(transform, 'margin')!r}: it must be "
                             f"{len(patch)} non-negative ints, one per patch axis")
        opts["patch_margin"] = list(margin)
    return transform, bool(getattr(transform, "wants_position", False))


def _widened_fields(dataset, opts):
    loaded = set(opts["fields"]) if opts["fields"] else None
    out = {}
    for f in dataset.fields:
        if f["kind"] == "ndarray" and f["dtype"] in ("u16", "u32") and (loaded is None or f["name"] in loaded):
            out[f["name"]] = 16 if f["dtype"] == "u16" else 32
    return out


def _widen(torch, tensor, bits):
    wide = tensor.to(torch.int32 if bits == 16 else torch.int64)
    return wide.bitwise_and_((1 << bits) - 1)


def _normalized(value):
    return list(value) if isinstance(value, tuple) else value
