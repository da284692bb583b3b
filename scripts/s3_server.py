"""An S3-compatible object store on 127.0.0.1 for tests: OpenStack Swift's proxy, account,
container and object servers with the s3api middleware, all from Debian's python3-swift
(scripts/install-deps.sh installs it; the packages swift-proxy etc. add only init scripts and
/etc/swift, neither used here), one node with one device and one replica, set up under a
directory of its own. Nothing under /etc is read or written.

    /usr/bin/python3 scripts/s3_server.py start DIR   # prints {"endpoint": ..., ...}, also DIR/server.json
    /usr/bin/python3 scripts/s3_server.py stop DIR

`start` writes DIR/etc (swift.conf and the server configurations), DIR/srv/d1 (the device;
mount_check off, no xfs needed: Swift's metadata fits ext4's and tmpfs's xattrs) and DIR/log,
starts the four servers on free ports of 127.0.0.1, each one process (workers = 0) in a
process group of its own running as the current user, waits until all of them answer and
prints one JSON line:
    {"endpoint": "http://127.0.0.1:PORT", "access_key": "test:tester", "secret_key": "testing",
     "region": "us-east-1", "pids": [...]}
The proxy builds the rings (Swift's RingBuilder: 16 partitions on the one device) before it
loads. Its pipeline holds s3api before tempauth (user test:tester, key testing, account
AUTH_test, created on first use) and slo after it for multipart uploads. Buckets are
addressed path-style (http://127.0.0.1:PORT/bucket/key) or virtual-host style
(http://bucket.localhost:PORT/key: storage_domain = localhost). tempauth wants a cache in
each request (swift.cache): the proxy keeps one in its own process (cache_filter_factory),
so no memcached runs. `stop` ends the process groups, SIGKILL after 5 s.

From Python (any interpreter: the servers run under /usr/bin/python3, for which Debian's
python3-swift is installed):

    with s3_server(tmp_path) as s3:  # the dict above; the servers stopped on leaving
        ...
"""

import argparse
import contextlib
import ctypes
import json
import logging
import os
import pwd
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

PYTHON = "/usr/bin/python3"  # the interpreter Debian's python3-swift is installed for
ACCESS_KEY, SECRET_KEY, REGION = "test:tester", "testing", "us-east-1"
PACKAGE = "python3-swift"  # Debian's, for PYTHON
BACKENDS = ("account", "container", "object")
SERVERS = BACKENDS + ("proxy",)
START_TIMEOUT = 30  # seconds for all servers to answer
# curl runs without the sanitizer build's ASan runtime, which the Python tests preload.
CURL_ENV = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


# --- the cache that tempauth and the proxy keep their entries in (swift.cache) ---------------


class MemoryCache:
    """The part of swift.common.memcached.MemcacheRing that the proxy's pipeline uses, held in
    the proxy's process. Values go through JSON as they do on their way to memcached, and
    expire as memcached has them expire (time 0: never; up to 30 days: seconds from now;
    more: a Unix time)."""

    def __init__(self):
        self._items = {}  # key: (expiry time or 0, JSON text or None, value as given when not JSON)

    @staticmethod
    def _expiry(ttl):
        ttl = int(ttl or 0)
        if ttl <= 0:
            return 0
        return ttl if ttl > 30 * 24 * 3600 else time.time() + ttl

    def _lookup(self, key):
        item = self._items.get(key)
        if item is None:
            return None
        if item[0] and item[0] <= time.time():
            del self._items[key]
            return None
        return item

    def set(self, key, value, serialize=True, time=0, min_compress_len=0, raise_on_error=False):
        self._items[key] = (self._expiry(time), json.dumps(value), None) if serialize else \
            (self._expiry(time), None, value)

    def get(self, key, raise_on_error=False):
        item = self._lookup(key)
        if item is None:
            return None
        return json.loads(item[1]) if item[1] is not None else item[2]

    def delete(self, key, server_key=None):
        self._items.pop(key, None)

    def incr(self, key, delta=1, time=0):
        item = self._lookup(key)
        if item is None:
            value, expiry = max(0, int(delta)), self._expiry(time)
        else:
            old = json.loads(item[1]) if item[1] is not None else item[2]
            value, expiry = max(0, int(old) + int(delta)), item[0]
        self._items[key] = (expiry, json.dumps(value), None)
        return value

    def decr(self, key, delta=1, time=0):
        return self.incr(key, -delta, time)

    def set_multi(self, mapping, server_key, serialize=True, time=0, min_compress_len=0):
        for key, value in mapping.items():
            self.set(key, value, serialize, time)

    def get_multi(self, keys, server_key):
        return [self.get(key) for key in keys]


