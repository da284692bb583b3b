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
    """A viewer serving on a free loopback port in a thread (polling for shutdown every 50 ms);
    get(path) -> (status, type, body)."""

    def __init__(self, dataset):
        self.server = view.serve(dataset, port=0)
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
    ("/api/nothing", 404), ("/?x=1", 400),
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
