"""shardify.view: every endpoint of the viewer's HTTP API against a 2D classification dataset
and a 3D one with masks, bad parameters included (4xx with a JSON message, never a 500)."""

import json
import os
import struct
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import zlib

import numpy as np
import pytest

import shardify
from shardify import view

SHARDTOOL = os.path.join(os.path.dirname(os.path.abspath(shardify.__file__)), "..", "..", "bin", "shardtool")


class Served:
    """A viewer (of a dataset, or a ViewServer made already) serving on a free loopback port
    in a thread (polling for shutdown every 50 ms); get(path) -> (status, type, body)."""

    def __init__(self, dataset):
        self.server = dataset if isinstance(dataset, view.ViewServer) else view.serve(dataset, port=0)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.url = self.server.url

    def get(self, path, headers=None):
        request = urllib.request.Request(self.url.rstrip("/") + path, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=60) as r:
                return r.status, r.headers["Content-Type"], r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers["Content-Type"], e.read()

    def json(self, path):
        status, kind, body = self.get(path)
        assert (status, kind) == (200, "application/json"), (path, status, body[:300])
        return json.loads(body)

    def png(self, path):
        status, kind, body = self.get(path)
        assert (status, kind) == (200, "image/png"), (path, status, body[:300])
        return decode_png(body)

    def error(self, path, status):
        got, kind, body = self.get(path)
        assert (got, kind) == (status, "application/json"), (path, got, body[:300])
        message = json.loads(body)["error"]
        assert message and "Traceback" not in message
        return message

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def decode_png(data):
    """(width, height, colour type, pixels [H, W] or [H, W, 3]) of an 8-bit PNG, chunk CRCs checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        tag, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        assert struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0] == zlib.crc32(tag + body)
        chunks[tag] = chunks.get(tag, b"") + body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert depth == 8 and colour in (0, 2)
    channels = 1 if colour == 0 else 3
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), dtype=np.uint8).reshape(height, 1 + width * channels)
    assert (rows[:, 0] == 0).all()
    pixels = rows[:, 1:].reshape(height, width, channels)
    return width, height, colour, pixels[..., 0] if channels == 1 else pixels


@pytest.fixture(scope="module")
def flat(fmnist):
    served = Served(fmnist)
    yield served
    served.close()


@pytest.fixture(scope="module")
def volume(volumes):
    served = Served(volumes[0])
    yield served
    served.close()


def test_page_is_one_self_contained_document(flat):
    status, kind, body = flat.get("/")
    assert (status, kind) == (200, "text/html; charset=utf-8")
    page = body.decode()
    assert "<script>" in page and "/api/overview" in page
    assert "http://" not in page and "https://" not in page  # nothing fetched from elsewhere


def test_overview_of_a_classification_dataset(flat, fmnist):
    ds = shardify.Dataset(fmnist)
    o = flat.json("/api/overview")
    assert o["samples"] == len(ds) == 600
    assert [(s["name"], s["count"]) for s in o["splits"]] == list(ds.splits.items())
    assert [c["name"] for c in o["classes"]] == ds.classes
    labels = [ds.get(i, fields="label")["label"] for i in range(len(ds))]
    assert [c["count"] for c in o["classes"]] == [labels.count(c) for c in range(len(ds.classes))]
    assert {f["name"] for f in o["fields"]} == {f["name"] for f in ds.fields}
    assert o["image_field"] == "image" and o["mask_field"] is None and o["label_field"] == "label"
    assert {s["field"] for s in o["stats"]} == {s["field"] for s in ds.stats}
    assert o["provenance"]["converter"] == "shardify"


def test_samples_pages_filter_by_split_and_class(flat, fmnist):
    ds = shardify.Dataset(fmnist)
    page = flat.json("/api/samples?split=val&offset=5&limit=7")
    val = ds.split_range("val")
    assert page["total"] == len(val)
    assert [s["index"] for s in page["samples"]] == list(val[5:12])
    assert all(s["split"] == "val" and s["class"] == ds.classes[s["label"]] for s in page["samples"])
    name = ds.classes[3]
    page = flat.json(f"/api/samples?split=train&label={name}&limit=500")
    assert page["total"] == sum(ds.get(i, fields="label")["label"] == 3 for i in ds.split_range("train"))
    assert {s["class"] for s in page["samples"]} == {name}
    assert flat.json("/api/samples?label=3&limit=1")["total"] == flat.json(f"/api/samples?label={name}")["total"]


def test_one_sample_is_summarized(flat, fmnist):
    ds = shardify.Dataset(fmnist)
    s = flat.json("/api/sample/7")
    fields = {f["name"]: f for f in s["fields"]}
    image = ds[7]["image"]
    assert fields["image"]["shape"] == list(image.shape) and "values" not in fields["image"]
    assert (fields["image"]["min"], fields["image"]["max"]) == (image.min(), image.max())
    assert fields["label"]["value"] == ds[7]["label"] and s["class"] == ds.classes[ds[7]["label"]]
    assert s["pictures"]["image"]["spatial_shape"] == list(image.shape[-2:])


def test_image_png_is_the_sample_scaled_to_its_range(flat, fmnist):
    image = shardify.Dataset(fmnist)[3]["image"].reshape(28, 28).astype(np.float64)
    width, height, colour, pixels = flat.png("/api/image/3.png")
    assert (width, height, colour) == (28, 28, 0)
    expected = np.rint((image - image.min()) * 255.0 / (image.max() - image.min())).astype(np.uint8)
    np.testing.assert_array_equal(pixels, expected)
    assert flat.png("/api/image/3.png?size=96")[:2] == (96, 96)
    width, _, _, pixels = flat.png("/api/image/3.png?window=0,1")
    np.testing.assert_array_equal(pixels, np.where(image >= 1, 255, 0))
    # a window as the page sends it: JavaScript's shortest round trip of a double, 17 digits
    _, _, _, pixels = flat.png("/api/image/3.png?window=0.30000000000000004,1.0000000000000002e%2B0")
    np.testing.assert_array_equal(pixels, np.where(image >= 1, 255, 0))
    assert len(flat.server.view.pictures) >= 3  # cached


def test_volume_slices_along_each_axis_with_the_mask_over_them(volume, volumes):
    path, arrays = volumes
    ds = shardify.Dataset(path)
    o = volume.json("/api/overview")
    assert o["mask_field"] == "mask" and [m["value"] for m in o["mask_labels"]] == [1, 2]
    sample = ds[0]
    depth, height, width = sample["image"].shape[1:]
    s = volume.json("/api/sample/0")
    assert s["pictures"]["image"]["spatial_shape"] == [depth, height, width]
    assert s["mask_labels_present"] == sorted(int(v) for v in np.unique(sample["mask"]) if v > 0)
    box = np.argwhere(sample["mask"][0] > 0)
    assert s["mask_focus"] == [int(lo + hi) // 2 for lo, hi in zip(box.min(axis=0), box.max(axis=0))]
    assert volume.png("/api/image/0.png?axis=0")[:3] == (width, height, 0)  # middle slice, no label there
    assert volume.png("/api/image/0.png?axis=1&slice=0")[:2] == (width, depth)
    assert volume.png("/api/image/0.png?axis=2&slice=3")[:2] == (height, depth)
    z = int(np.argwhere(sample["mask"][0] > 0)[0][0])
    w, h, colour, pixels = volume.png(f"/api/image/0.png?axis=0&slice={z}")
    assert colour == 2 and (pixels[..., 0] != pixels[..., 1]).any()  # the label in colour
    w, h, colour, _ = volume.png(f"/api/image/0.png?axis=0&slice={z}&mask=0")
    assert colour == 0
    assert volume.png("/api/image/0.png?size=200&axis=1")[:2] == (200, round(depth * 200 / width))


def test_volume_slice_in_a_window_reads_only_the_chunks_it_touches(tmp_path):
    """A slice drawn in a given window is read with Dataset.region: the same PNG as from the
    whole sample, along every axis, and it still draws with a chunk it does not touch corrupt."""
    rng = np.random.default_rng(5)
    image = rng.normal(size=(2, 8, 8, 8)).astype(np.float32)
    mask = np.zeros((1, 8, 8, 8), np.uint8)
    mask[0, 1, 2:5, 2:5] = 1
    chunks = {"image": (1, 4, 8, 8), "mask": (1, 4, 8, 8)}
    with shardify.Writer(tmp_path / "ds", codec="raw", chunks=chunks) as w:
        w.write({"image": image, "mask": mask, "image.spacing": np.array([1.0, 1.0, 2.5])})
    ds = shardify.Dataset(tmp_path / "ds")
    whole = view.DatasetView(ds)
    whole.arrays(0)  # kept: pictures come from the decoded sample
    requests = [(0, 1, None, None), (1, 3, None, 1), (2, 6, 40, 0), (0, None, 40, None)]
    wanted = {r: whole.picture(0, "image", r[0], r[1], r[2], (-1.0, 2.0), r[3], True) for r in requests}
    sliced = view.DatasetView(shardify.Dataset(tmp_path / "ds"))
    for r, png in wanted.items():
        assert sliced.picture(0, "image", r[0], r[1], r[2], (-1.0, 2.0), r[3], True) == png, r
    assert len(sliced._samples) == 0  # no sample decoded
    with pytest.raises(view.RenderError, match="0..7"):
        sliced.picture(0, "image", 0, 8, None, (-1.0, 2.0), None, True)
    with pytest.raises(view.BadRequest, match="channel"):
        sliced.picture(0, "image", 0, 1, None, (-1.0, 2.0), 2, True)
    shard = next(p for p in (tmp_path / "ds").iterdir() if p.name.startswith("shard-"))
    data = bytearray(shard.read_bytes())
    far = data.find(image[1, 4:].tobytes())  # channel 1's chunk of slices 4..7, stored as it is
    assert far > 0 and data.find(image[1, 4:].tobytes(), far + 1) < 0
    data[far + 5] ^= 0xFF
    shard.write_bytes(bytes(data))
    corrupt = view.DatasetView(shardify.Dataset(tmp_path / "ds"))
    assert corrupt.picture(0, "image", 0, 1, None, (-1.0, 2.0), None, True) == wanted[(0, 1, None, None)]
    with pytest.raises(shardify.CorruptionError):
        corrupt.arrays(0)


def test_mask_label_names_and_colours_from_the_mask_meta(tmp_path):
    labels = {"background": 0, "liver": 1, "tumour": 2}
    image = np.zeros((1, 4, 8, 8), np.float32)
    mask = np.zeros((1, 4, 8, 8), np.uint8)
    mask[0, 2, 1:3, 1:3] = 1
    mask[0, 2, 5:7, 5:7] = 2
    with shardify.Writer(tmp_path / "ds", meta={"mask": {"labels": json.dumps(labels)}}) as w:
        w.write({"image": image, "mask": mask})
    served = Served(str(tmp_path / "ds"))
    try:
        o = served.json("/api/overview")
        assert [(m["value"], m["name"], m["colour"]) for m in o["mask_labels"]] == [
            (1, "liver", "#e6194b"), (2, "tumour", "#3cb44b")]
        _, _, colour, pixels = served.png("/api/image/0.png?slice=2")
        assert colour == 2  # the image is 0 everywhere: labelled pixels are half their colour
        assert tuple(pixels[1, 1]) == (115, 12, 37) and tuple(pixels[6, 6]) == (30, 90, 37)
        assert tuple(pixels[0, 0]) == (0, 0, 0)
    finally:
        served.close()


def test_multi_label_segmentation_draws_each_organ_and_names_its_channel(gi):
    """The rle layout's mask: one 0/1 channel per organ, organs overlapping; the legend's
    values are channels, each drawn in its colour, an overlap in the first channel's."""
    from shardify._palette import COLOURS
    served = Served(gi)
    try:
        o = served.json("/api/overview")
        assert o["multi_label"] and o["mask_field"] == "mask"
        assert [(m["value"], m["name"], m["colour"]) for m in o["mask_labels"]] == [
            (0, "large_bowel", "#e6194b"), (1, "small_bowel", "#3cb44b"), (2, "stomach", "#ffe119")]
        sample = shardify.Dataset(gi)[0]
        image, mask = sample["image"][0].astype(np.float64), sample["mask"]
        s = served.json("/api/sample/0")
        assert s["mask_labels_present"] == [c for c in range(3) if mask[c].any()]
        width, height, colour, pixels = served.png("/api/image/0.png")
        assert (width, height, colour) == (image.shape[1], image.shape[0], 2)
        gray = np.rint((image - image.min()) * 255.0 / (image.max() - image.min())).astype(np.uint16)
        first = np.where(mask.any(axis=0), mask.argmax(axis=0), -1)  # the first organ at each pixel
        assert (mask.sum(axis=0) > 1).any()  # organs overlap somewhere
        for c in range(3):
            on = first == c
            assert on.any()
            want = (gray[on][:, np.newaxis] + np.array(COLOURS[c], np.uint16)) // 2
            np.testing.assert_array_equal(pixels[on], want)
        background = pixels[first < 0]
        assert (background[:, 0] == background[:, 1]).all() and (background[:, 1] == background[:, 2]).all()
        assert served.png("/api/image/0.png?mask=0")[2] == 0
        assert served.png("/api/image/0.png?field=mask&axis=0")[:2] == (width, height)
    finally:
        served.close()