def cache_filter_factory(global_conf, **local_conf):
    """Paste filter factory: puts one MemoryCache into every request as swift.cache."""
    cache = MemoryCache()

    def make_filter(app):
        def with_cache(env, start_response):
            env["swift.cache"] = cache
            return app(env, start_response)
        return with_cache
    return make_filter


# --- configuration ------------------------------------------------------------------------

def _paths(root):
    root = os.path.abspath(root)
    return {"root": root, "etc": os.path.join(root, "etc"), "srv": os.path.join(root, "srv"),
            "log": os.path.join(root, "log"), "json": os.path.join(root, "server.json")}


def _free_ports(count):
    """`count` distinct ports that were free on 127.0.0.1 a moment ago."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _write_config(p, ports):
    """swift.conf and the four server configurations under p["etc"] (the proxy builds the rings)."""
    for d in (p["etc"], os.path.join(p["srv"], "d1"), p["log"]):
        os.makedirs(d, exist_ok=True)
    etc = p["etc"]
    for name in os.listdir(etc):  # rings of an earlier start name other ports
        if name.endswith((".ring.gz", ".builder")):
            os.remove(os.path.join(etc, name))
    with open(os.path.join(etc, "swift.conf"), "w") as f:
        f.write("[swift-hash]\nswift_hash_path_prefix = shardify-test\nswift_hash_path_suffix = shardify-test\n\n"
                "[storage-policy:0]\nname = Policy-0\ndefault = yes\n")
    common = (f"[DEFAULT]\nbind_ip = 127.0.0.1\nbind_port = {{port}}\nbind_timeout = 3\nworkers = 0\n"
              f"user = {pwd.getpwuid(os.getuid()).pw_name}\nswift_dir = {etc}\nlog_level = INFO\n")
    for kind in BACKENDS:
        with open(os.path.join(etc, f"{kind}-server.conf"), "w") as f:
            f.write(common.format(port=ports[kind]))
            f.write(f"devices = {p['srv']}\nmount_check = false\ndisable_fallocate = true\nfallocate_reserve = 0\n\n"
                    f"[pipeline:main]\npipeline = healthcheck {kind}-server\n\n"
                    f"[app:{kind}-server]\nuse = egg:swift#{kind}\n\n"
                    "[filter:healthcheck]\nuse = egg:swift#healthcheck\n")
    filters = {
        "catch_errors": "use = egg:swift#catch_errors",
        "gatekeeper": "use = egg:swift#gatekeeper",
        "healthcheck": "use = egg:swift#healthcheck",
        "proxy-logging": "use = egg:swift#proxy_logging",
        "cache": "paste.filter_factory = s3_server:cache_filter_factory",
        "listing_formats": "use = egg:swift#listing_formats",
        "s3api": f"use = egg:swift#s3api\nlocation = {REGION}\nstorage_domain = localhost",
        "tempauth": "use = egg:swift#tempauth\nuser_test_tester = testing .admin",
        "copy": "use = egg:swift#copy",
        "slo": "use = egg:swift#slo",
        "dlo": "use = egg:swift#dlo",
        "versioned_writes": "use = egg:swift#versioned_writes",
    }
    pipeline = ("catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo "
                "versioned_writes proxy-logging proxy-server")
    with open(os.path.join(etc, "proxy-server.conf"), "w") as f:
        f.write(common.format(port=ports["proxy"]))
        f.write(f"\n[pipeline:main]\npipeline = {pipeline}\n\n"
                "[app:proxy-server]\nuse = egg:swift#proxy\naccount_autocreate = true\n")
        for name, body in filters.items():
            f.write(f"\n[filter:{name}]\n{body}\n")


def _build_rings(p):
    """One ring per backend: one device (d1) at the port its configuration names, one replica,
    16 partitions. Built by the proxy's process, which has Swift imported already (the backends
    start without rings)."""
    import configparser

    from swift.common.ring import RingBuilder

    for kind in BACKENDS:
        conf = configparser.ConfigParser(interpolation=None)
        conf.read(os.path.join(p["etc"], f"{kind}-server.conf"))
        builder = RingBuilder(part_power=4, replicas=1, min_part_hours=0)
        builder.add_dev({"id": 0, "region": 1, "zone": 1, "ip": "127.0.0.1",
                         "port": conf.getint("DEFAULT", "bind_port"), "device": "d1", "weight": 1.0})
        builder.rebalance()
        builder.save(os.path.join(p["etc"], f"{kind}.builder"))
        builder.get_ring().save(os.path.join(p["etc"], f"{kind}.ring.gz"))


# --- starting and stopping ----------------------------------------------------------------

def _server_env():
    """The environment of the servers: without a preloaded sanitizer runtime (the Python tests
    of a sanitizer build preload ASan) and without the caller's Python path."""
    drop = ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "PYTHONPATH", "PYTHONHOME")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["EVENTLET_NO_GREENDNS"] = "yes"  # only addresses to resolve; saves importing dnspython
    return env


