"""An object store that is not trusted: a stand-in S3 server on 127.0.0.1, written here,
whose listings may name keys that leave the dataset's prefix (`..` segments, spelled out or
as XML entities), which may refuse or fail reads, trickle, announce objects far larger than
their listing says, or have no bucket. It records every request. shardify refuses such a
listing before it fetches, writes or deletes anything; `shardtool verify` calls a refused,
failed or trickling read an I/O error (exit code 2), not damage; an object past its bound is
refused before it is received; a destination that takes no writes fails before converting;
a run removes the staging folders of killed runs; and no output shows the AWS secret or
session token."""

import contextlib
import http.server
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from xml.sax.saxutils import escape

import pytest

import shardify

BIN = os.path.join(os.path.dirname(os.path.abspath(shardify.__file__)), "..", "..", "bin")
SHARDTOOL, SHARDIFY = os.path.join(BIN, "shardtool"), os.path.join(BIN, "shardify")
AWS_VARIABLES = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
                 "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3", "SHARDIFY_S3_ADDRESSING")
BUCKET = "bucket4"
ACCESS_KEY, SECRET, SESSION = "AKIPLANTED", "planted-secret-9b2c", "planted-session-51e7"
HUGE, SENT_AT_MOST = 10 << 30, 64 << 20  # what a huge object's answer announces, and sends at most


class Store(http.server.ThreadingHTTPServer):
    """Objects by "bucket/key". `spell(key)` writes a key into a listing; `refuse`: an HTTP
    status that GETs of shards get instead of the object (None: none). `huge`: keys whose GET
    announces HUGE bytes and sends zeros until SENT_AT_MOST or the client leaves (`sent`:
    how many got out); `trickle`: an ending of keys whose GET sends 2 bytes a second (for 30
    s at most). `buckets`: when set, a PUT into another bucket gets 404 NoSuchBucket;
    `refuse_writes`: PUTs get 403; `hold`: an ending of keys whose PUT waits for `release`
    (30 s at most), then fails."""

    daemon_threads = True

    def __init__(self, objects, spell):
        super().__init__(("127.0.0.1", 0), Handler)
        self.objects, self.spell, self.refuse, self.requests = dict(objects), spell, None, []
        self.huge, self.sent, self.trickle = set(), {}, None
        self.buckets, self.refuse_writes, self.hold, self.release = None, False, None, threading.Event()
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

    def send_slowly(self, key, length, chunks, pause):
        """Announces `length` bytes, sends `chunks` with `pause` seconds between, stops when
        the client leaves; returns the bytes that got out."""
        self.send_response(200)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.close_connection = True
        self.connection.settimeout(10)
        sent = 0
        try:
            for chunk in chunks:
                self.wfile.write(chunk)
                sent += len(chunk)
                time.sleep(pause)
        except OSError:
            pass
        return sent

    def do_GET(self):
        key, query = self.key()
        store = self.server
        if "list-type" in query:  # ListObjectsV2 of bucket `key`
            prefix = f"{key}/{query.get('prefix', [''])[0]}"
            items = "".join(f"<Contents><Key>{store.spell(k.split('/', 1)[1])}</Key>"
                            f"<Size>{len(store.objects[k])}</Size></Contents>"
                            for k in sorted(store.objects) if k.startswith(prefix))
            xml = f"<ListBucketResult><IsTruncated>false</IsTruncated>{items}</ListBucketResult>"
            return self.answer(200, xml.encode())
        if store.refuse and key.endswith(".sfs"):
            return self.answer(store.refuse)
        if key in store.huge:
            zeros = bytes(1 << 20)
            store.sent[key] = self.send_slowly(key, HUGE, (zeros for _ in range(SENT_AT_MOST >> 20)), 0)
            return None
        if key not in store.objects:
            return self.answer(404, b"<Error><Code>NoSuchKey</Code></Error>")
        if store.trickle and key.endswith(store.trickle):
            body = store.objects[key]
            return self.send_slowly(key, len(body), (body[i:i + 1] for i in range(60)), 0.5)
        self.answer(200, store.objects[key])

    def do_PUT(self):
        key, _ = self.key()
        store = self.server
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if store.buckets is not None and key.split("/", 1)[0] not in store.buckets:
            return self.answer(404, b"<Error><Code>NoSuchBucket</Code></Error>")
        if store.refuse_writes:
            return self.answer(403, b"<Error><Code>AccessDenied</Code></Error>")
        if store.hold and key.endswith(store.hold):
            store.release.wait(30)
            return self.answer(500)
        store.objects[key] = body
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
        store.release.set()
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


def dataset_objects(path, prefix):
    """The files of dataset folder `path` as objects {BUCKET/prefix/name: bytes}."""
    objects = {}
    for name in os.listdir(path):
        with open(os.path.join(path, name), "rb") as f:
            objects[f"{BUCKET}/{prefix}/{name}"] = f.read()
    return objects


