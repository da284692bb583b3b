"""shardify.Dataset: random access, values equal to the source, errors as Python exceptions."""

import os
import pickle
import shutil

import numpy as np
import pytest

import shardify
from conftest import CLASSES


def test_samples_equal_the_source_pngs(fmnist, fmnist_images):
    ds = shardify.Dataset(fmnist)
    images, labels = fmnist_images
    assert len(ds) == 600
    splits = ds.splits
    assert list(splits) == ["train", "val"] and sum(splits.values()) == 600
    assert 110 <= splits["val"] <= 130  # stratified 80/20
    assert ds.classes == sorted(CLASSES)  # the folder layout's labels: sorted folder names
    by_name = {f["name"]: f for f in ds.fields}
    assert by_name["image"]["dtype"] == "u8" and by_name["image"]["shape"] == (1, 28, 28)
    assert by_name["label"]["kind"] == "int"
    for i in (0, 1, 299, 599, -1):
        sample = ds[i]
        source = int(os.path.basename(sample["path"]).split(".")[0])  # the PNG's number
        assert isinstance(sample["image"], np.ndarray) and sample["image"].dtype == np.uint8
        assert np.array_equal(sample["image"][0], images[source])
        assert ds.classes[sample["label"]] == CLASSES[labels[source]]
        assert isinstance(sample["path"], str)


def test_fields_subset_split_range_and_stats(fmnist):
    ds = shardify.Dataset(fmnist)
    assert set(ds.get(3, fields=["label"])) == {"label"}
    train = ds.splits["train"]
    assert ds.split_range("train") == range(0, train) and ds.split_range("val") == range(train, 600)
    with pytest.raises(ValueError, match="no split 'nope'"):
        ds.split_range("nope")
    with pytest.raises(ValueError, match=r"no field 'nope'; it has \['image', 'label', 'path'\]"):
        ds.get(0, fields=["nope"])
    with pytest.raises(ValueError, match="no field 'nope'"):
        ds.region(0, "nope", (0, 0, 0), (1, 1, 1))
    assert set(ds.get(3, fields="label")) == {"label"}
    stats = {s["field"]: s for s in ds.stats}
    assert 0 <= stats["image"]["min"] <= stats["image"]["mean"] <= stats["image"]["max"] <= 255
    assert ds.provenance["converter"] == "shardify"


def test_index_errors(fmnist):
    ds = shardify.Dataset(fmnist)
    with pytest.raises(IndexError):
        ds[600]
    with pytest.raises(IndexError):
        ds[-601]
    with pytest.raises(TypeError):
        ds["0"]
    assert ds[np.int64(5)]["label"] == ds[5]["label"]


def test_pickles_and_works_in_a_torch_dataloader_with_workers(fmnist):
    torch = pytest.importorskip("torch")
    ds = shardify.Dataset(fmnist)
    again = pickle.loads(pickle.dumps(ds))
    assert np.array_equal(again[7]["image"], ds[7]["image"])
    loader = torch.utils.data.DataLoader(ds, batch_size=50, num_workers=2, timeout=60,
                                         collate_fn=lambda items: [s["label"] for s in items])
    labels = [label for batch in loader for label in batch]
    assert labels == [ds[i]["label"] for i in range(len(ds))]


def test_region_of_a_chunked_volume(volumes):
    path, arrays = volumes
    ds = shardify.Dataset(path)
    image, _ = arrays[2]
    box = ds.region(2, "image", start=(0, 2, 3, 4), size=(1, 8, 8, 8))
    assert np.array_equal(box[0], image[2:10, 3:11, 4:12])
    outside = ds.region(2, "image", start=(0, -2, 0, 0), size=(1, 4, 2, 2))
    assert np.all(outside[0, :2] == 0) and np.array_equal(outside[0, 2:], image[:2, :2, :2])


def test_shape_of_a_field_without_decoding_it(volumes):
    path, arrays = volumes
    ds = shardify.Dataset(path)
    for i, (image, mask) in enumerate(arrays):
        assert ds.shape(i, "image") == ds[i]["image"].shape == (1, *image.shape)  # depth varies
        assert ds.shape(i, "mask") == (1, *mask.shape)
    assert ds.shape(-1, "image") == (1, *arrays[-1][0].shape)
    with pytest.raises(ValueError, match="no field 'nope'"):
        ds.shape(0, "nope")
    with pytest.raises(IndexError):
        ds.shape(len(ds), "image")
    core = shardify._core.Dataset(path)
    scalar = next(f["name"] for f in core.fields() if f["kind"] != "ndarray")
    for field in ("nope", scalar):
        with pytest.raises(ValueError, match=f"no ndarray field '{field}'"):
            core.shape(0, field)
    with pytest.raises(IndexError, match="past the end"):
        core.shape(len(ds), "image")


