"""shardify.view of a dataset in an S3-compatible store (scripts/s3_server.py on 127.0.0.1):
the overview, a thumbnail and a sample come through the same bounded cache as the Loader's,
as they do from disk."""

import os
import sys

import numpy as np
import pytest

import shardify
from shardify import view

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from s3_server import curl, s3_server  # noqa: E402
from test_view import Served  # noqa: E402
from test_s3 import AWS_VARIABLES  # noqa: E402


@pytest.fixture(scope="module")
def stored(tmp_path_factory, volumes):
    """(s3:// location, local copy, the cache folder, its limit): the volumes with masks
    written in shards of about 16 KiB, put into bucket `views` (the manifest last), with
    the AWS variables set for the store while the module runs."""
    local = tmp_path_factory.mktemp("local") / "ds"
    source = shardify.Dataset(volumes[0])
    fields = {"image": ("i16", (1, None, None, None)), "mask": ("u8", (1, None, None, None)),
              "image.spacing": ("f64", (3,))}
    with shardify.Writer(local, fields, shard_size="16K", meta={"mask": {"labels": '{"tumour": 1, "cyst": 2}'}}) as w:
        for i in range(len(source)):
            sample = source.get(i, fields=["image", "mask", "image.spacing"])
            w.write({"image": sample["image"], "mask": sample["mask"], "image.spacing": sample["image.spacing"]},
                    split="train" if i < 4 else "val")
    shards = sorted(f for f in os.listdir(local) if f.startswith("shard-"))
    assert len(shards) >= 4
    cache = tmp_path_factory.mktemp("cache")
    limit = 2 * max(os.path.getsize(local / f) for f in shards)
    with s3_server(tmp_path_factory.mktemp("s3")) as s3, pytest.MonkeyPatch.context() as env:
        assert curl(s3, "/views", "-X", "PUT")[0] == 200
        for name in shards + ["manifest.sfm"]:
            assert curl(s3, f"/views/ds/{name}", "-T", str(local / name))[0] == 200
        for name in AWS_VARIABLES:
            env.delenv(name, raising=False)
        env.setenv("HOME", str(cache))  # nothing read from the real ~/.aws
        env.setenv("AWS_ENDPOINT_URL", s3["endpoint"])
        env.setenv("AWS_ACCESS_KEY_ID", s3["access_key"])
        env.setenv("AWS_SECRET_ACCESS_KEY", s3["secret_key"])
        env.setenv("AWS_REGION", s3["region"])
        yield "s3://views/ds", str(local), cache, limit


def held(cache):
    """Bytes of the shards in the cache folder."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(cache) for f in files
               if f.startswith("shard-"))


def compare(location, local, cache, limit):
    """Checks the viewer of `location` against that of `local`: the overview, a thumbnail, a
    slice with its mask, a sample, a page of a split, a missing sample."""
    remote = Served(view.serve(location, port=0, cache_dir=cache, cache_limit=limit))
    disk = Served(view.serve(local, port=0))
    try:
        assert remote.server.loopback and remote.server.server_address[0] == "127.0.0.1"
        o, d = remote.json("/api/overview"), disk.json("/api/overview")
        assert o["path"] == location and o["samples"] == d["samples"] == 6
        assert {k: v for k, v in o.items() if k != "path"} == {k: v for k, v in d.items() if k != "path"}
        assert [m["name"] for m in o["mask_labels"]] == ["tumour", "cyst"]
        for path in ("/api/image/5.png?size=96", "/api/image/2.png?axis=1&slice=4"):
            assert remote.png(path)[3].tobytes() == disk.png(path)[3].tobytes()
        s = remote.json("/api/sample/4")
        assert s == disk.json("/api/sample/4") and s["split"] == "val" and s["mask_labels_present"]
        assert remote.json("/api/samples?split=val")["total"] == 2
        assert "no sample 6" in remote.error("/api/sample/6", 404)
    finally:
        remote.close()
        disk.close()


def test_overview_thumbnail_and_sample_from_s3_as_from_disk(stored, tmp_path):
    location, local, cache, limit = stored
    total = sum(os.path.getsize(os.path.join(local, f)) for f in os.listdir(local) if f.startswith("shard-"))
    assert total > limit
    compare(location, local, cache, limit)
    assert held(cache) == 0  # a cache smaller than the dataset: each sample read by ranges, nothing kept
    compare(location, local, tmp_path / "room", total)
    assert 0 < held(tmp_path / "room") <= total  # room for it: shards fetched whole into the cache


def test_the_cache_limit_is_checked_at_open(stored, capsys):
    location, _, cache, _ = stored
    with pytest.raises(ValueError, match="cache_limit"):
        view.serve(location, port=0, cache_dir=cache, cache_limit="lots")
    assert view.main([location, "--port", "0", "--cache-dir", str(cache), "--cache-limit", "100"]) == 2
    assert "smaller than the largest shard" in capsys.readouterr().err
    assert np.isfinite(shardify.Dataset(location, cache_dir=cache)[0]["image"]).all()
