"""Datasets in an S3-compatible object store (scripts/s3_server.py: Swift's s3api on
127.0.0.1): shardify.convert writes one to s3://bucket/prefix, the manifest last, and
shardify.Dataset and Loader read it back through the local cache with requests libcurl
signs (AWS Signature Version 4), path-style and virtual-host style, with the credentials
from the AWS variables or a profile."""

import os
import re
import sys
import urllib.parse

import numpy as np
import pytest

import shardify

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from s3_server import curl, s3_server  # noqa: E402

AWS_VARIABLES = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
                 "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "SHARDIFY_S3_ADDRESSING")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """The server, with bucket `sets` holding the fmnist PNGs converted to sets/fmnist."""
    with s3_server(tmp_path_factory.mktemp("s3")) as info:
        assert curl(info, "/sets", "-X", "PUT")[0] == 200
        yield info


@pytest.fixture
def aws(s3, tmp_path, monkeypatch):
    """The AWS variables for the server (nothing read from the real ~/.aws), and a cache."""
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3["endpoint"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3["access_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3["secret_key"])
    monkeypatch.setenv("AWS_REGION", s3["region"])
    monkeypatch.setenv("SHARDIFY_CACHE_DIR", str(tmp_path / "cache"))
    return monkeypatch


@pytest.fixture(scope="module")
def uploaded(s3, fmnist_png, tmp_path_factory):
    """(summary, local copy) of the fmnist PNGs converted into s3://sets/fmnist and to disk."""
    local = tmp_path_factory.mktemp("local") / "fmnist"
    options = dict(split={"train": 0.8, "val": 0.2}, shard_size="64K", progress=False)
    shardify.convert(fmnist_png, local, **options)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ENDPOINT_URL", s3["endpoint"])
        mp.setenv("AWS_ACCESS_KEY_ID", s3["access_key"])
        mp.setenv("AWS_SECRET_ACCESS_KEY", s3["secret_key"])
        mp.setenv("SHARDIFY_CACHE_DIR", str(tmp_path_factory.mktemp("stage")))
        summary = shardify.convert(fmnist_png, "s3://sets/fmnist", **options)
        assert not os.listdir(os.path.join(os.environ["SHARDIFY_CACHE_DIR"], "uploads"))  # the stage is gone
    return summary, str(local)


def test_a_dataset_converted_into_s3_reads_as_the_one_on_disk(aws, uploaded):
    summary, local = uploaded
    assert summary.uploaded_to == "s3://sets/fmnist" and summary.uploaded_objects == summary.shards + 1
    assert "uploaded" in str(summary) and "the manifest last" in str(summary)
    remote, disk = shardify.Dataset("s3://sets/fmnist"), shardify.Dataset(local)
    assert remote.splits == disk.splits and len(remote) == len(disk) == 600
    for i in (0, 311, 599):
        assert np.array_equal(remote[i]["image"], disk[i]["image"]) and remote[i]["label"] == disk[i]["label"]
    a = [b["image"] for b in shardify.Loader("s3://sets/fmnist", batch_size=50, seed=2)]
    b = [b["image"] for b in shardify.Loader(local, batch_size=50, seed=2)]
    assert len(a) == len(b) and all(torch_equal(x, y) for x, y in zip(a, b))


def torch_equal(x, y):
    return bool((x == y).all())


def test_virtual_host_addressing_and_a_profile_read_it_too(aws, uploaded, tmp_path):
    port = urllib.parse.urlsplit(aws_endpoint()).port
    (tmp_path / "credentials").write_text(f"[lab]\naws_access_key_id = {os.environ['AWS_ACCESS_KEY_ID']}\n"
                                          f"aws_secret_access_key = {os.environ['AWS_SECRET_ACCESS_KEY']}\n")
    (tmp_path / "config").write_text(f"[profile lab]\nregion = us-east-1\nendpoint_url = http://localhost:{port}\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION"):
        aws.delenv(name)
    aws.setenv("AWS_PROFILE", "lab")
    aws.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    aws.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    aws.setenv("SHARDIFY_S3_ADDRESSING", "virtual")  # http://sets.localhost:PORT/fmnist/...
    ds = shardify.Dataset("s3://sets/fmnist")
    assert len(ds) == 600 and ds[5]["image"].shape == (1, 28, 28)


def aws_endpoint():
    return os.environ["AWS_ENDPOINT_URL"]


