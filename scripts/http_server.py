"""A static HTTP server for tests and benchmarks: Debian's lighttpd on loopback, serving a
folder, started and stopped around a `with` block."""

import contextlib
import os
import socket
import subprocess
import time


@contextlib.contextmanager
def lighttpd(root, work):
    """Debian's lighttpd (-D) serving `root` on a free port of 127.0.0.1 (yields the port),
    stopped on leaving. Started without LD_PRELOAD, so not with the sanitizer build's ASan
    runtime that the Python tests preload."""
    binary = "/usr/sbin/lighttpd"
    if not os.access(binary, os.X_OK):
        raise FileNotFoundError(f"{binary} is missing (Debian package lighttpd; scripts/install-deps.sh installs it)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = os.path.join(work, "lighttpd.conf")
    with open(conf, "w") as f:
        f.write(f'server.document-root = "{root}"\nserver.bind = "127.0.0.1"\nserver.port = {port}\n'
                f'server.errorlog = "{work}/lighttpd-error.log"\nmimetype.assign = ("" => "application/octet-stream")\n')
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    server = subprocess.Popen([binary, "-D", "-f", conf], env=env)
    try:
        for _ in range(200):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=10)
