"""Reading a dataset over HTTP or S3 against reading it from local disk: Debian's lighttpd
(or, with --store s3, Swift's s3api from scripts/s3_server.py, with signed requests) on
127.0.0.1 behind a proxy that plays a distant link: it holds back each response's first
bytes for the latency and passes responses on at most at the bandwidth, all connections
together (a smooth token bucket; lighttpd's own limits are per-second budgets, which let a
dataset of a few dozen MiB through in one burst).

Runs shardify.Loader (batch 256, order shard_windowed over windows of 2 shards, prefetch 2,
2 threads) over Fashion-MNIST's 60,000 training images written into shards of about 1 MiB,
for 3 epochs each:
  local             the dataset directory itself
  remote, cold      the URL, with an empty cache as large as the dataset
  remote, warm      the URL again, with that cache now full
  remote, 25%       the URL, with a cache limited to a quarter of the dataset
and prints samples/s per epoch, the bytes the server sent per epoch (counted by the proxy)
and the cache's size after each epoch. Then it reads 400 samples in a random order one at a
time (shardify.Dataset(url)[i], as a map-style dataset is read) with the 25% cache, the
shards fetched whole (SHARDIFY_REMOTE_FETCH=whole) and read by ranges (the default there).

    PYTHONPATH=build/python /usr/bin/python3 bench/bench_remote.py [--mbps 100] [--latency-ms 20] [--store s3]
"""

import argparse
import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

import numpy as np

import shardify

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
from common import FMNIST, read_idx  # noqa: E402
from http_server import lighttpd  # noqa: E402  (scripts/http_server.py)
from s3_server import curl, s3_server  # noqa: E402  (scripts/s3_server.py)


def write_dataset(path):
    images = read_idx(os.path.join(FMNIST, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(FMNIST, "train-labels-idx1-ubyte.gz"))
    with shardify.Writer(path, fields={"image": ("u8", (1, 28, 28)), "label": "int"},
                         classes=[str(c) for c in range(10)], shard_size="1M") as w:
        for image, label in zip(images, labels):
            w.write({"image": image[None], "label": int(label)}, split="train")


class LatencyProxy:
    """Forwards 127.0.0.1:port to `upstream`, holding back each response's first bytes
    for `latency` seconds (one round trip of a distant server per request) and passing
    responses on at `bytes_per_s`, all connections together."""

    def __init__(self, upstream, latency, bytes_per_s):
        self.upstream, self.latency, self.rate = upstream, latency, bytes_per_s
        self.sent = 0  # bytes passed to clients (responses, headers included)
        self._lock = threading.Lock()
        self._free_at = time.perf_counter()  # when the link has sent what it was given
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            client, _ = self.listener.accept()
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        server = socket.create_connection(self.upstream)

        def pump(src, dst, delay):
            first = True
            try:
                while True:
                    data = src.recv(1 << 16)
                    if not data:
                        break
                    if first and delay:
                        time.sleep(delay)
                    first = False
                    if delay:  # a response: it takes its turn on the link
                        with self._lock:
                            self.sent += len(data)
                            start = max(time.perf_counter(), self._free_at)
                            self._free_at = start + len(data) / self.rate
                            done = self._free_at
                        time.sleep(max(0.0, done - time.perf_counter()))
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        threading.Thread(target=pump, args=(client, server, 0), daemon=True).start()
        pump(server, client, self.latency)


@contextlib.contextmanager
def served(store, www, ds, work):
    """Serves the dataset `ds` (in folder `www`): yields (port of the server, the location
    of the dataset with `port` standing for the proxy's port, to be formatted)."""
    if store == "http":
        with lighttpd(www, work) as port:
            yield port, "http://127.0.0.1:{port}/" + os.path.basename(ds)
        return
    shutil.rmtree(os.path.join(work, "s3"), ignore_errors=True)  # a new store each run
    with s3_server(os.path.join(work, "s3")) as s3:
        assert curl(s3, "/bench", "-X", "PUT")[0] == 200
        names = sorted(os.listdir(ds), key=lambda n: n == "manifest.sfm")  # the manifest last
        for name in names:
            status, _, body = curl(s3, f"/bench/fmnist/{name}", "-T", os.path.join(ds, name))
            assert status == 200, body
        # the reader signs for the proxy's address, which passes the bytes on unchanged
        os.environ.update(AWS_ACCESS_KEY_ID=s3["access_key"], AWS_SECRET_ACCESS_KEY=s3["secret_key"],
                          AWS_REGION=s3["region"], AWS_ENDPOINT_URL="http://127.0.0.1:{port}")
        yield int(s3["endpoint"].rsplit(":", 1)[1]), "s3://bench/fmnist"


def cache_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files
               if not f.startswith(".") and not f.endswith(".lock"))