def test_missing_and_corrupt_datasets_raise(tmp_path, fmnist):
    with pytest.raises(FileNotFoundError):
        shardify.Dataset(tmp_path / "missing")
    copy = tmp_path / "copy"
    shutil.copytree(fmnist, copy)
    shard = sorted(p for p in os.listdir(copy) if p.startswith("shard-"))[0]
    with open(copy / shard, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    ds = shardify.Dataset(copy)
    with pytest.raises(shardify.CorruptionError) as error:
        for i in range(len(ds)):
            ds[i]
    assert isinstance(error.value, OSError)
    assert shard in str(error.value) and "sample" in str(error.value)
    with open(copy / "manifest.sfm", "r+b") as f:
        f.truncate(40)
    with pytest.raises(shardify.CorruptionError, match="manifest"):
        shardify.Dataset(copy)


def numpy_stats(field, arrays):
    values = np.concatenate([a.reshape(-1).astype(np.float64) for a in arrays])
    return {"field": field, "count": values.size, "min": values.min(), "max": values.max(), "mean": values.mean(),
            "std": values.std()}


def assert_stats_equal(got, expected):
    assert set(got) == set(expected) and got["count"] == expected["count"]
    for key in ("min", "max", "mean", "std"):
        assert got[key] == pytest.approx(expected[key], rel=1e-9, abs=1e-9), key


def test_split_stats_cover_one_split(fmnist, volumes):
    ds = shardify.Dataset(fmnist)
    per_split = {}
    for split in ("train", "val"):
        (got,) = ds.split_stats(split)
        assert_stats_equal(got, numpy_stats("image", [ds[i]["image"] for i in ds.split_range(split)]))
        per_split[split] = got
    (everything,) = ds.stats  # the converter's, over every split
    train, val = per_split["train"], per_split["val"]
    assert train["count"] + val["count"] == everything["count"]
    mean = (train["mean"] * train["count"] + val["mean"] * val["count"]) / everything["count"]
    assert mean == pytest.approx(everything["mean"]) and train["mean"] != pytest.approx(everything["mean"])
    with pytest.raises(ValueError, match="no split 'test'"):
        ds.split_stats("test")
    with pytest.raises(ValueError, match="kind int"):
        ds.split_stats("train", fields=["label"])
    path, arrays = volumes  # depths vary: batches are padded, statistics are not
    got = {s["field"]: s for s in shardify.Dataset(path).split_stats("train", fields=["image", "mask"])}
    assert_stats_equal(got["image"], numpy_stats("image", [image for image, _ in arrays]))
    assert_stats_equal(got["mask"], numpy_stats("mask", [mask for _, mask in arrays]))


def test_a_source_path_that_is_not_utf8_keeps_its_bytes_in_python_and_json(tmp_path, fmnist_png):
    """A dataset converted from a folder named on a Latin-1 file system: Python's
    provenance and shardtool's JSON give the bytes back through os.fsencode."""
    import json
    import subprocess
    bin_dir = os.path.join(os.path.dirname(os.path.abspath(shardify.__file__)), "..", "..", "bin")
    src = os.path.join(os.fsencode(tmp_path), b"caf\xe9")
    for c in CLASSES[:2]:
        os.makedirs(os.path.join(src, os.fsencode(c)))
        for name in sorted(os.listdir(fmnist_png / c))[:3]:
            shutil.copy(fmnist_png / c / name, os.path.join(src, os.fsencode(c), os.fsencode(name)))
    out = tmp_path / "ds"
    subprocess.run([os.path.join(bin_dir, "shardify"), src, "-o", str(out), "--quiet"], check=True)
    info = subprocess.run([os.path.join(bin_dir, "shardtool"), "info", str(out), "--json"], check=True,
                          capture_output=True).stdout
    assert b"\\udce9" in info and "\ufffd".encode() not in info
    source = json.loads(info)["provenance"]["source"]
    assert os.fsencode(source).endswith(b"caf\xe9")
    assert shardify.Dataset(out).provenance["source"] == source
