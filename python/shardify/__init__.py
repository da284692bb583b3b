"""shardify: image datasets as checksummed, memory-mapped shards, read by C++ threads.

    import shardify
    shardify.convert("fmnist-png", "fmnist")          # once: PNG/JPEG/NIfTI/idx -> shards
    ds = shardify.Dataset("fmnist")                   # random access, numpy arrays
    loader = shardify.Loader("fmnist", batch_size=64) # batches of torch tensors, no workers
    with shardify.Writer("mine") as w:                # any samples: w.write({"image": a, "label": 1})
    for batch in loader:
        x, y = batch["image"], batch["label"]

torch is imported only when a Loader yields tensors; Dataset needs numpy alone.
"""

from ._core import CorruptionError, __version__, cuda_available
from ._convert import ConvertSummary, MergeSummary, convert, convert_options, merge
from ._dataset import Dataset
from ._loader import Loader
from ._writer import Writer, write

__all__ = ["Dataset", "Loader", "Writer", "write", "convert", "convert_options", "merge", "ConvertSummary", "MergeSummary", "CorruptionError", "cuda_available", "__version__"]