def run(name, location, proxy, cache=None, limit=None, epochs=3):
    kw = dict(batch_size=256, order="shard_windowed", window_shards=2, prefetch=2, threads=2, seed=0,
              output="numpy")
    if cache is not None:
        kw.update(cache_dir=cache, cache_limit=limit)
    loader = shardify.Loader(location, **kw)
    rows = []
    for epoch in range(epochs):
        before, start, n = proxy.sent, time.perf_counter(), 0
        for batch in loader:
            n += len(batch["label"])
        seconds = time.perf_counter() - start
        rows.append({"run": name, "epoch": epoch, "samples_per_s": n / seconds, "seconds": seconds,
                     "fetched_mib": (proxy.sent - before) / 2**20,
                     "cache_mib": cache_bytes(cache) / 2**20 if cache else None})
        r = rows[-1]
        held = "-" if r["cache_mib"] is None else f"{r['cache_mib']:.1f} MiB"
        print(f"{name:15} epoch {epoch}: {r['samples_per_s']:>10,.0f} samples/s, fetched {r['fetched_mib']:6.1f} MiB, "
              f"cache {held}", flush=True)
    loader.close()
    return rows


def run_random(name, location, proxy, cache, limit, fetch, samples=400):
    """Reads `samples` random samples of `location` one at a time; one row."""
    shutil.rmtree(cache, ignore_errors=True)
    os.environ["SHARDIFY_REMOTE_FETCH"] = fetch
    try:
        ds = shardify.Dataset(location, cache_dir=cache, cache_limit=limit)
    finally:
        del os.environ["SHARDIFY_REMOTE_FETCH"]
    order = np.random.default_rng(0).permutation(len(ds))[:samples]
    before, start = proxy.sent, time.perf_counter()
    for i in order:
        ds[int(i)]["image"]
    seconds = time.perf_counter() - start
    row = {"run": name, "samples_per_s": samples / seconds, "seconds": seconds,
           "fetched_mib": (proxy.sent - before) / 2**20, "cache_mib": cache_bytes(cache) / 2**20}
    print(f"{name:15} {samples} samples: {row['samples_per_s']:>8,.1f} samples/s, fetched "
          f"{row['fetched_mib']:6.1f} MiB, cache {row['cache_mib']:.1f} MiB", flush=True)
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mbps", type=float, default=100, help="link bandwidth in MB/s")
    p.add_argument("--latency-ms", type=float, default=20, help="delay before each response")
    p.add_argument("--work", default=None, help="folder for the dataset and caches (default: a temporary one)")
    p.add_argument("--json", default=None, help="also write the rows here")
    p.add_argument("--store", choices=("http", "s3"), default="http",
                   help="lighttpd, or an S3-compatible store (Swift's s3api) with signed requests")
    a = p.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="shardify-bench-remote-")
    www, ds = os.path.join(work, "www"), os.path.join(work, "www", "fmnist")
    if not os.path.exists(os.path.join(ds, "manifest.sfm")):
        os.makedirs(www, exist_ok=True)
        write_dataset(ds)
    size = sum(os.path.getsize(os.path.join(ds, f)) for f in os.listdir(ds))
    print(f"{ds}: {len(os.listdir(ds)) - 1} shards, {size / 2**20:.1f} MiB; server {a.mbps:g} MB/s, "
          f"latency {a.latency_ms:g} ms")
    with served(a.store, www, ds, work) as (port, location):
        proxy = LatencyProxy(("127.0.0.1", port), a.latency_ms / 1000, a.mbps * 1e6)
        url = location.format(port=proxy.port)
        if "AWS_ENDPOINT_URL" in os.environ:
            os.environ["AWS_ENDPOINT_URL"] = os.environ["AWS_ENDPOINT_URL"].format(port=proxy.port)
        rows = run("local", ds, proxy)
        cache = os.path.join(work, "cache")
        shutil.rmtree(cache, ignore_errors=True)
        rows += run("remote, cold", url, proxy, cache, size)
        rows += run("remote, warm", url, proxy, cache, size)
        small = os.path.join(work, "cache-25")
        shutil.rmtree(small, ignore_errors=True)
        rows += run("remote, 25%", url, proxy, small, size // 4)
        rows.append(run_random("random, whole", url, proxy, small, size // 4, "whole"))
        rows.append(run_random("random, ranges", url, proxy, small, size // 4, "auto"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