def test_a_wrong_key_or_a_missing_dataset_is_an_error_naming_the_object(aws, uploaded):
    with pytest.raises(FileNotFoundError, match="nothing"):
        shardify.Dataset("s3://sets/nothing")
    aws.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(OSError, match=r"sets/fmnist/manifest.sfm: access refused \(HTTP 403\) with the credentials "
                                      r"of access key test:tester"):
        shardify.Dataset("s3://sets/fmnist")
    aws.setenv("AWS_ACCESS_KEY_ID", "")
    with pytest.raises(ValueError, match="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together"):
        shardify.Dataset("s3://sets/fmnist")


def test_converting_onto_a_dataset_in_s3_needs_overwrite(aws, uploaded, fmnist_png):
    with pytest.raises(FileExistsError, match="s3://sets/fmnist: a dataset is there already"):
        shardify.convert(fmnist_png, "s3://sets/fmnist", progress=False)
    with pytest.raises(FileNotFoundError, match="bucket does not exist") as failed:
        shardify.convert(fmnist_png, "s3://no-such-bucket/x", progress=False)
    # A put that failed during the conversion cancelled it; one after it keeps the converted
    # dataset and names its folder.
    kept = os.listdir(os.path.join(os.environ["SHARDIFY_CACHE_DIR"], "uploads"))
    assert bool(kept) == ("the converted dataset is kept in" in str(failed.value))


def keys(s3, prefix):
    """The keys the server lists under `prefix` of bucket `sets`."""
    status, _, body = curl(s3, "/sets?list-type=2&prefix=" + urllib.parse.quote(prefix, safe=""))
    assert status == 200, body
    return sorted(re.findall(r"<Key>([^<]*)</Key>", body.decode() if isinstance(body, bytes) else body))


def test_parts_converted_into_s3_merge_there_into_the_one_run_dataset(s3, aws, uploaded, fmnist_png):
    options = dict(split={"train": 0.8, "val": 0.2}, shard_size="64K", progress=False)
    parts = [shardify.convert(fmnist_png, "s3://sets/inparts", part=f"{k}/2", **options) for k in (1, 2)]
    assert [p.part for p in parts] == ["1/2", "2/2"] and all(p.uploaded_objects > 1 for p in parts)
    listed = keys(s3, "inparts/")
    assert all(k.startswith("inparts/parts/0000") for k in listed)
    assert "inparts/parts/00002-of-00002/part.sfm" in listed and len(listed) == sum(p.uploaded_objects for p in parts)
    with pytest.raises(FileNotFoundError, match=r"s3://sets/inparts: not a shardify dataset \(no manifest.sfm\)"):
        shardify.Dataset("s3://sets/inparts")  # not a dataset before the merge
    again = shardify.convert(fmnist_png, "s3://sets/inparts", part="2/2", **options)
    assert again.part_complete and again.uploaded_objects == 0  # judged by the part.sfm in the store
    merged = shardify.merge("s3://sets/inparts")
    assert merged.parts == 2 and merged.samples == 600 and not merged.already_merged
    assert not [k for k in keys(s3, "inparts/") if "/parts/" in k]  # the parts' objects are gone
    _, local = uploaded
    remote, disk = shardify.Dataset("s3://sets/inparts"), shardify.Dataset(local)
    assert remote.splits == disk.splits
    for i in (0, 299, 300, 599):
        assert np.array_equal(remote[i]["image"], disk[i]["image"]) and remote[i]["label"] == disk[i]["label"]
    assert shardify.merge("s3://sets/inparts").already_merged
    assert shardify.convert(fmnist_png, "s3://sets/inparts", part="1/2", **options).part_complete
    assert not os.listdir(os.path.join(os.environ["SHARDIFY_CACHE_DIR"], "uploads"))


def test_merge_in_s3_names_a_missing_part_by_its_objects(s3, aws, fmnist_png):
    shardify.convert(fmnist_png, "s3://sets/half", part="1/2", progress=False)
    with pytest.raises(FileNotFoundError, match=r"s3://sets/half.*part 2/2"):
        shardify.merge("s3://sets/half")
    assert keys(s3, "half/parts/00001-of-00002/")  # nothing deleted


def test_overwrite_in_s3_leaves_no_shard_of_the_dataset_it_replaces(s3, aws, fmnist_png):
    small = shardify.convert(fmnist_png, "s3://sets/again", shard_size="32K", progress=False)
    large = shardify.convert(fmnist_png, "s3://sets/again", shard_size="1M", overwrite=True, progress=False)
    assert small.shards > large.shards
    assert len(keys(s3, "again/")) == large.shards + 1  # its shards and its manifest
    assert len(shardify.Dataset("s3://sets/again")) == 600
