#!/usr/bin/env python3
"""Start N ranks of a command on this machine, as torchrun --standalone would.

    python3 scripts/launch.py --nproc 2 -- build/bin/shardtrain train DATA --out runs/x

Each process gets the environment torchrun gives its workers: RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and (when this script hosts the
store) TORCHELASTIC_USE_AGENT_STORE=True and TORCHELASTIC_RESTART_COUNT=0. With PyTorch
importable, this script hosts the c10d TCPStore itself, on the first free port of
--ports, so two launches never collide; without it, rank 0 hosts the store on a port
found free here. OMP_NUM_THREADS, when unset, becomes the cores divided by the ranks.

SIGINT and SIGTERM are passed on to every rank. When a rank fails, the others get
--grace seconds to stop by themselves (shardtrain names the failed rank), then SIGTERM,
then SIGKILL. The exit code is 0 when every rank succeeded, else the first failure's
(128 + signal number for a rank killed by a signal).

Debian 12's torchrun (torch 1.13 on Python 3.11) fails at start; on a machine where it
works, `torchrun --no-python --nproc-per-node N CMD ...` does the same and more.
"""
import argparse
import datetime
import os
import signal
import socket
import subprocess
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nproc", type=int, required=True, help="processes (ranks) to start")
    p.add_argument("--master-addr", default="127.0.0.1", help="address of the store (default %(default)s)")
    p.add_argument("--ports", default="29500-29599",
                   help="port or range FIRST-LAST for the store; the first free one is used (default %(default)s)")
    p.add_argument("--grace", type=float, default=10.0,
                   help="seconds the other ranks get to stop after one fails (default %(default)s)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command and its arguments")
    a = p.parse_args(argv)
    if a.command and a.command[0] == "--":
        a.command = a.command[1:]
    if not a.command:
        p.error("no command to run (put it after --)")
    if a.nproc < 1:
        p.error("--nproc must be >= 1")
    first, _, last = a.ports.partition("-")
    try:
        a.ports = range(int(first), int(last or first) + 1)
    except ValueError:
        p.error("--ports: expected PORT or FIRST-LAST, not '%s'" % a.ports)
    if not a.ports or a.ports[0] < 1 or a.ports[-1] > 65535:
        p.error("--ports: ports must lie in 1..65535")
    return a


def host_store(addr, ports, nproc):
    """(store, port): a TCPStore served here on the first port that binds; (None, port)
    without PyTorch (rank 0 then hosts the store on a port that was free a moment ago)."""
    try:
        from torch.distributed import TCPStore
    except ImportError:
        TCPStore = None
    for port in ports:
        if TCPStore is not None:
            try:
                store = TCPStore(addr, port, nproc, True, datetime.timedelta(seconds=300), False)
                return store, port
            except RuntimeError:
                continue
        with socket.socket() as s:
            try:
                s.bind((addr, port))
                return None, port
            except OSError:
                continue
    sys.exit("launch: no free port in %d-%d on %s" % (ports[0], ports[-1], addr))


def main(argv):
    a = parse_args(argv)
    store, port = host_store(a.master_addr, a.ports, a.nproc)
    base = dict(os.environ, WORLD_SIZE=str(a.nproc), LOCAL_WORLD_SIZE=str(a.nproc),
                MASTER_ADDR=a.master_addr, MASTER_PORT=str(port))
    if store is not None:
        base.update(TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT="0")
    if "OMP_NUM_THREADS" not in base:
        base["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // a.nproc))
    procs = []
    for rank in range(a.nproc):
        env = dict(base, RANK=str(rank), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen(a.command, env=env))

    def forward(signum, _frame):
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)

    failure, failed_at, stopped = 0, None, {}
    while any(p.returncode is None for p in procs):
        for rank, p in enumerate(procs):
            if p.returncode is not None or p.poll() is None:
                continue
            if p.returncode != 0:
                code = 128 - p.returncode if p.returncode < 0 else p.returncode
                how = ("signal %d" % -p.returncode) if p.returncode < 0 else ("code %d" % p.returncode)
                print("launch: rank %d (pid %d) exited with %s" % (rank, p.pid, how), file=sys.stderr)
                if failed_at is None:
                    failure, failed_at = code, time.monotonic()
        if failed_at is not None:
            late = time.monotonic() - failed_at
            stop = signal.SIGKILL if late > a.grace + 5 else signal.SIGTERM if late > a.grace else None
            for p in procs:
                if stop is not None and p.poll() is None and stopped.get(p.pid) != stop:
                    p.send_signal(stop)
                    stopped[p.pid] = stop
        time.sleep(0.05)
    del store  # the store outlives every rank
    return failure


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