def test_verify_calls_refused_and_failed_reads_io_errors_and_nothing_shows_the_secret(aws, fmnist, tmp_path):
    shown = []
    with serving(dataset_objects(fmnist, "ds"), aws) as store:
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


def test_verify_abandons_a_server_that_trickles_naming_the_object_and_the_rate(aws, fmnist, tmp_path):
    aws.setenv("SHARDIFY_REMOTE_STALL_TIMEOUT", "1")
    with serving(dataset_objects(fmnist, "ds"), aws) as store:
        store.trickle = ".sfs"  # 2 bytes a second
        start = time.monotonic()
        code, out = shardtool("verify", f"s3://{BUCKET}/ds", "--cache-dir", tmp_path / "cache")
        seconds = time.monotonic() - start
    assert code == 2, out  # an I/O error
    assert f"/{BUCKET}/ds/shard-0000" in out and "slower than 1024 bytes a second for 1 s" in out
    assert seconds < 15


@pytest.mark.parametrize("case", ["manifest", "part manifest", "part object"])
def test_an_object_larger_than_its_bound_is_refused_before_it_is_received(aws, parts, fmnist_png, case):
    """The previous manifest.sfm of a conversion and a part.sfm are fetched capped (1 GiB, as
    a manifest read from disk); a part's object in a merge at the size its listing gives."""
    key = {"manifest": f"{BUCKET}/ds/manifest.sfm", "part manifest": f"{BUCKET}/pds/parts/00001-of-00002/part.sfm",
           "part object": f"{BUCKET}/pds/parts/00001-of-00002/shard-00000.sfs"}[case]
    with serving(parts if case == "part object" else {}, aws) as store:
        store.huge = {key}
        with pytest.raises(Exception) as refused:
            if case == "manifest":
                shardify.convert(fmnist_png, f"s3://{BUCKET}/ds", overwrite=True, progress=False)
            elif case == "part manifest":
                shardify.convert(fmnist_png, f"s3://{BUCKET}/pds", part="1/2", progress=False)
            else:
                shardify.merge(f"s3://{BUCKET}/pds")
    bound = f"{len(parts[key])} bytes, the size the listing says" if case == "part object" else \
        f"{1 << 30} bytes, the most this read takes"
    assert f"/{key}: the object is larger than {bound} (the answer's Content-Length is {HUGE})" in str(refused.value)
    assert store.sent[key] < SENT_AT_MOST // 4  # refused at its Content-Length: the rest never went out


@pytest.mark.parametrize("writes", ["no bucket", "refused"])
def test_a_destination_that_takes_no_writes_fails_before_converting(aws, fmnist_png, tmp_path, writes):
    with serving({}, aws) as store:
        store.buckets, store.refuse_writes = {BUCKET}, writes == "refused"
        location = f"s3://{'nobucket' if writes == 'no bucket' else BUCKET}/ds"
        with pytest.raises(OSError) as failed:
            shardify.convert(fmnist_png, location, shard_size="64K", progress=False)
    puts = [path for method, path in store.requests if method == "PUT"]
    assert len(puts) == 1 and "/ds/.shardify-probe-" in puts[0], puts  # nothing converted to be put
    said = "the bucket does not exist (HTTP 404)" if writes == "no bucket" else "access refused (HTTP 403)"
    assert f"writing to {location} (checked first" in str(failed.value) and said in str(failed.value)
    assert os.listdir(tmp_path / "cache" / "uploads") == []  # no staging folder left


def test_a_run_removes_the_staging_folders_of_killed_runs_and_no_live_ones(aws, fmnist_png, tmp_path):
    uploads = tmp_path / "cache" / "uploads"
    live = uploads / "s3-elsewhere-999999999"  # held by a live process's lock, whatever its name says
    live.mkdir(parents=True)
    hold = "import fcntl, sys; f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX); print(flush=True); " \
           "sys.stdin.read()"
    holder = subprocess.Popen([sys.executable, "-c", hold, f"{live}.lock"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
    try:
        holder.stdout.readline()
        with serving({}, aws) as store:
            store.hold = "/k/manifest.sfm"  # the upload's last put: the stage then holds the dataset
            run = subprocess.Popen([SHARDIFY, str(fmnist_png), "-o", f"s3://{BUCKET}/k", "--shard-size", "64K"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 60
            while ("PUT", f"/{BUCKET}/k/manifest.sfm") not in store.requests and run.poll() is None \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            run.kill()
            run.wait()
            killed = [name for name in os.listdir(uploads) if name.endswith(f"-{run.pid}")]
            assert killed and "shard-00000.sfs" in os.listdir(uploads / killed[0])
            store.hold = None
            shardify.convert(fmnist_png, f"s3://{BUCKET}/k", shard_size="64K", progress=False)
        assert sorted(os.listdir(uploads)) == [live.name, f"{live.name}.lock"]
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
