"""shardify.Loader: batches as torch tensors without copies, epochs, ranks, resume, patches,
the transform hook."""

import gc
import inspect
import json
import os
import re
import resource
import threading

import numpy as np
import pytest

import shardify
from conftest import run_python

torch = pytest.importorskip("torch")


def indices(loader):
    return [b["index"].tolist() for b in loader]


def test_batches_hold_the_samples_in_their_stored_dtype(fmnist):
    ds = shardify.Dataset(fmnist)
    loader = shardify.Loader(fmnist, split="train", batch_size=64, seed=3)
    train = ds.splits["train"]
    assert len(loader) == (train + 63) // 64
    seen = []
    for batch in loader:
        image, label, index = batch["image"], batch["label"], batch["index"]
        assert image.dtype == torch.uint8 and image.shape[1:] == (1, 28, 28)
        assert label.dtype == torch.int64 and index.dtype == torch.int64
        assert image.shape[0] == label.shape[0] == index.shape[0]
        for k in (0, len(index) - 1):
            sample = ds[int(index[k])]
            assert np.array_equal(image[k].numpy(), sample["image"]) and int(label[k]) == sample["label"]
        seen += index.tolist()
    assert sorted(seen) == list(range(train))  # every sample once
    assert isinstance(loader, torch.utils.data.IterableDataset)


def test_epochs_seeds_and_set_epoch(fmnist):
    a = shardify.Loader(fmnist, batch_size=32, seed=1)
    first, second = indices(a), indices(a)  # the second iteration is epoch 1
    assert first != second and sorted(sum(first, [])) == sorted(sum(second, []))
    assert indices(shardify.Loader(fmnist, batch_size=32, seed=1)) == first
    assert indices(shardify.Loader(fmnist, batch_size=32, seed=2)) != first
    a.set_epoch(0)
    assert indices(a) == first
    a.set_epoch(1)
    assert indices(a) == second
    sequential = indices(shardify.Loader(fmnist, batch_size=32, shuffle=False))
    assert sum(sequential, []) == list(range(sum(len(b) for b in sequential)))


def test_breaking_out_and_iterating_again_goes_on_where_state_dict_says(fmnist):
    loader = shardify.Loader(fmnist, batch_size=32, seed=5)
    full = indices(loader)
    loader.set_epoch(0)
    for k, batch in enumerate(loader):
        if k == 3:
            break
    state = loader.state_dict()
    assert (state["epoch"], state["step"]) == (0, 4)
    resumed = shardify.Loader(fmnist, batch_size=32, seed=5)
    resumed.load_state_dict(state)
    assert indices(loader) == full[4:] == indices(resumed)
    assert (loader.epoch, loader.state_dict()["step"]) == (1, 0)
    next(iter(loader))  # one batch handed out: the Loader moved by one
    loader.set_epoch(1)  # already in epoch 1: stays there
    assert loader.state_dict()["step"] == 1
    loader.set_epoch(0)
    assert indices(loader) == full


def test_a_new_iteration_takes_over_and_the_old_iterator_raises(fmnist):
    loader = shardify.Loader(fmnist, batch_size=32, seed=5)
    full = indices(shardify.Loader(fmnist, batch_size=32, seed=5))
    first = iter(loader)
    taken = [next(first)["index"].tolist() for _ in range(2)]
    second = iter(loader)
    with pytest.raises(RuntimeError, match="one epoch at a time"):
        next(first)  # instead of ending the first loop early without a word
    assert taken + [b["index"].tolist() for b in second] == full


def test_ranks_split_each_epoch(fmnist):
    train = shardify.Dataset(fmnist).splits["train"]
    parts = [indices(shardify.Loader(fmnist, batch_size=16, seed=9, rank=r, world_size=3)) for r in range(3)]
    assert len({len(p) for p in parts}) == 1  # equal batch counts
    union = set(sum(sum(parts, []), []))
    assert union == set(range(train))
    loader = shardify.Loader(fmnist, batch_size=16, seed=9, rank=1, world_size=3, drop_last=True)
    assert all(len(b) == 16 for b in indices(loader))