def test_volume_with_anisotropic_spacing_is_drawn_to_scale_and_its_preprocessing_said(tmp_path):
    """Volumes of 3 x 1 x 1 mm cropped, resampled to 2.5 x 1.2 x 1.2 mm and z-scored: the
    overview says so in words, and a slice across z is as tall as its millimetres."""
    from conftest import write_nifti
    rng = np.random.default_rng(3)
    (tmp_path / "src" / "images").mkdir(parents=True)
    (tmp_path / "src" / "masks").mkdir()
    for case in range(2):
        image = np.zeros((10, 30, 36), np.int16)
        image[1:9, 3:27, 2:34] = rng.integers(50, 200, (8, 24, 32))
        mask = np.zeros(image.shape, np.uint8)
        mask[3:6, 10:20, 10:20] = 1
        write_nifti(tmp_path / "src" / "images" / f"c{case}.nii", image, spacing=(3.0, 1.0, 1.0))
        write_nifti(tmp_path / "src" / "masks" / f"c{case}.nii", mask, spacing=(3.0, 1.0, 1.0))
    shardify.convert(tmp_path / "src", tmp_path / "ds", layout="pairs", crop="nonzero",
                     spacing={"x": 1.2, "y": 1.2, "z": 2.5}, normalize="zscore", progress=False)
    served = Served(str(tmp_path / "ds"))
    try:
        steps = served.json("/api/overview")["preprocessing"]
        assert steps[0] == "cropped to the nonzero region (the box of voxels nonzero in any channel)"
        assert steps[1].startswith("resampled to 2.5 x 1.2 x 1.2 mm (z, y, x), as given; images cubic B-spline")
        assert steps[2] == "normalized per channel: z-score within the nonzero region, 0 outside it"  # crop: 57%
        sample = shardify.Dataset(str(tmp_path / "ds"))[0]
        depth, height, width = sample["image"].shape[1:]
        sx, sy, sz = sample["image.spacing"]
        assert sz / sx > 2  # anisotropic
        picture = served.json("/api/sample/0")["pictures"]["image"]
        assert picture["spacing"] == [sz, sy, sx]
        tall = round(depth * sz / sx)  # z rows in x's pixels
        assert picture["views"] == [[height, width], [tall, width], [round(depth * sz / sy), height]]
        assert served.png("/api/image/0.png?axis=1")[:2] == (width, tall)
        assert served.png("/api/image/0.png?axis=1&aspect=0")[:2] == (width, depth)  # one pixel per voxel
        assert served.png("/api/image/0.png?axis=0")[:2] == (width, height)
        rows = depth * sz / sx
        assert served.png("/api/image/0.png?axis=1&size=100")[:2] == (round(100 * width / max(width, rows)),
                                                                         round(100 * rows / max(width, rows)))
        assert served.png("/api/image/0.png?axis=1&field=mask")[:2] == (width, tall)  # the image's spacing
    finally:
        served.close()


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_float_fields_are_summarized_over_their_finite_values(tmp_path):
    """NaN and infinities (a normalization's unbounded clip) are left out of a field's
    minimum, maximum and mean and counted, with no numpy warning (an error here)."""
    values = np.array([[-np.inf, np.inf, 2.0, 4.0], [np.nan, 6.0, 1e38, -1e38]], np.float32)
    big = np.full((1, 60, 60), 60000, np.float16)  # its sum overflows float16
    with shardify.Writer(tmp_path / "ds", fields={"image": ("f16", (1, 60, 60)), "values": ("f32", (2, 4)),
                                                  "empty": ("f32", (1, 20))}) as w:
        w.write({"image": big, "values": values, "empty": np.full((1, 20), np.nan, np.float32)})
    served = Served(str(tmp_path / "ds"))
    try:
        fields = {f["name"]: f for f in served.json("/api/sample/0")["fields"]}
        assert (fields["values"]["min"], fields["values"]["max"]) == (np.float32(-1e38), np.float32(1e38))
        assert fields["values"]["mean"] == pytest.approx(3.0, abs=1e23) and fields["values"]["not_finite"] == 3
        assert fields["values"]["values"][:5] == ["-inf", "inf", 2.0, 4.0, "nan"]  # listed, as text
        assert fields["image"]["mean"] == 60000 and "not_finite" not in fields["image"]
        assert fields["empty"]["mean"] is None and fields["empty"]["not_finite"] == 20
        served.json("/api/overview")
        assert served.png("/api/image/0.png")[:2] == (60, 60)
    finally:
        served.close()


