"""One cache folder shared by Loaders in two processes: a limit the Loader takes at open is
enough for each, and both read through it what they read from disk; a smaller one is
refused at open, naming the smallest."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import shardify

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from http_server import lighttpd  # noqa: E402

OPTIONS = dict(batch_size=8, order="shard_windowed", window_shards=2, prefetch=2, repeats=2, output="numpy")

# Reads the served dataset (argv: url, local path, cache folder, limit, seed) and the
# local one, batch by batch; exits 0 when every batch is the same.
CHILD = """
import sys
import numpy as np
import shardify
url, local, cache, limit, seed = sys.argv[1:]
kw = dict(%r, seed=int(seed))
remote = shardify.Loader(url, cache_dir=cache, cache_limit=int(limit), **kw)
batches = 0
for a, b in zip(remote, shardify.Loader(local, **kw)):
    assert np.array_equal(a["image"], b["image"]) and np.array_equal(a["index"], b["index"])
    batches += 1
assert batches == len(remote) > 0, batches
""" % OPTIONS


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(url of the dataset, local path): 480 images in 48 shards or so, under lighttpd."""
    root = tmp_path_factory.mktemp("www")
    rng = np.random.default_rng(2)
    with shardify.Writer(root / "ds", fields={"image": ("u8", (1, 20, 20)), "label": "int"},
                         shard_size="4K") as w:
        for i in range(480):
            w.write({"image": rng.integers(0, 256, (1, 20, 20), dtype=np.uint8), "label": i % 3}, split="train")
    with lighttpd(root, root) as port:
        yield f"http://127.0.0.1:{port}/ds", str(root / "ds")


def test_two_processes_read_through_one_small_cache(served, tmp_path):
    url, local = served
    sizes = [os.path.getsize(os.path.join(local, f)) for f in os.listdir(local) if f.startswith("shard-")]
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match="must be at least") as refused:
        shardify.Loader(url, cache_dir=cache, cache_limit=max(sizes), **OPTIONS)
    smallest = int(re.search(r"must be at least (\d+) bytes", str(refused.value)).group(1))
    assert 2 * max(sizes) < smallest < sum(sizes) // 4  # the batches in flight, not just a window
    with pytest.raises(ValueError, match=f"must be at least {smallest} bytes"):
        shardify.Loader(url, cache_dir=cache, cache_limit=smallest - 1, **OPTIONS)
    shardify.Loader(url, cache_dir=cache, cache_limit=smallest, **OPTIONS)

    env = dict(os.environ, SHARDIFY_CACHE_WAIT="20")
    children = [subprocess.Popen([sys.executable, "-c", CHILD, url, local, str(cache), str(2 * smallest), str(seed)],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                for seed in (1, 2)]
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0, out
    cached = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(cache)
                 for f in files if not f.startswith(".") and not f.endswith(".lock"))
    assert 0 < cached <= 2 * smallest