def test_rank_and_world_size_come_from_the_environment(fmnist):
    result = run_python(f"""
        import shardify
        loader = shardify.Loader({fmnist!r}, batch_size=16)
        print(loader.rank, loader.world_size)
        """, env={"RANK": "2", "WORLD_SIZE": "4"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2", "4"]


def test_state_dict_resumes_mid_epoch_exactly_also_in_a_new_process(fmnist):
    options = dict(batch_size=40, seed=11)
    reference = shardify.Loader(fmnist, **options)
    full = indices(reference) + indices(reference)  # epochs 0 and 1
    n = len(reference)
    for cut in (0, 3, n - 1, n, n + 2):
        loader = shardify.Loader(fmnist, **options)
        seen = []
        while len(seen) < cut:
            for batch in loader:
                seen.append(batch["index"].tolist())
                if len(seen) == cut:
                    break
        state = json.loads(json.dumps(loader.state_dict()))
        resumed = shardify.Loader(fmnist, **options)
        resumed.load_state_dict(state)
        rest = indices(resumed)
        if cut % n != 0 or cut == 0:
            rest += indices(resumed)
        assert seen + rest[:len(full) - cut] == full, f"cut {cut}"
    state = shardify.Loader(fmnist, **options).state_dict()
    state["step"] = 3
    result = run_python(f"""
        import json, shardify
        loader = shardify.Loader({fmnist!r}, batch_size=40, seed=11)
        loader.load_state_dict(json.loads({json.dumps(state)!r}))
        print(json.dumps([b["index"].tolist() for b in loader]))
        """)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == full[3:n]


def test_load_state_dict_refuses_another_order(fmnist):
    state = shardify.Loader(fmnist, batch_size=40, seed=11).state_dict()
    with pytest.raises(ValueError, match="batch_size: saved 40, here 32"):
        shardify.Loader(fmnist, batch_size=32, seed=11).load_state_dict(state)
    with pytest.raises(ValueError, match="seed"):
        shardify.Loader(fmnist, batch_size=40, seed=12).load_state_dict(state)
    with pytest.raises(ValueError, match="epoch"):
        shardify.Loader(fmnist, batch_size=40, seed=11).load_state_dict({"step": 1})


def test_tensors_share_the_ring_slots(fmnist):
    loader = shardify.Loader(fmnist, batch_size=16, prefetch=2, seed=0)
    pointers = set()
    for epoch in range(3):
        for batch in loader:
            image = batch["image"]
            assert image.data_ptr() % 256 == 0  # the ring's alignment: not a torch allocation
            pointers.add(image.data_ptr())
    assert len(pointers) <= 3  # prefetch + 1 slots, reused for 90 batches: no copies
    assert loader.ring_bytes < 3 * 16 * (784 + 8 + 8) + 3 * 3 * 256


def test_kept_batches_stay_valid_and_list_works(fmnist):
    loader = shardify.Loader(fmnist, batch_size=64, prefetch=1, seed=4)
    kept = list(loader)  # more batches than slots: the ring grows instead of failing
    assert len(kept) == len(loader)
    copies = [b["image"].clone() for b in kept]
    for _ in range(2):
        for _batch in loader:
            pass
    for batch, copy in zip(kept, copies):
        assert torch.equal(batch["image"], copy)
    assert len({b["image"].data_ptr() for b in kept}) == len(kept)


def test_resident_memory_stays_bounded_over_many_epochs(fmnist):
    loader = shardify.Loader(fmnist, batch_size=32, seed=0)
    for _ in range(10):  # warm up allocator caches
        for batch in loader:
            batch["image"].float().mean()
    gc.collect()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(60):
        for batch in loader:
            batch["image"].float().mean()
    gc.collect()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert after - before < 16 * 1024, f"peak RSS grew by {after - before} KiB over 60 epochs"


def test_dataloader_with_batch_size_none_passes_batches_through(fmnist):
    loader = shardify.Loader(fmnist, batch_size=32, seed=2)
    direct = indices(loader)
    loader.set_epoch(0)
    wrapped = torch.utils.data.DataLoader(loader, batch_size=None)
    assert len(wrapped) == len(loader)
    assert [b["index"].tolist() for b in wrapped] == direct
    with pytest.raises(TypeError, match="num_workers=0"):
        import pickle
        pickle.dumps(loader)


def test_numpy_output_needs_no_torch(fmnist):
    result = run_python(f"""
        import sys, shardify
        loader = shardify.Loader({fmnist!r}, batch_size=50, output="numpy")
        batch = next(iter(loader))
        print(type(batch["image"]).__name__, batch["image"].dtype, batch["image"].shape, "torch" in sys.modules)
        """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ndarray", "uint8", "(50,", "1,", "28,", "28)", "False"]


def test_unsigned_16_bit_images_arrive_widened(tmp_path):
    from PIL import Image
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 65536, size=(5, 12, 10), dtype=np.uint16)
    pixels[0, 0, 0] = 65535
    (tmp_path / "src" / "a").mkdir(parents=True)
    for i, p in enumerate(pixels):
        Image.fromarray(p).save(tmp_path / "src" / "a" / f"{i}.png")
    shardify.convert(tmp_path / "src", tmp_path / "ds", progress=False)
    batch = next(iter(shardify.Loader(tmp_path / "ds", batch_size=5, shuffle=False)))
    assert batch["image"].dtype == torch.int32
    assert np.array_equal(batch["image"][:, 0].numpy(), pixels.astype(np.int32))
    raw = next(iter(shardify.Loader(tmp_path / "ds", batch_size=5, shuffle=False, output="numpy")))
    assert raw["image"].dtype == np.uint16 and np.array_equal(raw["image"][:, 0], pixels)


def test_patches_of_volumes(volumes):
    path, arrays = volumes
    loader = shardify.Loader(path, batch_size=6, patch=(16, 16, 16), foreground_fraction=0.5, seed=1)
    assert set(next(iter(loader))) == {"image", "mask", "label", "index"}  # the case's scalars come along
    for batch in loader:
        assert batch["image"].shape == (6, 1, 16, 16, 16) and batch["image"].dtype == torch.int16
        assert batch["mask"].shape == (6, 1, 16, 16, 16)
        for k in range(3, 6):  # the last half is centred on foreground
            assert (batch["mask"][k] > 0).any()
    again = shardify.Loader(path, batch_size=6, patch=(16, 16, 16), foreground_fraction=0.5, seed=1, threads=1)
    loader.set_epoch(0)
    a, b = next(iter(loader)), next(iter(again))
    assert torch.equal(a["image"], b["image"]) and torch.equal(a["mask"], b["mask"])


def test_a_patch_of_the_wrong_rank_names_the_field_and_its_stored_shape(fmnist, volumes):
    with pytest.raises(ValueError, match=r"patch=\(8, 8, 8\).*field 'image' of stored shape \[1, 28, 28\].*2-tuple"):
        shardify.Loader(fmnist, patch=(8, 8, 8))
    path, _ = volumes
    with pytest.raises(ValueError, match=r"field 'image' of stored shape \[1, \?, 24, 28\].*3-tuple"):
        shardify.Loader(path, patch=(8, 8))
    ds = shardify.Dataset(fmnist)
    batch = next(iter(shardify.Loader(ds, patch=(8, 8), batch_size=16, seed=2)))
    assert set(batch) == {"image", "label", "index"} and batch["image"].shape == (16, 1, 8, 8)
    assert batch["label"].tolist() == [ds[i]["label"] for i in batch["index"].tolist()]


def test_a_batch_size_beyond_the_split_gives_one_batch_and_allocates_only_that(fmnist):
    train = shardify.Dataset(fmnist).splits["train"]
    for batch_size in (10**6, 10**9):
        loader = shardify.Loader(fmnist, batch_size=batch_size, seed=0, prefetch=1)
        batches = indices(loader)
        assert len(loader) == 1 and len(batches) == 1 and sorted(batches[0]) == list(range(train))
        assert loader.ring_bytes <= 2 * (train * (784 + 8) + 2 * 4096)  # two slots of one split each
        loader.close()


def test_bad_arguments_raise_clear_errors(fmnist, tmp_path):
    with pytest.raises(ValueError, match="no split 'valid'.*'train', 'val'"):
        shardify.Loader(fmnist, split="valid")
    with pytest.raises(ValueError, match="no field 'img'"):
        shardify.Loader(fmnist, fields=["img"])
    with pytest.raises(ValueError, match="not batched"):
        shardify.Loader(fmnist, fields=["path"])
    with pytest.raises(ValueError, match="batch_size"):
        shardify.Loader(fmnist, batch_size=0)
    with pytest.raises(ValueError, match="rank"):
        shardify.Loader(fmnist, rank=2, world_size=2)
    with pytest.raises(ValueError, match="device"):
        shardify.Loader(fmnist, device="tpu")
    with pytest.raises(ValueError, match="patch"):
        shardify.Loader(fmnist, patch=(0, 4))
    with pytest.raises(ValueError, match="order must be one of sequential, shuffle, shard_windowed, class_balanced, "
                                         "got 'random'"):
        shardify.Loader(fmnist, order="random")
    with pytest.raises(ValueError, match="threads=.* per core"):
        shardify.Loader(fmnist, threads=4 * os.cpu_count() + 1)
    with pytest.raises(FileNotFoundError):
        shardify.Loader(tmp_path / "missing")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):
            shardify.Loader(fmnist, device="cuda")


def test_the_keywords_agree_with_the_options_of_the_cpp_loader():
    # Each keyword of Loader() is an option of the binding's table under the same name and
    # default (None: the Python layer picks it), or says in _KEYWORD_OPTIONS what it sets;
    # each option of the table is set by a keyword or from the Loader's position.
    from shardify import _loader
    table = {name: default for name, default, _ in shardify._core.loader_options()}
    params = {k: p.default for k, p in inspect.signature(_loader.Loader.__init__).parameters.items() if k != "self"}
    mapped = _loader._KEYWORD_OPTIONS
    passed = [k for k in params if k not in mapped]
    positioned = list(_loader._POSITION_OPTIONS)
    set_by_mapped = [o for options in mapped.values() for o in options]
    unknown = [k for k in passed if k not in table]
    assert unknown == [], "add these to the table in python/src/loader_options.cpp, or to _KEYWORD_OPTIONS"
    stale = [k for k in mapped if k not in params or k in table]
    assert stale == [], "_KEYWORD_OPTIONS lists these, which are no keyword of Loader() or are options"
    missing = [o for o in set_by_mapped + positioned if o not in table]
    assert missing == [], "_KEYWORD_OPTIONS or _POSITION_OPTIONS name options the table does not have"
    unset = [o for o in table if o not in passed + set_by_mapped + positioned]
    assert unset == [], "no keyword of Loader() sets these options"
    differ = {k: (params[k], table[k]) for k in passed
              if params[k] is not None and (type(params[k]), params[k]) != (type(table[k]), table[k])}
    assert differ == {}, "the defaults of these keywords differ from the options' (keyword, table)"
    undocumented = [k for k in params if not re.search(rf"\b{k}\b", _loader.Loader.__doc__)]
    assert undocumented == [], "the docstring of Loader does not mention these keywords"


def test_orders_have_the_readers_names_and_shardtrains_aliases_read_as_them(fmnist):
    assert shardify._core.sample_order("windowed") == "shard_windowed"
    assert shardify._core.sample_order("class_balanced") == "class_balanced"
    loader = shardify.Loader(fmnist, order="balanced", batch_size=16, prefetch=1, output="numpy")
    assert loader.state_dict()["order"] == "class_balanced"
    loader.close()
    with pytest.raises(TypeError, match="order takes a str, got 3"):
        shardify.Loader(fmnist, order=3)


def test_the_cpp_loader_names_a_bad_option(fmnist):
    ds = shardify.Dataset(fmnist)._core
    with pytest.raises(TypeError, match="unknown Loader option batchsize; the options are split, batch_size, "):
        shardify._core.Loader(ds, batchsize=3)
    with pytest.raises(TypeError, match="Loader option batch_size takes a non-negative int, got -1"):
        shardify._core.Loader(ds, batch_size=-1)
    with pytest.raises(TypeError, match="Loader option patch takes a list of int, got 'x'"):
        shardify._core.Loader(ds, patch="x")
    with pytest.raises(TypeError, match=r"Loader option resume takes None or \(epoch, step\), got 3"):
        shardify._core.Loader(ds, resume=3)
    with pytest.raises(ValueError, match="order must be one of sequential, shuffle, .*got 'random'"):
        shardify._core.Loader(ds, order="random")
    loader = shardify._core.Loader(ds, batch_size=10, order="sequential", drop_last=True, resume=(0, 2))
    assert loader.batches_per_epoch == shardify.Dataset(fmnist).splits["train"] // 10
    assert loader.next(None)["index"].tolist() == list(range(20, 30))
    loader.close()


def test_a_corrupt_sample_raises_corruption_error_naming_it(fmnist, tmp_path):
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(fmnist, copy)
    shard = sorted(p for p in os.listdir(copy) if p.startswith("shard-"))[1]
    with open(copy / shard, "r+b") as f:
        f.seek(200)
        byte = f.read(1)
        f.seek(200)
        f.write(bytes([byte[0] ^ 0x55]))
    loader = shardify.Loader(copy, batch_size=16, shuffle=False)
    with pytest.raises(shardify.CorruptionError, match=f"{shard}.*|sample"):
        for _batch in loader:
            pass


def test_ctrl_c_stops_an_epoch_while_waiting_for_a_batch(fmnist):
    # Batches of 50,000 samples on one thread: the consumer spends its time waiting in C++.
    result = run_python(f"""
        import os, signal, threading, shardify
        loader = shardify.Loader({fmnist!r}, batch_size=50000, repeats=5000, threads=1, prefetch=1)
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        taken = 0
        try:
            for batch in loader:
                taken += 1
        except KeyboardInterrupt:
            print("interrupted after", taken, "of", len(loader), "batches")
        """)
    assert result.returncode == 0, result.stderr
    words = result.stdout.split()
    assert words[0] == "interrupted" and int(words[2]) < int(words[4])


def test_a_truncated_shard_raises_instead_of_crashing(fmnist, tmp_path):
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(fmnist, copy)
    shard = sorted(p for p in os.listdir(copy) if p.startswith("shard-"))[0]
    with open(copy / shard, "r+b") as f:
        f.truncate(os.path.getsize(copy / shard) // 2)
    with pytest.raises(shardify.CorruptionError, match=shard):
        for _batch in shardify.Loader(copy, batch_size=16, shuffle=False):
            pass


def test_close_stops_the_threads_and_iterating_reopens(fmnist):
    with shardify.Loader(fmnist, batch_size=64, seed=8) as loader:
        first = indices(loader)
        batch = next(iter(loader))
    assert loader.ring_bytes == 0
    assert batch["image"].sum() >= 0  # a batch handed out before close stays valid
    loader.set_epoch(0)
    assert indices(loader) == first


def test_raw_shards_and_pread_give_the_same_batches(fmnist, fmnist_png, tmp_path):
    raw = tmp_path / "raw"
    summary = shardify.convert(fmnist_png, raw, split={"train": 0.8, "val": 0.2}, progress=False, shard_size="64K",
                               codec="raw")
    assert summary.codec == "raw" and "stored raw" in str(summary)

    def run(path, io):
        return [(b["index"].tolist(), b["image"].numpy().tobytes(), b["label"].tolist())
                for b in shardify.Loader(path, batch_size=32, seed=4, io=io)]

    expected = run(fmnist, "mmap")
    assert run(fmnist, "pread") == expected
    assert run(raw, "mmap") == expected
    assert run(raw, "pread") == expected
    ds = shardify.Dataset(raw, io="pread")
    assert np.array_equal(ds[5]["image"], shardify.Dataset(fmnist)[5]["image"])
    with pytest.raises(ValueError, match="io"):
        shardify.Loader(fmnist, io="nfs")


@pytest.mark.parametrize("io", ["mmap", "pread"])
def test_a_shard_truncated_while_it_is_read_raises_naming_it(fmnist, tmp_path, io):
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(fmnist, copy)
    shard = sorted(p for p in os.listdir(copy) if p.startswith("shard-"))[0]
    ds = shardify.Dataset(copy, io=io)
    loader = shardify.Loader(ds, batch_size=16, shuffle=False, prefetch=1, threads=1)
    batches = iter(loader)
    next(batches)
    assert ds[40]["image"].shape == (1, 28, 28)
    os.truncate(copy / shard, 4096)  # the shard is open (mapped, with io="mmap")
    with pytest.raises(OSError, match=shard):
        ds[40]  # an io error, or corruption once reopened: never a crash
    with pytest.raises(OSError, match=shard):
        for _batch in batches:
            pass


class Recording:
    """A transform as the Loader sees one: bound to the patch, with a margin to read around
    it (cropped here), told the position of each batch."""
    wants_position = True

    def __init__(self, margin=None):
        self.margin, self.patch, self.calls, self.seen = margin, "unbound", [], []

    def bind(self, patch):
        self.bound = Recording(self.margin)
        self.bound.patch = patch
        return self.bound

    def __call__(self, batch, *, seed, epoch, step):
        self.calls.append((seed, epoch, step))
        self.seen.append(tuple(batch["image"].shape))
        out = dict(batch)
        if self.margin:
            for key in ("image", "mask"):
                inner = tuple(slice(m, n - m) for m, n in zip(self.margin, batch[key].shape[2:]))
                out[key] = batch[key][(slice(None), slice(None)) + inner]
        return out


def test_a_transform_is_bound_to_the_patch_and_reads_its_margin(volumes):
    path, _ = volumes
    options = dict(batch_size=4, patch=(8, 8, 8), seed=3, foreground_fraction=0.5)
    transform = Recording(margin=(2, 3, 1))
    loader = shardify.Loader(path, transform=transform, **options)
    assert transform.bound.patch == (8, 8, 8) and loader.transform is transform.bound
    plain = shardify.Loader(path, **options)
    for batch, expected in zip(loader, plain):
        assert batch["image"].shape[1:] == (1, 8, 8, 8)
        assert torch.equal(batch["image"], expected["image"]) and torch.equal(batch["mask"], expected["mask"])
    assert transform.bound.seen == [(4, 1, 12, 14, 10), (2, 1, 12, 14, 10)]  # patch + 2 * margin
    assert loader.state_dict()["patch_margin"] == [2, 3, 1]
    with pytest.raises(ValueError, match="patch_margin"):
        plain.load_state_dict(loader.state_dict())
    with pytest.raises(ValueError, match="margin"):
        shardify.Loader(path, transform=Recording(margin=(2, 2)), **options)


def test_a_transform_gets_each_batch_position_also_after_a_resume(fmnist):
    options = dict(batch_size=32, seed=7, rank=1, world_size=2)
    whole = Recording()
    loader = shardify.Loader(fmnist, transform=whole, **options)
    assert whole.bound.patch is None
    n = len(loader)
    indices(loader), indices(loader)
    assert whole.bound.calls == [(7, e, s * 2 + 1) for e in (0, 1) for s in range(n)]
    first = shardify.Loader(fmnist, transform=Recording(), **options)
    for k, _batch in enumerate(first):
        if k == 2:
            break
    resumed_transform = Recording()
    resumed = shardify.Loader(fmnist, transform=resumed_transform, **options)
    resumed.load_state_dict(first.state_dict())
    indices(resumed)
    assert resumed_transform.bound.calls == whole.bound.calls[3:n]


def test_a_transform_must_be_callable_and_return_a_dict(fmnist):
    with pytest.raises(TypeError, match="callable"):
        shardify.Loader(fmnist, transform="flip")
    calls = []
    plain = shardify.Loader(fmnist, batch_size=32, transform=lambda b: calls.append(len(b)) or {"x": b["image"]})
    assert set(next(iter(plain))) == {"x"} and set(calls) == {3}  # called with the batch alone
    broken = shardify.Loader(fmnist, batch_size=32, transform=lambda b: list(b))
    with pytest.raises(TypeError, match="transform <function.*returned list"):
        next(iter(broken))


class Marking:
    """A transform that adds the batch's position and the thread it ran in; raises at one step."""
    wants_position = True

    def __init__(self, fail_at=None):
        self.fail_at = fail_at

    def __call__(self, batch, seed, epoch, step):
        if step == self.fail_at:
            raise ValueError(f"no batch {step} today")
        out = dict(batch)
        out["image"] = batch["image"].float() + 1  # a new tensor, as augmentation makes
        out["at"] = (epoch, step, threading.current_thread().name)
        return out


def helper_threads():
    return [t for t in threading.enumerate() if t.name == "shardify-transform-ahead"]


def test_the_transform_runs_ahead_in_a_helper_thread_and_gives_the_same_batches(fmnist):
    options = dict(batch_size=32, seed=4)
    inline = shardify.Loader(fmnist, transform=Marking(), transform_ahead=0, **options)
    ahead = shardify.Loader(fmnist, transform=Marking(), **options)
    for _ in range(2):  # two epochs
        for a, b in zip(inline, ahead, strict=True):
            assert torch.equal(a["index"], b["index"]) and torch.equal(a["image"], b["image"])
            assert a["at"][:2] == b["at"][:2]
            assert a["at"][2] == threading.current_thread().name and b["at"][2] == "shardify-transform-ahead"
    assert ahead.epoch == 2 and not helper_threads()  # an epoch's helper ends with it


def test_breaking_out_of_a_loop_that_runs_ahead_loses_no_batch(fmnist):
    options = dict(batch_size=32, seed=6)
    full = indices(shardify.Loader(fmnist, transform=Marking(), transform_ahead=0, **options))
    loader = shardify.Loader(fmnist, transform=Marking(), transform_ahead=3, **options)
    taken = []
    for k, batch in enumerate(loader):
        taken.append(batch["index"].tolist())
        if k == 2:
            break
    assert not helper_threads()  # the loop's end stopped it, and dropped what it queued
    state = loader.state_dict()
    assert (state["epoch"], state["step"]) == (0, 3)
    resumed = shardify.Loader(fmnist, transform=Marking(), **options)
    resumed.load_state_dict(state)
    assert taken + indices(loader) == full and indices(resumed) == full[3:]


def test_an_error_in_a_transform_running_ahead_reaches_the_loop(fmnist):
    loader = shardify.Loader(fmnist, batch_size=32, transform=Marking(fail_at=2))
    seen = []
    with pytest.raises(ValueError, match="no batch 2 today"):
        for batch in loader:
            seen.append(batch["at"][1])
    assert seen == [0, 1] and loader.state_dict()["step"] == 3  # past the batch that failed, as inline
    assert not helper_threads()
    with pytest.raises(ValueError, match="transform_ahead"):
        shardify.Loader(fmnist, transform=Marking(), transform_ahead=-1)


def test_close_and_a_new_iteration_stop_the_helper(fmnist):
    loader = shardify.Loader(fmnist, batch_size=32, transform=Marking())
    first = iter(loader)
    next(first)
    assert len(helper_threads()) == 1
    second = iter(loader)
    assert not helper_threads()
    with pytest.raises(RuntimeError, match="one epoch at a time"):
        next(first)
    assert next(second)["at"][1] == 1
    loader.close()
    assert not helper_threads()
