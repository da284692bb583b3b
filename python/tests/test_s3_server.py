"""The S3 test server (scripts/s3_server.py: OpenStack Swift's s3api from Debian's packages on
127.0.0.1) answers requests that curl signs itself (AWS Signature Version 4, --aws-sigv4),
as shardify's S3 client does through libcurl: bucket creation, uploads, whole and ranged
reads, HEAD, listings, path-style and virtual-host style, and refuses a wrong key."""

import hashlib
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from s3_server import CURL_ENV, curl, s3_server  # noqa: E402

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with s3_server(tmp_path_factory.mktemp("s3")) as info:
        yield info


@pytest.fixture(scope="module")
def shard(s3, tmp_path_factory):
    """(key, bytes) of an object in bucket `shards`, with a second one beside it and one elsewhere."""
    data = os.urandom(100 * 1024)
    path = tmp_path_factory.mktemp("up") / "shard.bin"
    path.write_bytes(data)
    assert curl(s3, "/shards", "-X", "PUT")[0] == 200
    for key in ("ds/shard-00000.bin", "ds/manifest.json", "other/x.bin"):
        status, headers, _ = curl(s3, f"/shards/{key}", "-T", str(path))
        assert status == 200, headers
        assert headers["etag"] == f'"{hashlib.md5(data).hexdigest()}"'
    return "ds/shard-00000.bin", data


def error_code(body):
    return ET.fromstring(body).findtext("Code")


def test_whole_and_ranged_reads(s3, shard):
    key, data = shard
    status, headers, body = curl(s3, f"/shards/{key}")
    assert status == 200 and body == data and int(headers["content-length"]) == len(data)
    status, headers, body = curl(s3, f"/shards/{key}", "-H", "Range: bytes=1000-1999")
    assert status == 206 and body == data[1000:2000]
    assert headers["content-range"] == f"bytes 1000-1999/{len(data)}"
    status, _, body = curl(s3, f"/shards/{key}", "-H", "Range: bytes=-100")  # a shard's end
    assert status == 206 and body == data[-100:]
    status, _, body = curl(s3, f"/shards/{key}", "-H", f"Range: bytes={len(data) - 10}-")
    assert status == 206 and body == data[-10:]


def test_head_gives_the_size(s3, shard):
    key, data = shard
    status, headers, _ = curl(s3, f"/shards/{key}", "--head", "-o", os.devnull)
    assert status == 200 and int(headers["content-length"]) == len(data)
    status, _, _ = curl(s3, "/shards/ds/nothing", "--head", "-o", os.devnull)
    assert status == 404


def test_listing_by_prefix(s3, shard):
    # The query goes as it is signed: parameters sorted, values percent-encoded ('/' as %2F).
    status, _, body = curl(s3, "/shards?list-type=2&prefix=ds%2F")
    assert status == 200
    root = ET.fromstring(body)
    listed = {c.findtext(f"{NS}Key"): int(c.findtext(f"{NS}Size")) for c in root.iter(f"{NS}Contents")}
    assert listed == {"ds/manifest.json": len(shard[1]), "ds/shard-00000.bin": len(shard[1])}
    assert root.findtext(f"{NS}IsTruncated") == "false"
    status, _, body = curl(s3, "/shards?delimiter=%2F&list-type=2&prefix=")
    prefixes = [p.findtext(f"{NS}Prefix") for p in ET.fromstring(body).iter(f"{NS}CommonPrefixes")]
    assert status == 200 and prefixes == ["ds/", "other/"]


def test_missing_objects_and_buckets(s3, shard):
    status, _, body = curl(s3, "/shards/ds/nothing")
    assert status == 404 and error_code(body) == "NoSuchKey"
    status, _, body = curl(s3, "/nobucket/x")
    assert status == 404 and error_code(body) == "NoSuchBucket"


def test_virtual_host_style(s3, shard):
    # s3api's storage_domain = localhost: the bucket is the host name's first label.
    key, data = shard
    status, _, body = curl(s3, f"/{key}", host="shards.localhost")
    assert status == 200 and body == data
    status, _, body = curl(s3, "/shards/" + key, host="localhost")  # path-style under that name
    assert status == 200 and body == data


def test_a_wrong_key_is_refused(s3, shard):
    key, _ = shard
    status, _, body = curl(s3, f"/shards/{key}", secret="wrong")
    assert status == 403 and error_code(body) == "SignatureDoesNotMatch"
    status, _, body = curl({**s3, "access_key": "test:nobody"}, f"/shards/{key}")  # an unknown user
    assert status == 403 and error_code(body) == "SignatureDoesNotMatch"
    # Unsigned requests are no S3 requests to s3api: Swift's own API refuses them (400 here).
    unsigned = subprocess.run(["curl", "-sS", "--noproxy", "*", "-o", os.devnull, "-w", "%{http_code}",
                               f"{s3['endpoint']}/shards/{key}"], capture_output=True, timeout=30, check=True,
                              env=CURL_ENV).stdout
    assert 400 <= int(unsigned) < 500


def test_the_payload_hash(s3, shard, tmp_path):
    path = tmp_path / "small"
    path.write_bytes(b"hello")
    sha = hashlib.sha256(b"hello").hexdigest()
    status, _, _ = curl(s3, "/shards/hashed", "-T", str(path), payload=sha)
    assert status == 200
    status, _, body = curl(s3, "/shards/hashed", "-T", str(path), payload=hashlib.sha256(b"other").hexdigest())
    assert status == 400 and error_code(body) == "BadDigest"
    status, _, body = curl(s3, "/shards/hashed", payload=None)
    assert status == 400 and error_code(body) == "InvalidRequest"  # x-amz-content-sha256 missing