def test_histogram_of_a_field_over_spread_samples(flat, fmnist):
    ds = shardify.Dataset(fmnist)
    h = flat.json("/api/histogram?bins=16")
    chosen = sorted({int(i) for i in np.linspace(0, len(ds) - 1, 16).round()})
    values = np.concatenate([ds[i]["image"].reshape(-1) for i in chosen])
    stats = next(s for s in ds.stats if s["field"] == "image")
    assert (h["field"], h["samples"], h["of"], h["min"], h["max"]) == ("image", 16, 600, stats["min"], stats["max"])
    assert h["counts"] == np.histogram(values, bins=16, range=(stats["min"], stats["max"]))[0].tolist()


def test_channels_have_names_and_ranges_and_each_can_be_drawn(tmp_path):
    image = np.zeros((2, 6, 8), np.float32)
    image[0, 1, 1], image[1] = 10.0, np.linspace(-1, 1, 48).reshape(6, 8)
    with shardify.Writer(tmp_path / "ds", meta={"image": {"channel_names": json.dumps({"0": "T2", "1": "ADC"})}}) as w:
        w.write({"image": image, "image.spacing": np.array([0.5, 1.0])})  # x, y: columns half as wide
    served = Served(str(tmp_path / "ds"))
    try:
        p = served.json("/api/sample/0")["pictures"]["image"]
        assert p["channels"] == 2 and p["channel_names"] == ["T2", "ADC"]
        assert p["channel_ranges"] == [[0.0, 10.0], [-1.0, 1.0]] and p["spacing"] == [1.0, 0.5]
        assert p["views"] == [[12, 8]]  # rows twice as high as columns are wide
        width, height, colour, pixels = served.png("/api/image/0.png?channel=1&aspect=0")
        assert (width, height, colour) == (8, 6, 0)
        np.testing.assert_array_equal(pixels, np.rint((image[1] + 1) * 127.5).astype(np.uint8))
        assert served.png("/api/image/0.png?channel=0")[:2] == (8, 12)
        assert served.png("/api/image/0.png?channel=0&window=0,1")[3][2, 1] == 255  # row 1 drawn twice
    finally:
        served.close()


