"""An object store that is not trusted: a stand-in S3 server on 127.0.0.1, written here,
whose listings may name keys that leave the dataset's prefix (`..` segments, spelled out or
as XML entities) and which may refuse or fail reads. It records every request. shardify
refuses such a listing before it fetches, writes or deletes anything; `shardtool verify`
calls a refused or failed read an I/O error (exit code 2), not damage; and no output shows
the AWS secret or session token."""

import contextlib
import http.server
import os
import subprocess
import threading
import urllib.parse
from xml.sax.saxutils import escape

import pytest

import shardify

SHARDTOOL = os.path.join(os.path.dirname(os.path.abspath(shardify.__file__)), "..", "..", "bin", "shardtool")
AWS_VARIABLES = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
                 "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3", "SHARDIFY_S3_ADDRESSING")
BUCKET = "bucket4"
ACCESS_KEY, SECRET, SESSION = "AKIPLANTED", "planted-secret-9b2c", "planted-session-51e7"


class Store(http.server.ThreadingHTTPServer):
    """Objects by "bucket/key". `spell(key)` writes a key into a listing; `refuse`: an HTTP
    status that GETs of shards get instead of the object (None: none)."""

    def __init__(self, objects, spell):
        super().__init__(("127.0.0.1", 0), Handler)
        self.objects, self.spell, self.refuse, self.requests = dict(objects), spell, None, []
        self.url = f"http://127.0.0.1:{self.server_port}"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body=b""):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def key(self):
        self.server.requests.append((self.command, self.path))
        path, _, query = self.path.partition("?")
        return urllib.parse.unquote(path[1:]), urllib.parse.parse_qs(query)

    def do_GET(self):
        key, query = self.key()
        store = self.server
        if "list-type" in query:  # ListObjectsV2 of bucket `key`
            prefix = f"{key}/{query.get('prefix', [''])[0]}"
            items = "".join(f"<Contents><Key>{store.spell(k.split('/', 1)[1])}</Key></Contents>"
                            for k in sorted(store.objects) if k.startswith(prefix))
            xml = f"<ListBucketResult><IsTruncated>false</IsTruncated>{items}</ListBucketResult>"
            return self.answer(200, xml.encode())
        if store.refuse and key.endswith(".sfs"):
            return self.answer(store.refuse)
        if key not in store.objects:
            return self.answer(404, b"<Error><Code>NoSuchKey</Code></Error>")
        self.answer(200, store.objects[key])

    def do_PUT(self):
        key, _ = self.key()
        self.server.objects[key] = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.answer(200)

    def do_DELETE(self):
        key, _ = self.key()
        self.server.objects.pop(key, None)
        self.answer(204)


@contextlib.contextmanager
def serving(objects, monkeypatch, spell=escape):
    """The Store serving `objects`, AWS_ENDPOINT_URL naming it."""
    store = Store(objects, spell)
    thread = threading.Thread(target=store.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", store.url)
    try:
        yield store
    finally:
        store.shutdown()
        store.server_close()


def outside(store, prefix):
    """The requests for anything but the listing of BUCKET and the objects under `prefix`."""
    return [r for r in store.requests if not r[1].startswith((f"/{BUCKET}/{prefix}/", f"/{BUCKET}?"))]


@pytest.fixture
def aws(tmp_path, monkeypatch):
    """Planted credentials, one try per request, a cache in tmp_path; nothing from ~/.aws."""
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SHARDIFY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION)
    monkeypatch.setenv("SHARDIFY_REMOTE_ATTEMPTS", "1")
    return monkeypatch


@pytest.fixture(scope="module")
def parts(fmnist_png, tmp_path_factory):
    """The objects of the fmnist PNGs converted in 2 parts at s3://BUCKET/pds: {bucket/key: bytes}."""
    dest = tmp_path_factory.mktemp("parts") / "ds"
    for k in (1, 2):
        shardify.convert(fmnist_png, dest, part=f"{k}/2", shard_size="64K", progress=False)
    objects = {}
    for folder, _, files in os.walk(dest):
        for name in files:
            if not name.startswith("."):
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    objects[f"{BUCKET}/pds/{os.path.relpath(path, dest)}"] = f.read()
    return objects


