"""A Loader and a Dataset across fork(): refused with advice where they cannot work, and
never a hang. Every child here has a deadline (DataLoader's timeout, or a parent that
kills a child still running after 30 s)."""

import numpy as np
import pytest

import shardify
from conftest import run_python

torch = pytest.importorskip("torch")

ADVICE = "create a Loader in each process that reads"


def test_a_forked_child_refuses_the_parents_loader_and_exits_without_hanging(fmnist):
    # Children of a process whose Loader is open, iterated and decoding ahead, holding
    # batches: each refuses the Loader, reads with a Loader of its own, then exits with the
    # parent's batches alive, through sys.exit or the end of the script (atexit included).
    result = run_python(f"""
        import os, sys, time, shardify
        ds = shardify.Dataset({fmnist!r})
        loader = shardify.Loader(ds, batch_size=16, seed=1, prefetch=2, output="numpy")
        batches = iter(loader)
        kept = [next(batches) for _ in range(3)]

        def wait(pid):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    return os.waitstatus_to_exitcode(status)
                time.sleep(0.01)
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return "hung"

        def child(how):
            for attempt in (lambda: iter(loader), lambda: next(batches)):
                try:
                    attempt()
                    print("not refused", flush=True)
                except RuntimeError as e:
                    print("refused", "num_workers=0" in str(e), flush=True)
            own = shardify.Loader(ds, batch_size=100, output="numpy", threads=2)  # the advice works
            print("own", sum(len(b["index"]) for b in own) == ds.splits["train"], flush=True)
            if how == "sys.exit":
                sys.exit(3)

        for how in ("sys.exit", "end"):
            pid = os.fork()
            if pid == 0:
                child(how)
                break
            print(how, wait(pid), flush=True)
        else:
            print("parent", len(kept) + len(list(batches)) == len(loader))
        """, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    child = ["refused True", "refused True", "own True"]
    assert lines == child + ["sys.exit 3"] + child + ["end 0", "parent True"], result.stdout + result.stderr


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_dataloader_with_workers_is_refused_with_the_same_advice(fmnist, context):
    loader = shardify.Loader(fmnist, batch_size=32, seed=0)
    running = iter(loader)
    next(running)  # its threads are decoding ahead
    wrapped = torch.utils.data.DataLoader(loader, batch_size=None, num_workers=2, timeout=60,
                                          multiprocessing_context=context)
    # fork: the worker's iter() raises RuntimeError; spawn: pickling raises TypeError.
    with pytest.raises(RuntimeError if context == "fork" else TypeError, match=ADVICE):
        for _batch in wrapped:
            pass
    assert 1 + sum(1 for _ in running) == len(loader)  # the parent's Loader goes on


class Samples(torch.utils.data.Dataset):
    """A map-style dataset over a shardify.Dataset, as users write them."""

    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        sample = self.ds.get(i, fields=["image", "label"])
        return torch.from_numpy(sample["image"]), sample["label"]


def test_a_dataset_works_in_forked_dataloader_workers(fmnist):
    ds = shardify.Dataset(fmnist)
    busy = shardify.Loader(ds, batch_size=8, seed=0, threads=2)  # decoding from ds while workers fork
    running = iter(busy)
    next(running)

    def read(workers):
        options = dict(num_workers=workers, timeout=60, multiprocessing_context="fork") if workers else {}
        return [(x.numpy(), y.numpy()) for x, y in torch.utils.data.DataLoader(Samples(ds), batch_size=50, **options)]

    expected = read(0)
    got = read(2)
    assert len(got) == len(expected) == 12
    for (x, y), (ex, ey) in zip(got, expected):
        assert np.array_equal(x, ex) and np.array_equal(y, ey)
    assert sum(1 for _ in running) == len(busy) - 1