def test_labels_without_class_names_are_counted_by_number(tmp_path):
    with shardify.Writer(tmp_path / "ds") as w:
        for i in range(7):
            w.write({"image": np.full((1, 4, 4), i, np.uint8), "label": i % 3})
    served = Served(str(tmp_path / "ds"))
    try:
        o = served.json("/api/overview")
        assert not o["named_classes"]
        assert [(c["name"], c["count"]) for c in o["classes"]] == [("0", 3), ("1", 2), ("2", 2)]
        assert [s["index"] for s in served.json("/api/samples?label=2")["samples"]] == [2, 5]
    finally:
        served.close()


def test_three_channels_are_colour_and_one_channel_is_gray(tmp_path):
    rgb = np.zeros((3, 5, 6), np.uint8)
    rgb[0, 1, 2], rgb[1, 3, 4], rgb[2] = 200, 40, 50  # range 0..200 over every channel
    with shardify.Writer(tmp_path / "ds") as w:
        w.write({"image": rgb})
    served = Served(str(tmp_path / "ds"))
    try:
        width, height, colour, pixels = served.png("/api/image/0.png")
        assert (width, height, colour) == (6, 5, 2)
        np.testing.assert_array_equal(pixels, np.rint(rgb.transpose(1, 2, 0) * 255.0 / 200).astype(np.uint8))
        width, height, colour, pixels = served.png("/api/image/0.png?channel=1")
        assert colour == 0 and pixels[3, 4] == 255 and pixels.sum() == 255  # channel 1 in its own range
    finally:
        served.close()