_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # whatever http_proxy says


def _answers(port):
    try:
        with _direct.open(f"http://127.0.0.1:{port}/healthcheck", timeout=2) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _log_tail(p, name, lines=20):
    try:
        with open(os.path.join(p["log"], f"{name}.log"), errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def _alive(pid):
    """Whether `pid` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _ours(pid, p):
    """Whether `pid` is one of this directory's servers (a recycled pid is not)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().decode(errors="replace").split("\0")
    except OSError:
        return False
    return "_serve" in args and p["root"] in args


_children = {}  # pid: Popen, of the servers this process started (it reaps them)


def _gone(pid):
    proc = _children.get(pid)
    if proc is not None:
        if proc.poll() is None:
            return False
        del _children[pid]
        return True
    return not _alive(pid)


def _kill(pids, p, grace=5.0):
    """SIGTERM to each server's process group, SIGKILL to those still there after `grace` s."""
    pids = [pid for pid in pids if not _gone(pid) and _ours(pid, p)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while pids and time.monotonic() < deadline:
            time.sleep(0.02)
            pids = [pid for pid in pids if not _gone(pid)]
        if not pids:
            return


def start(root, tied=False):
    """Sets up and starts the servers under `root`; returns the dict it prints. `tied`: the
    servers die with this process (else they outlive it, as `start` DIR needs)."""
    p = _paths(root)
    if not os.access(PYTHON, os.X_OK):
        raise RuntimeError(f"{PYTHON} is missing")
    if os.path.exists(p["json"]):
        with open(p["json"]) as f:
            old = json.load(f)
        if any(_alive(pid) and _ours(pid, p) for pid in old.get("pids", [])):
            raise RuntimeError(f"servers of {p['root']} are running (stop them first)")
    failure = ""
    for _ in range(2):  # a second try with other ports, should one have been taken meanwhile
        ports = dict(zip(SERVERS, _free_ports(len(SERVERS))))
        _write_config(p, ports)
        procs = {}
        try:
            env = _server_env()
            if tied:
                env["S3_SERVER_PARENT"] = str(os.getpid())
            for name in SERVERS:
                with open(os.path.join(p["log"], f"{name}.log"), "ab") as log:
                    procs[name] = subprocess.Popen(
                        [PYTHON, os.path.abspath(__file__), "_serve", name, p["root"]], stdin=subprocess.DEVNULL,
                        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=p["root"], start_new_session=True)
                _children[procs[name].pid] = procs[name]
            waiting = set(SERVERS)
            deadline = time.monotonic() + START_TIMEOUT
            while waiting and time.monotonic() < deadline:
                for name in [name for name in SERVERS if name in waiting]:
                    if procs[name].poll() is not None:
                        raise RuntimeError(f"{name} server exited ({procs[name].returncode}):\n"
                                           + _log_tail(p, name))
                    if _answers(ports[name]):
                        waiting.discard(name)
                if waiting:
                    time.sleep(0.05)
            if waiting:
                raise RuntimeError(f"not answering after {START_TIMEOUT} s: {', '.join(sorted(waiting))}")
        except BaseException as e:
            _kill([proc.pid for proc in procs.values()], p, grace=2.0)
            if not isinstance(e, RuntimeError):
                raise
            failure = str(e)
            continue
        info = {"endpoint": f"http://127.0.0.1:{ports['proxy']}", "access_key": ACCESS_KEY,
                "secret_key": SECRET_KEY, "region": REGION, "pids": [procs[name].pid for name in SERVERS]}
        with open(p["json"] + ".tmp", "w") as f:
            json.dump(info, f)
            f.write("\n")
        os.replace(p["json"] + ".tmp", p["json"])
        return info
    raise RuntimeError(f"the S3 server did not start (logs in {p['log']}): {failure}")


def stop(root):
    """Stops the servers that DIR/server.json names."""
    p = _paths(root)
    try:
        with open(p["json"]) as f:
            info = json.load(f)
    except FileNotFoundError:
        return
    _kill(info.get("pids", []), p)
    os.remove(p["json"])


@contextlib.contextmanager
def s3_server(root):
    """Starts the servers under `root`, yields the dict that `start` prints and stops them on
    leaving. Any interpreter will do: the servers are processes of /usr/bin/python3, children of
    this one (stopping them leaves no zombies) that die with it (a test run killed at its time
    limit leaves no servers behind)."""
    info = start(os.fspath(root), tied=True)
    try:
        yield info
    finally:
        stop(os.fspath(root))


# --- one server process ---------------------------------------------------------------------

def curl(s3, path, *args, secret=None, host=None, payload="UNSIGNED-PAYLOAD"):
    """(status, headers with lower-case names, body) of a request that curl signs with the
    server's key. The access key holds a ':', which --user would split at: it goes into the
    URL, percent-encoded. s3api wants x-amz-content-sha256 (curl 7.88 sends none itself). `host`:
    a name for 127.0.0.1 (curl takes any *.localhost for the loopback address)."""
    port = urllib.parse.urlsplit(s3["endpoint"]).port
    user = urllib.parse.quote(s3["access_key"], safe="")
    key = urllib.parse.quote(secret if secret is not None else s3["secret_key"], safe="")
    cmd = ["curl", "-sS", "--noproxy", "*", "--aws-sigv4", f"aws:amz:{s3['region']}:s3", "-D", "-",
           "-w", "\n%{http_code}"]
    if payload is not None:
        cmd += ["-H", f"x-amz-content-sha256: {payload}"]
    url = f"http://{user}:{key}@{host or '127.0.0.1'}:{port}{path}"
    out = subprocess.run(cmd + list(args) + [url], capture_output=True, timeout=30, check=True, env=CURL_ENV).stdout
    head, _, rest = out.partition(b"\r\n\r\n")
    if rest.startswith(b"HTTP/"):  # the final response after a 100 Continue
        head, _, rest = rest.partition(b"\r\n\r\n")
    body, _, status = rest.rpartition(b"\n")
    headers = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status), headers, body


def _serve(name, root):
    """Runs one server as Debian's swift-NAME-server does, with the swift.conf of `root` and its
    log lines appended to root/log/NAME.log instead of going to syslog."""
    p = _paths(root)
    parent = os.environ.pop("S3_SERVER_PARENT", None)
    if parent is not None:  # SIGKILL when the starting process ends (PR_SET_PDEATHSIG)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != int(parent):
            return 1
    sys.modules.setdefault("s3_server", sys.modules[__name__])  # for the proxy's paste.filter_factory
    try:
        import swift.common.utils as utils  # before anything reads swift.conf
    except ImportError as e:
        sys.exit(f"{e}: Debian package {PACKAGE} (scripts/install-deps.sh installs it)")
    utils.SWIFT_CONF_FILE = os.path.join(p["etc"], "swift.conf")
    log = open(os.path.join(p["log"], f"{name}.log"), "a", buffering=1)

    class LogFileHandler(logging.StreamHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(log)

    utils.ThreadSafeSysLogHandler = LogFileHandler  # what get_logger would send to syslog
    from swift.common.wsgi import run_wsgi
    if name == "proxy":
        _build_rings(p)
    kwargs = {}
    if name == "object":
        from swift.obj import server
        kwargs["global_conf_callback"] = server.global_conf_callback
    return run_wsgi(os.path.join(p["etc"], f"{name}-server.conf"), f"{name}-server", **kwargs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["start", "stop", "_serve"])
    parser.add_argument("args", nargs="+", metavar="DIR")
    a = parser.parse_args()
    if a.command == "_serve":
        return _serve(*a.args)
    if len(a.args) != 1:
        parser.error("one DIR")
    if a.command == "stop":
        stop(a.args[0])
        return 0
    try:
        info = start(a.args[0])
    except RuntimeError as e:
        print(f"s3_server: {e}", file=sys.stderr)
        return 1
    print(json.dumps(info), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