def entities(key):
    return escape(key).replace("../", "..&#47;")


@pytest.mark.parametrize("spell", [escape, entities], ids=["plain", "entities"])
def test_a_merge_refuses_a_listing_key_that_leaves_the_prefix(aws, parts, tmp_path, spell):
    name = "parts/00001-of-00002/../../../../bucket9/other-object"
    objects = dict(parts, **{f"{BUCKET}/pds/{name}": b"x", "bucket9/other-object": b"not the dataset's"})
    error = ""
    with serving(objects, aws, spell) as store:
        try:
            shardify.merge(f"s3://{BUCKET}/pds")
        except OSError as e:
            error = str(e)
    assert not [f for _, _, files in os.walk(tmp_path) for f in files if f == "other-object"]
    assert outside(store, "pds") == []
    assert [method for method, _ in store.requests] == ["GET"]  # the listing, and nothing after it
    assert store.objects["bucket9/other-object"] == b"not the dataset's"
    assert f"pds/{name}" in error and f"s3://{BUCKET}/pds/parts/" in error


def test_a_part_converted_again_deletes_nothing_outside_its_folder(aws, fmnist_png):
    name = "parts/00001-of-00002/../../../victim"
    error = ""
    with serving({f"{BUCKET}/p/{name}": b"x", f"{BUCKET}/victim": b"keep me"}, aws) as store:
        try:
            shardify.convert(fmnist_png, f"s3://{BUCKET}/p", part="1/2", overwrite=True, shard_size="64K",
                             progress=False)
        except OSError as e:
            error = str(e)
    assert outside(store, "p") == []
    assert store.objects[f"{BUCKET}/victim"] == b"keep me"
    assert not [r for r in store.requests if r[0] != "GET"]  # refused before converting
    assert f"p/{name}" in error


def test_a_merge_passes_over_a_hidden_folder_under_parts_and_leaves_it(aws, parts):
    hidden = f"{BUCKET}/pds/parts/.00001-of-00002/note"
    with serving(dict(parts, **{hidden: b"not a part's"}), aws) as store:
        merged = shardify.merge(f"s3://{BUCKET}/pds")
    assert merged.parts == 2 and merged.samples == 600
    assert store.objects[hidden] == b"not a part's"
    assert not [r for r in store.requests if "/.00001-of-00002/" in r[1]]  # neither fetched nor deleted
    assert f"{BUCKET}/pds/manifest.sfm" in store.objects
    assert not [k for k in store.objects if k.startswith(f"{BUCKET}/pds/parts/0")]


def shardtool(*args):
    r = subprocess.run([SHARDTOOL, *map(str, args)], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def test_verify_calls_refused_and_failed_reads_io_errors_and_nothing_shows_the_secret(aws, fmnist, tmp_path):
    objects = {}
    for name in os.listdir(fmnist):
        with open(os.path.join(fmnist, name), "rb") as f:
            objects[f"{BUCKET}/ds/{name}"] = f.read()
    shown = []
    with serving(objects, aws) as store:
        location = f"s3://{BUCKET}/ds"
        for status in (403, 503):
            store.refuse = status
            for json in ([], ["--json"]):
                code, out = shardtool("verify", location, *json, "--cache-dir", tmp_path / f"c{status}")
                shown.append(out)
                assert code == 2, out  # an I/O error, not a problem found in the data
                assert f"HTTP {status}" in out
        ds = shardify.Dataset(location, cache_dir=tmp_path / "py")
        with pytest.raises(OSError) as refused:
            ds[0]
        shown += [str(refused.value), repr(ds)]
        store.refuse = None
        for command in (["verify"], ["verify", "--json"], ["info", "--json"], ["stats"]):
            code, out = shardtool(command[0], location, *command[1:], "--cache-dir", tmp_path / "ok")
            assert code == 0, out
            shown.append(out)
    text = "\n".join(shown)
    assert SECRET not in text and SESSION not in text
    assert f"access key {ACCESS_KEY}" in text  # a refusal names the key, as documented