def test_augmentation_preview(volume, flat):
    pytest.importorskip("torch")
    width, height, colour, pixels = volume.png("/api/augment/1.png?preset=nnunet&draws=3&size=64")
    assert (width, height, colour) == (3 * 64 + 2 * 4, round(24 * 64 / 28), 2)  # middle slices [24, 28], 4 apart
    tiles = [pixels[:, k * 68:k * 68 + 64] for k in range(3)]
    assert not (np.array_equal(tiles[0], tiles[1]) and np.array_equal(tiles[1], tiles[2]))  # different draws
    assert flat.png("/api/augment/0.png?preset=mednist&draws=2&size=32")[:2] == (2 * 32 + 4, 32)


def test_augmentation_without_torch_is_a_400_that_says_so(flat, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    # seed 9: a picture no other test has cached
    assert "needs torch" in flat.error("/api/augment/0.png?preset=mednist&draws=1&seed=9", 400)


@pytest.mark.parametrize("path, status", [
    ("/api/sample/600", 404), ("/api/sample/-1", 404), ("/api/sample/x", 404), ("/api/image/99999.png", 404),
    ("/api/image/0.png?field=label", 404), ("/api/image/0.png?field=../../etc/passwd", 400),
    ("/api/image/0.png?axis=1", 400), ("/api/image/0.png?axis=x", 400), ("/api/image/0.png?slice=1.5", 400),
    ("/api/image/0.png?size=4", 400), ("/api/image/0.png?size=5000", 400), ("/api/image/0.png?window=5,1", 400),
    ("/api/image/0.png?window=a,b", 400), ("/api/image/0.png?channel=1", 400), ("/api/image/0.png?mask=yes", 400),
    ("/api/image/0.png?size=", 400), ("/api/image/0.png?size=96&size=32", 400), ("/api/image/0.png?what=1", 400),
    ("/api/samples?split=test", 404), ("/api/samples?split=..%2Ftrain", 400), ("/api/samples?label=owl", 404),
    ("/api/samples?limit=0", 400), ("/api/samples?limit=100000", 400), ("/api/samples?offset=-3", 400),
    ("/api/augment/0.png?preset=bogus", 400), ("/api/augment/0.png?draws=100", 400), ("/../../etc/passwd", 404),
    ("/api/nothing", 404), ("/?x=1", 400), ("/api/image/0.png?aspect=2", 400), ("/api/histogram?bins=4", 400),
    ("/api/histogram?bins=1000", 400), ("/api/histogram?field=label", 404), ("/api/histogram?field=..%2Fx", 400),
    ("/api/histogram?field=image&field=image", 400), ("/api/histogram?index=1", 400),
])
def test_bad_requests_get_a_message(flat, path, status):
    flat.error(path, status)


def test_volume_bad_requests(volume):
    assert "0..23" in volume.error("/api/image/0.png?axis=1&slice=24", 400)
    volume.error("/api/image/0.png?axis=3", 400)


def test_read_only_and_loopback_only(flat):
    request = urllib.request.Request(flat.url + "api/overview", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(request, timeout=10)
    assert e.value.code == 405
    status, _, body = flat.get("/api/overview", headers={"Host": "attacker.example:80"})
    assert status == 403 and b"loopback" in body
    assert flat.server.server_address[0] == "127.0.0.1"


def test_main_rejects_a_missing_dataset(tmp_path, capsys):
    assert view.main([str(tmp_path / "none"), "--port", "0"]) == 2
    assert "shardify.view" in capsys.readouterr().err


@pytest.mark.skipif(not os.path.exists(SHARDTOOL), reason="no shardtool beside this package (a build tree has one)")
def test_shardtool_view_runs_this_package(fmnist, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SHARDIFY_PYTHON")}
    process = subprocess.Popen([SHARDTOOL, "view", fmnist, "--port", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = process.stdout.readline()  # "shardify.view: DATASET at URL (Ctrl-C stops)"
        assert " at http://127.0.0.1:" in line, (line, process.stderr.read() if process.poll() is not None else "")
        url = line.split(" at ", 1)[1].split()[0]
        with urllib.request.urlopen(url + "api/overview", timeout=30) as r:
            assert json.loads(r.read())["samples"] == 600
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stdout.close()
        process.stderr.close()
    missing = subprocess.run([SHARDTOOL, "view", str(tmp_path / "none"), "--port", "0"], capture_output=True, text=True,
                             env=env, timeout=60)
    assert missing.returncode == 2 and "shardify.view" in missing.stderr
    bad = subprocess.run([SHARDTOOL, "view", fmnist, "--port", "70000"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "port" in bad.stderr
    lost = subprocess.run([SHARDTOOL, "view", fmnist], capture_output=True, text=True, timeout=60,
                          env=dict(env, SHARDIFY_PYTHON=str(tmp_path / "no-python")))
    assert lost.returncode == 2 and "SHARDIFY_PYTHON" in lost.stderr
