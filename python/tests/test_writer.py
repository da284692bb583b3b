"""shardify.Writer: any samples into the dataset the converter writes."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import shardify

SHARDTOOL = os.path.join(os.path.dirname(os.path.abspath(shardify.__file__)), "..", "..", "bin", "shardtool")

FIELDS = {"image": ("u16", (1, None, None)), "label": "int", "age": "float", "path": "string"}


def samples(n=40, seed=0):
    rng = np.random.default_rng(seed)
    for i in range(n):
        yield {"image": rng.integers(0, 4000, size=(1, 8 + i % 3, 12), dtype=np.uint16), "label": i % 2,
               "age": 20.0 + i, "path": f"case{i:03d}"}


def write(path, items, **options):
    with shardify.Writer(path, fields=FIELDS, classes=["benign", "malignant"], shard_size="4K", **options) as w:
        for i, s in enumerate(items):
            w.write(s, split="train" if i < 30 else "val")
    return w


def shardtool(*args):
    out = subprocess.run([SHARDTOOL, *map(str, args)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def files(path):
    return {name: (path / name).read_bytes() for name in sorted(os.listdir(path)) if not name.startswith(".")}


def test_samples_read_back_with_splits_classes_roles_and_stats(tmp_path):
    items = list(samples())
    summary = write(tmp_path / "ds", items).close()
    assert summary["samples"] == 40 and summary["shards"] > 1
    ds = shardify.Dataset(tmp_path / "ds")
    assert len(ds) == 40 and ds.classes == ["benign", "malignant"]
    assert ds.split_range("val") == range(30, 40)
    for i in (0, 17, 39):
        got = ds[i]
        np.testing.assert_array_equal(got["image"], items[i]["image"])
        assert (got["label"], got["age"], got["path"]) == (items[i]["label"], items[i]["age"], items[i]["path"])
    roles = {f["name"]: f["meta"].get("role") for f in ds.fields}
    assert roles == {"image": "image", "label": "label", "age": None, "path": "path"}
    pixels = np.concatenate([s["image"].ravel() for s in items]).astype(np.float64)
    stats = next(s for s in ds.stats if s["field"] == "image")
    assert (stats["min"], stats["max"]) == (pixels.min(), pixels.max())
    assert stats["mean"] == pytest.approx(pixels.mean()) and stats["std"] == pytest.approx(pixels.std())
    assert "40 samples" in shardtool("verify", tmp_path / "ds")
    assert "case017" in shardtool("show", tmp_path / "ds", 17)
    info = json.loads(shardtool("info", tmp_path / "ds", "--json"))
    assert info["samples"] == 40 and info["splits"] == {"train": 30, "val": 10}
    assert info["classes"] == ["benign", "malignant"]
    rows = json.loads(shardtool("ls", tmp_path / "ds", "--split", "val", "--json"))
    assert [r["index"] for r in rows] == list(range(30, 40)) and {r["split"] for r in rows} == {"val"}
    assert [r["label"] for r in rows] == [items[i]["label"] for i in range(30, 40)]


def test_schema_is_inferred_from_the_first_sample(tmp_path):
    with shardify.Writer(tmp_path / "ds") as w:
        w.write({"x": np.zeros((2, 3), np.float32), "n": np.int64(3), "s": "a", "b": b"\x00\x01", "f": 0.5})
        w.write({"x": np.ones((2, 3), np.float32), "n": 4, "s": "b", "b": b"", "f": 1})
        assert [(f["name"], f["kind"]) for f in w.fields] == [("x", "ndarray"), ("n", "int"), ("s", "string"),
                                                              ("b", "bytes"), ("f", "float")]
        with pytest.raises(ValueError, match=r"sample 2: field 'x': shape \[3, 3\] does not fit the field's \[2, 3\]"):
            w.write({"x": np.ones((3, 3), np.float32), "n": 4, "s": "b", "b": b"", "f": 1})
    ds = shardify.Dataset(tmp_path / "ds")
    assert len(ds) == 2 and ds[1]["n"] == 4 and ds[0]["b"] == b"\x00\x01" and ds[1]["f"] == 1.0


@pytest.mark.parametrize("change, message", [
    (lambda s: s.update(image=s["image"].astype(np.int32)), r"sample 1: field 'image': dtype int32, the field is u16"),
    (lambda s: s.update(image=s["image"][0]), r"sample 1: field 'image': shape \[\d+, 12\] does not fit the field's \[1, \?, \?\]"),
    (lambda s: s.pop("age"), r"sample 1: field 'age' is missing"),
    (lambda s: s.update(extra=1), r"sample 1: fields 'extra' are not in the schema"),
    (lambda s: s.update(label=1.5), r"sample 1: field 'label': an int field, got float"),
    (lambda s: s.update(age=float("nan")), r"sample 1: field 'age': nan is not finite"),
])
def test_a_bad_sample_raises_naming_sample_and_field_and_writes_nothing(tmp_path, change, message):
    items = list(samples(3))
    fields = dict(FIELDS, age={"kind": "float", "finite": True})
    with shardify.Writer(tmp_path / "ds", fields=fields) as w:
        w.write(items[0])
        bad = dict(items[1])
        change(bad)
        with pytest.raises(ValueError, match=message):
            w.write(bad)
        w.write(items[2])
    ds = shardify.Dataset(tmp_path / "ds")
    assert [ds[i]["path"] for i in range(len(ds))] == ["case000", "case002"]


@pytest.mark.parametrize("field, value, message", [
    (("u8", (1, None, None)), [[[7, 300, -1]]], r"value 300 at \[0, 0, 1\] does not fit u8 \(uint8\)"),
    (("u8", (None,)), [0, -1], r"value -1 at \[1\] does not fit u8"),
    (("i16", (None,)), [1.5], r"value 1.5 at \[0\] does not fit i16 \(int16\)"),
    (("i32", (None,)), [float("inf")], r"value inf at \[0\] does not fit i32"),
    (("f16", (None,)), [70000.0], r"value 70000.0 at \[0\] does not fit f16"),
    (("f32", (None,)), [2 ** 24 + 1], r"value 16777217 at \[0\] does not fit f32"),
    (("i64", (None,)), [2 ** 63], r"value 9223372036854775808 at \[0\] does not fit i64"),
    (("u8", (None,)), [[1, 2], [3]], r"not a rectangular list of numbers"),
    (("u8", (None,)), np.array([1, 300]), r"dtype int64, the field is u8"),
    ("int", 2 ** 63, r"value 9223372036854775808 does not fit int \(i64\)"),
    ("float", 2 ** 53 + 1, r"value 9007199254740993 does not fit float \(f64\)"),
])
def test_a_value_the_field_does_not_hold_is_refused_not_cast(tmp_path, field, value, message):
    with shardify.Writer(tmp_path / "ds", fields={"x": field}, threads=1) as w:
        good = 1 if isinstance(field, str) else np.ones([1] * len(field[1]), int).tolist()
        w.write({"x": good})
        with pytest.raises(ValueError, match=r"sample 1: field 'x': " + message):
            w.write({"x": value})
        w.write({"x": good})
    assert len(shardify.Dataset(tmp_path / "ds")) == 2


def test_lists_and_numbers_the_field_holds_are_stored_exactly(tmp_path):
    fields = {"a": ("u8", (2, 2)), "b": ("i64", (None,)), "c": ("f16", (None,)), "n": "int", "f": "float"}
    sample = {"a": [[0, 255], [True, 7.0]], "b": (-2 ** 63, 2 ** 63 - 1), "c": [65504, 2048, 0.1, float("nan")],
              "n": np.uint64(2 ** 63 - 1), "f": 2 ** 60}
    with shardify.Writer(tmp_path / "ds", fields=fields, threads=1) as w:
        w.write(sample)
    got = shardify.Dataset(tmp_path / "ds")[0]
    np.testing.assert_array_equal(got["a"], np.array([[0, 255], [1, 7]], np.uint8))
    np.testing.assert_array_equal(got["b"], np.array([-2 ** 63, 2 ** 63 - 1], np.int64))
    np.testing.assert_array_equal(got["c"], np.array([65504, 2048, 0.1, np.nan], np.float16))
    assert (got["n"], got["f"]) == (2 ** 63 - 1, float(2 ** 60))


def _released():
    view = memoryview(b"ab")
    view.release()
    return view


@pytest.mark.parametrize("kind, sample, split, message", [
    ("int", {"x": 2 ** 70}, "train", r"field 'x': value 1180591620717411303424 does not fit int \(i64\)"),
    ("string", {"x": "a\ud800"}, "train", r"field 'x': not UTF-8 text \(.*'\\ud800' in position 1: surrogates"),
    ("string", {"x": "a", "\udce9": 1}, "train", r"fields '\\udce9' are not in the schema"),
    ("string", {"x": "a"}, "a\ud800", r"split: not UTF-8 text"),
    ("string", {"x": "a"}, 3, r"split: a str, got int"),
    ("string", ["a"], "train", r"a dict of fields, got list"),
    ("bytes", {"x": "text"}, "train", r"field 'x': a bytes field, got str"),
    ("bytes", {"x": _released()}, "train", r"field 'x': .*released memoryview"),
    ("float", {"x": np.array([1.0, 2.0])}, "train", r"field 'x': a float field, got ndarray"),
], ids=["int-2**70", "surrogate", "surrogate-key", "surrogate-split", "int-split", "list", "bytes-str", "released",
        "float-array"])
def test_a_value_python_cannot_hand_over_names_sample_and_field(tmp_path, kind, sample, split, message):
    good = {"x": {"int": 1, "string": "a", "bytes": b"a", "float": 1.0}[kind]}
    with shardify.Writer(tmp_path / "ds", fields={"x": kind}, threads=1) as w:
        w.write(good)
        with pytest.raises(ValueError, match=r"^sample 1: " + message):
            w.write(sample, split=split)
        w.write(good)
    assert len(shardify.Dataset(tmp_path / "ds")) == 2


def test_a_split_that_resumes_is_refused(tmp_path):
    items = list(samples(3))
    with shardify.Writer(tmp_path / "ds", fields=FIELDS) as w:
        w.write(items[0], split="train")
        w.write(items[1], split="val")
        with pytest.raises(ValueError, match="sample 2: split 'train' must be written as one contiguous run"):
            w.write(items[2], split="train")
    assert shardify.Dataset(tmp_path / "ds").splits == {"train": 1, "val": 1}


def test_an_exception_in_the_block_leaves_no_dataset_and_keeps_the_old_one(tmp_path):
    with pytest.raises(RuntimeError):
        write(tmp_path / "ds", (s if i < 35 else _raise() for i, s in enumerate(samples())))
    assert not any(n.endswith((".sfm", ".sfs", ".tmp")) for n in os.listdir(tmp_path / "ds"))
    write(tmp_path / "ds", samples())
    before = files(tmp_path / "ds")
    with pytest.raises(RuntimeError):
        write(tmp_path / "ds", (s if i < 35 else _raise() for i, s in enumerate(samples(seed=1))), overwrite=True)
    assert files(tmp_path / "ds") == before
    with pytest.raises(FileExistsError):
        write(tmp_path / "ds", samples())


def _raise():
    raise RuntimeError("the source failed")


def test_same_samples_give_the_same_bytes_whatever_the_threads(tmp_path):
    items = list(samples())
    write(tmp_path / "a", items, threads=1)
    write(tmp_path / "b", items, threads=3)
    assert files(tmp_path / "a") == files(tmp_path / "b")


needs_convert = pytest.mark.skipif(not shardify._core.HAVE_CONVERT, reason="built without the converter (ITK)")


@needs_convert
def small_images(n, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 255, size=(1, 16, 16), dtype=np.uint8)
    return [{"image": (base + rng.integers(0, 8, size=(1, 16, 16), dtype=np.uint8)), "label": i % 3}
            for i in range(n)]


def test_small_fixed_arrays_get_a_dictionary_from_the_first_samples(tmp_path):
    items = small_images(2500)
    for name, threads in (("ds", 1), ("ds3", 3)):
        with shardify.Writer(tmp_path / name, fields={"image": ("u8", (1, 16, 16)), "label": "int"},
                             threads=threads, fsync=False) as w:
            for s in items:
                w.write(s)
        assert w.close()["dictionaries"] == ["image"]
    assert files(tmp_path / "ds") == files(tmp_path / "ds3")  # the same bytes whatever the threads
    ds = shardify.Dataset(tmp_path / "ds")
    assert len(ds) == 2500
    for i in (0, 1999, 2000, 2499):
        np.testing.assert_array_equal(ds[i]["image"], items[i]["image"])
    assert "2500 samples" in shardtool("verify", tmp_path / "ds")


@pytest.mark.parametrize("n, options, fields", [
    (999, {}, {"image": ("u8", (1, 16, 16)), "label": "int"}),             # too few samples
    (1200, {"dict": False}, {"image": ("u8", (1, 16, 16)), "label": "int"}),
    (1200, {}, {"image": ("u8", (1, None, 16)), "label": "int"}),           # shape varies
    (1200, {"codec": "raw"}, {"image": ("u8", (1, 16, 16)), "label": "int"}),
])
def test_no_dictionary_where_the_rule_says_none(tmp_path, n, options, fields):
    items = small_images(n)
    with shardify.Writer(tmp_path / "ds", fields=fields, fsync=False, **options) as w:
        for s in items:
            w.write(s)
    assert w.close()["dictionaries"] == []
    np.testing.assert_array_equal(shardify.Dataset(tmp_path / "ds")[n - 1]["image"], items[-1]["image"])


def test_dict_true_trains_from_fewer_samples(tmp_path):
    with shardify.Writer(tmp_path / "ds", fields={"image": ("u8", (1, 16, 16)), "label": "int"}, dict=True) as w:
        for s in small_images(300):
            w.write(s)
    assert w.close()["dictionaries"] == ["image"]
    assert len(shardify.Dataset(tmp_path / "ds")) == 300


def test_chunked_volumes_get_foreground_locations_and_train_in_patches(tmp_path):
    rng = np.random.default_rng(3)
    fields = {"image": ("i16", (1, None, None, None)), "mask": ("u8", (1, None, None, None)),
              "image.spacing": ("f64", (3,))}
    masks = []
    with shardify.Writer(tmp_path / "ds", fields=fields, chunks=(8, 8, 8), fg_locations=5) as w:
        for case in range(3):
            mask = np.zeros((1, 12, 16, 16), np.uint8)
            mask[0, 2:5, 3:6, 4 + case:7 + case] = 1 + case % 2
            masks.append(mask)
            w.write({"image": rng.integers(-50, 50, size=mask.shape, dtype=np.int16), "mask": mask,
                     "image.spacing": (0.8, 0.8, 2.0)})
        with pytest.raises(ValueError, match="sample 3: field 'image.spacing': holds NaN or infinity"):
            w.write({"image": np.zeros((1, 4, 4, 4), np.int16), "mask": np.zeros((1, 4, 4, 4), np.uint8),
                     "image.spacing": (np.nan, 1.0, 1.0)})
    ds = shardify.Dataset(tmp_path / "ds")
    spec = {f["name"]: f for f in ds.fields}
    assert spec["image"]["chunk_shape"] == (1, 8, 8, 8) and spec["mask.fg_locations"]["meta"]["role"] == "fg_locations"
    loc = ds[1]["mask.fg_locations"]
    assert loc.shape == (5, 4) and (loc[:, 0] == 2).all()
    assert all(masks[1][0, z, y, x] == 2 for _, z, y, x in loc)
    np.testing.assert_array_equal(ds.region(2, "mask", (0, 2, 3, 6), (1, 3, 3, 3)), masks[2][:, 2:5, 3:6, 6:9])
    shardtool("verify", tmp_path / "ds")
    loader = shardify.Loader(tmp_path / "ds", batch_size=2, patch=(8, 8, 8), output="numpy")
    assert next(iter(loader))["image"].shape == (2, 1, 8, 8, 8)


@needs_convert
def test_parts_merge_into_the_dataset_of_one_writer(tmp_path):
    items = list(samples())
    write(tmp_path / "one", items)
    for index, first, count in ((1, 0, 25), (2, 25, 15)):
        with shardify.Writer(tmp_path / "parts", fields=FIELDS, classes=["benign", "malignant"], shard_size="4K",
                             part=(index, 2, first, count)) as w:
            for i in range(first, first + count):
                w.write(items[i], split="train" if i < 30 else "val")
    shardify.merge(tmp_path / "parts")
    a, b = shardify.Dataset(tmp_path / "one"), shardify.Dataset(tmp_path / "parts")
    assert len(b) == 40 and b.split_range("val") == range(30, 40)
    assert b.stats[0]["mean"] == pytest.approx(a.stats[0]["mean"]) and b.stats[0]["max"] == a.stats[0]["max"]
    np.testing.assert_array_equal(b[33]["image"], items[33]["image"])


def make_sample(i):
    if i % 7 == 3:
        return None  # skipped
    rng = np.random.default_rng(i)
    return {"image": rng.integers(0, 4000, size=(1, 6, 5 + i % 2), dtype=np.uint16), "label": i % 2,
            "age": float(i), "path": f"case{i:03d}"}


def test_write_in_parallel_equals_one_process_and_skips_none(tmp_path):
    split = ["train"] * 50 + ["val"] * 10
    kw = dict(fields=FIELDS, split=split, parts=4, progress=False, shard_size="4K")
    one = shardify.write(tmp_path / "one", make_sample, range(60), workers=1, **kw)
    two = shardify.write(tmp_path / "two", make_sample, range(60), workers=2, **kw)
    spawned = shardify.write(tmp_path / "spawn", make_sample, range(60), workers=2, start_method="spawn", **kw)
    assert one == two == spawned == dict(samples=51, skipped=9, parts=4, resumed=0, shards=one["shards"])
    assert files(tmp_path / "one") == files(tmp_path / "two") == files(tmp_path / "spawn")
    ds = shardify.Dataset(tmp_path / "two")
    assert ds.splits == {"train": 43, "val": 8} and ds[3]["path"] == "case004"
    np.testing.assert_array_equal(ds[3]["image"], make_sample(4)["image"])
    assert "51 samples" in shardtool("verify", tmp_path / "two")


def test_write_resumes_after_a_crash_with_the_parts_not_yet_complete(tmp_path):
    calls, crash = [], [True]

    def flaky(i):
        calls.append(i)
        if i == 40 and crash[0]:
            raise OSError("disk full")
        return make_sample(i)

    with pytest.raises(OSError, match="disk full") as failed:
        shardify.write(tmp_path / "ds", flaky, range(60), workers=1, parts=4, progress=False, fields=FIELDS)
    assert "shardify.write: input 40" in "".join(failed.value.__notes__)
    assert not (tmp_path / "ds" / "manifest.sfm").exists()
    calls.clear()
    crash[0] = False
    done = shardify.write(tmp_path / "ds", flaky, range(60), workers=1, parts=4, progress=False, fields=FIELDS)
    assert done["resumed"] == 2 and min(calls) == 30  # parts 1 and 2 (inputs 0..29) were complete
    assert len(shardify.Dataset(tmp_path / "ds")) == 51
    again = shardify.write(tmp_path / "ds", flaky, range(60), workers=1, parts=4, progress=False, fields=FIELDS)
    assert again["samples"] == 51 and again["resumed"] == 4


def test_write_resumes_only_the_run_that_wrote_the_parts(tmp_path):
    def load(i):
        if i == 33:
            raise OSError("bad input")
        return {"n": i}

    def other(i):
        return {"n": i}

    kw = dict(workers=1, parts=4, progress=False, fields={"n": "int"})
    with pytest.raises(OSError):
        shardify.write(tmp_path / "ds", load, range(64), **kw)  # parts 1 and 2 (inputs 0..31) complete
    with pytest.raises(FileExistsError, match=r"part 1/4 was written by another run \(inputs '64 inputs \w+' there, "
                       r"'64 inputs \w+' in this call; fn '\S+<locals>.load' there, '\S+<locals>.other' in this "
                       r"call\); .* overwrite=True"):
        shardify.write(tmp_path / "ds", other, range(500, 564), **kw)
    with pytest.raises(FileExistsError, match=r"\(inputs '64 inputs \w+' there, '64 inputs \w+' in this call\)"):
        shardify.write(tmp_path / "ds", load, range(500, 564), **kw)
    with pytest.raises(FileExistsError, match=r"\(fields and options '\w+' there, '\w+' in this call\)"):
        shardify.write(tmp_path / "ds", load, range(64), classes=["a"], **kw)
    assert shardify.write(tmp_path / "ds", other, range(500, 564), overwrite=True, **kw)["resumed"] == 0
    ds = shardify.Dataset(tmp_path / "ds")
    assert [ds[i]["n"] for i in range(len(ds))] == list(range(500, 564))
    with pytest.raises(FileExistsError, match=r"already holds a dataset written by another run \(fn '\S+other' there"):
        shardify.write(tmp_path / "ds", load, range(500, 564), **kw)
    assert shardify.write(tmp_path / "ds", other, range(500, 564), **kw)["resumed"] == 4
    with pytest.raises(OSError):
        shardify.write(tmp_path / "key", load, range(64), key="v1", **kw)
    assert shardify.write(tmp_path / "key", other, range(100, 164), key="v1", **kw)["resumed"] == 2  # the key vouches


def running(pid):
    """Whether process ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        if os.path.isdir("/proc"):
            return False
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def wait_until(done, seconds):
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)
    return done()


