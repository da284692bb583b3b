"""Datasets over HTTP: shardify.Dataset and Loader read a dataset that Debian's lighttpd
serves on 127.0.0.1 through a bounded local cache, with the same values as on disk."""

import os
import subprocess
import sys

import numpy as np
import pytest

import shardify

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from http_server import lighttpd  # noqa: E402

SHARDTOOL = os.path.join(os.path.dirname(os.path.abspath(shardify.__file__)), "..", "..", "bin", "shardtool")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(url of the dataset, local path): 300 images in shards of about 8 KiB, under lighttpd."""
    root = tmp_path_factory.mktemp("www")
    rng = np.random.default_rng(1)
    with shardify.Writer(root / "ds", fields={"image": ("u8", (1, 20, 20)), "label": "int"},
                         classes=["a", "b", "c"], shard_size="8K") as w:
        for i in range(300):
            w.write({"image": rng.integers(0, 256, (1, 20, 20), dtype=np.uint8), "label": i % 3}, split="train")
    with lighttpd(root, root) as port:
        yield f"http://127.0.0.1:{port}/ds", str(root / "ds")


def test_a_served_dataset_reads_as_on_disk(served, tmp_path):
    url, local = served
    remote = shardify.Dataset(url, cache_dir=tmp_path / "cache")
    disk = shardify.Dataset(local)
    assert remote.path == url and len(remote) == len(disk) == 300
    for i in (0, 77, 299):
        a, b = remote[i], disk[i]
        assert np.array_equal(a["image"], b["image"]) and a["label"] == b["label"]


def test_a_loader_reads_through_a_cache_smaller_than_the_dataset(served, tmp_path):
    url, local = served
    sizes = [os.path.getsize(os.path.join(local, f)) for f in os.listdir(local) if f.startswith("shard-")]
    limit = 8 * max(sizes)
    assert limit < sum(sizes)
    kw = dict(batch_size=32, order="shard_windowed", window_shards=2, seed=3, prefetch=1, output="numpy")
    remote = shardify.Loader(url, cache_dir=tmp_path / "cache", cache_limit=limit, **kw)
    disk = shardify.Loader(local, **kw)
    for _ in range(2):  # two epochs: shards are evicted and fetched again
        for a, b in zip(remote, disk):
            assert np.array_equal(a["image"], b["image"]) and np.array_equal(a["index"], b["index"])
    cached = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(tmp_path / "cache")
                 for f in files if not f.startswith(".") and not f.endswith(".lock"))
    assert 0 < cached <= limit


def test_bad_cache_options_and_a_missing_dataset_raise(served, tmp_path):
    url, _ = served
    with pytest.raises(ValueError, match="cache_limit"):
        shardify.Dataset(url, cache_limit="lots")
    with pytest.raises(ValueError, match="at least 1 byte"):
        shardify.Dataset(url, cache_limit=0)
    with pytest.raises(FileNotFoundError, match="manifest"):
        shardify.Dataset(url.replace("/ds", "/nothing"), cache_dir=tmp_path)
    with pytest.raises(ValueError, match="smaller than the largest shard"):
        shardify.Dataset(url, cache_dir=tmp_path / "c", cache_limit=100)


def test_samples_of_a_dataset_larger_than_the_cache_are_read_by_ranges(served, tmp_path, monkeypatch):
    url, local = served
    sizes = [os.path.getsize(os.path.join(local, f)) for f in os.listdir(local) if f.startswith("shard-")]
    cache = tmp_path / "cache"
    remote = shardify.Dataset(url, cache_dir=cache, cache_limit=2 * max(sizes))
    disk = shardify.Dataset(local)
    for i in np.random.default_rng(4).permutation(300)[:40]:
        a, b = remote[int(i)], disk[int(i)]
        assert np.array_equal(a["image"], b["image"]) and a["label"] == b["label"]
    held = [f for _, _, files in os.walk(cache) for f in files if f.startswith("shard-")]
    assert held == []  # read by ranges: no shard fetched whole
    monkeypatch.setenv("SHARDIFY_REMOTE_FETCH", "whole")
    whole = shardify.Dataset(url, cache_dir=cache, cache_limit=2 * max(sizes))
    assert np.array_equal(whole[5]["image"], disk[5]["image"])
    assert [f for _, _, files in os.walk(cache) for f in files if f.startswith("shard-")]
    monkeypatch.setenv("SHARDIFY_REMOTE_FETCH", "sometimes")
    with pytest.raises(ValueError, match="SHARDIFY_REMOTE_FETCH is 'sometimes'"):
        shardify.Dataset(url, cache_dir=cache)


def test_a_token_in_the_query_is_shown_as_dots_in_every_output(served, tmp_path):
    url, _ = served
    token = "sv=2024&sig=planted-token-4e1d"
    signed, missing = f"{url}?{token}", f"{url}/nothing?{token}"
    env = dict(os.environ, SHARDIFY_CACHE_DIR=str(tmp_path / "cache"), SHARDIFY_CACHE_LIMIT="1M")
    shown = []
    for args, code in (("info", 0), ("info --json", 0), ("ls --limit 2", 0), ("show 3 --no-preview", 0),
                       ("verify", 0), ("verify --json", 0), ("stats --limit 20", 0), ("bench --epochs 1 --batch 8", 0),
                       ("verify", 2), ("verify --json", 2), ("stats", 2), ("bench", 2), ("info", 2)):
        command, *rest = args.split()
        r = subprocess.run([SHARDTOOL, command, signed if code == 0 else missing, *rest], capture_output=True,
                           text=True, env=env, timeout=120)
        assert r.returncode == code, r.stdout + r.stderr
        shown.append(r.stdout + r.stderr)
    ds = shardify.Dataset(signed, cache_dir=tmp_path / "cache", cache_limit="1M")
    shown += [repr(ds), repr(shardify.Loader(signed, batch_size=30, cache_dir=tmp_path / "cache", cache_limit="1M")),
              repr(shardify.Loader(ds, batch_size=30))]
    for call in (lambda: shardify.Dataset(missing, cache_dir=tmp_path / "cache"),
                 lambda: shardify.Loader(ds, split="test"), lambda: shardify.Loader(ds, fields=["depth"])):
        with pytest.raises((OSError, ValueError)) as raised:
            call()
        shown.append(str(raised.value))
    text = "\n".join(shown)
    assert "planted-token" not in text
    assert text.count(f"{url}?...") >= 8 and f"{url}/nothing?..." in text