def test_write_workers_end_when_the_caller_is_killed(tmp_path):
    script = textwrap.dedent("""
        import os, sys, time
        import shardify
        def hold(i):
            open(os.path.join(sys.argv[1], f"{os.getpid()}.pid"), "w").close()
            time.sleep(60)
        shardify.write(os.path.join(sys.argv[1], "ds"), hold, range(2), workers=2, progress=False, fields={"n": "int"})
    """)
    package = os.path.dirname(os.path.dirname(os.path.abspath(shardify.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package, os.environ.get("PYTHONPATH", "")]))
    caller = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], env=env)
    workers = []
    try:
        started = lambda: [int(name[:-4]) for name in os.listdir(tmp_path) if name.endswith(".pid")]  # noqa: E731
        assert wait_until(lambda: len(started()) == 2 or caller.poll() is not None, 60) and caller.poll() is None
        workers = started()
        caller.kill()
        caller.wait()
        assert wait_until(lambda: not any(map(running, workers)), 5), [w for w in workers if running(w)]
    finally:
        caller.kill()
        caller.wait()
        for pid in filter(running, workers):
            os.kill(pid, signal.SIGKILL)


def test_patch_size_chunks_volumes_as_the_converter_does(tmp_path, volumes):
    """Writer(patch_size=) gives the chunks (and foreground locations) shardify
    --patch-size gives the same volumes, so its patches read as fast."""
    converted, arrays = volumes
    out = tmp_path / "written"
    fields = {"image": ("i16", (1, None, None, None)), "mask": ("u8", (1, None, None, None))}
    with shardify.Writer(out, fields, patch_size=(16, 16, 16)) as w:
        for image, mask in arrays:
            w.write({"image": image[None], "mask": mask[None]})
    cli = {f["name"]: f for f in shardify.Dataset(converted).fields}
    mine = {f["name"]: f for f in shardify.Dataset(out).fields}
    for name in ("image", "mask"):
        assert mine[name]["chunk_shape"] == cli[name]["chunk_shape"], name
        assert tuple(mine[name]["chunk_shape"]) != (1, 16, 16, 16)  # not the patch itself
    assert "mask.fg_locations" in mine
    # An explicit chunk shape still wins, and a bad patch is refused at once.
    with shardify.Writer(tmp_path / "explicit", fields, patch_size=(16, 16, 16), chunks={"image": (1, 8, 8, 8)}) as w:
        w.write({"image": arrays[0][0][None], "mask": arrays[0][1][None]})
    explicit = {f["name"]: f for f in shardify.Dataset(tmp_path / "explicit").fields}
    assert tuple(explicit["image"]["chunk_shape"]) == (1, 8, 8, 8)
    assert explicit["mask"]["chunk_shape"] == cli["mask"]["chunk_shape"]
    with pytest.raises(ValueError, match="patch_size"):
        shardify.Writer(tmp_path / "bad", fields, patch_size=(16, 0, 16))
