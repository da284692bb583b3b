"""Every module of the package imports first, in an interpreter that has imported nothing of
shardify, and every transform and preset comes back from a pickle loaded there augmenting as
the original does: what a DataLoader worker, a checkpoint or a `python -c` does first.

One interpreter serves all the checks: it imports numpy and torch once (this process never
imports torch), then forks a child per check, each starting with no shardify module loaded
(it says so before its check). A first child pickles the cases below and what they give."""

import importlib.util
import os
import pickle
import pkgutil

import pytest

import shardify
from conftest import run_python

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the transforms need torch")

POSITION = {"seed": 7, "epoch": 1, "step": 3}

# Runs make(), then each check in a child of its own; a child writes (what its work
# returned, None) or (None, the traceback) to OUT/<name>.pkl.
SERVER = """
    import importlib, os, pickle, sys, traceback
    import numpy, torch  # the package's dependencies, shared by the children
    sys.path.insert(0, {tests!r})
    out, modules = {out!r}, {modules!r}

    def fork(name, work, fresh=True):
        pid = os.fork()
        if pid == 0:
            try:
                loaded = sorted(m for m in sys.modules if m.partition(".")[0] == "shardify")
                if fresh and loaded:
                    raise AssertionError(f"not a fresh start: {{loaded}} already imported")
                result = (work(), None)
            except BaseException:
                result = (None, traceback.format_exc())
            with open(os.path.join(out, name + ".pkl"), "wb") as f:
                pickle.dump(result, f)
            os._exit(0)
        return pid

    def check(module):
        importlib.import_module(module)

    def load(k):
        with open(os.path.join(out, "cases.pkl"), "rb") as f:
            name, data = pickle.load(f)[k]  # a str and bytes: this imports nothing
        transform = pickle.loads(data)  # the check: this imports what the transform needs
        import test_imports
        return test_imports.compare(out, k, transform)

    os.waitpid(fork("make", lambda: __import__("test_imports").make(out), fresh=False), 0)
    with open(os.path.join(out, "make.pkl"), "rb") as f:
        count = pickle.load(f)[0] or 0
    children = [fork(f"import-{{i}}", lambda m=m: check(m)) for i, m in enumerate(modules)]
    children += [fork(f"load-{{k}}", lambda k=k: load(k)) for k in range(count)]  # all at once
    for pid in children:
        os.waitpid(pid, 0)
    """


def package_modules():
    """shardify and every module in its folder, as the folder lists them."""
    found = [m.name for m in pkgutil.iter_modules(shardify.__path__, "shardify.")]
    assert "shardify.transforms" in found and "shardify._core" in found, found
    return ["shardify"] + sorted(found)


def transform_cases():
    """(name, transform): one of each class in T.__all__ and each preset, all with options
    set so that a lost attribute would show in the output."""
    import shardify.transforms as T
    made = {
        "Transform": T.Transform(),  # abstract: both raise NotImplementedError
        "Compose": T.Compose([T.RandFlip(axes=(0, 2), p=0.7), T.ScaleIntensity()], fuse=False),
        "NnUnet": T.NnUnet(spatial_dims=3, p={"rotate": 1.0, "noise": 1.0}, label_pad=0, seed=5),
        "RandFlip": T.RandFlip(axes=(1, 2), p=0.6, seed=2),
        "RandAffine": T.RandAffine(rotate=20, scale=(0.8, 1.2), p=0.9),
        "RandRotate": T.RandRotate((10.0, 0.0, 30.0), p=0.8),
        "RandZoom": T.RandZoom(0.7, 1.3, p=0.9),
        "RandGaussianNoise": T.RandGaussianNoise(std=0.3, p=0.8, seed=3),
        "ScaleIntensity": T.ScaleIntensity(minv=-1.0, maxv=2.0, channel_wise=True),
        "NormalizeIntensity": T.NormalizeIntensity(nonzero=True, channel_wise=True),
    }
    classes = {n for n in T.__all__ if isinstance(getattr(T, n), type)}
    assert classes == set(made), f"give each transform class of T.__all__ a case here: {classes ^ set(made)}"
    return list(made.items()) + [(f"preset {n}", T.preset(n, spatial_dims=3)) for n in T.PRESETS]


def make_batch():
    import torch
    g = torch.Generator().manual_seed(0)
    image = torch.rand((2, 2, 10, 9, 8), generator=g) * 100
    return {"image": image, "mask": (image[:, :1] > 50).to(torch.uint8)}


def outcome(transform, batch):
    """What `transform` gives at POSITION: the batch, or the name of what it raises."""
    try:
        return transform(batch, **POSITION)
    except Exception as e:
        return type(e).__name__


def make(out):
    """Writes the cases pickled (out/cases.pkl: (name, bytes)) and what each gives
    (out/want.pkl); returns how many there are. A case that changes nothing fails."""
    import torch
    cases, want = transform_cases(), []
    for name, t in cases:
        want.append(outcome(t, make_batch()))
        if isinstance(want[-1], dict) and name != "preset none":
            assert not torch.equal(want[-1]["image"], make_batch()["image"]), f"{name} changes nothing"
    with open(os.path.join(out, "cases.pkl"), "wb") as f:
        pickle.dump([(name, pickle.dumps(t)) for name, t in cases], f)
    with open(os.path.join(out, "want.pkl"), "wb") as f:
        pickle.dump([((type(t).__module__, type(t).__qualname__), w) for (_, t), w in zip(cases, want)], f)
    return len(cases)


def compare(out, k, transform):
    """How case k, loaded as `transform`, differs from the original (an empty list: not at all)."""
    import torch
    with open(os.path.join(out, "want.pkl"), "rb") as f:
        kind, want = pickle.load(f)[k]
    got = outcome(transform, make_batch())
    if (type(transform).__module__, type(transform).__qualname__) != kind:
        return [f"loads as {type(transform)}, not {kind}"]
    if isinstance(want, str) or isinstance(got, str):
        return [] if got == want else [f"gives {got!r}, the original {want!r}"]
    if sorted(got) != sorted(want):
        return [f"gives keys {sorted(got)}, the original {sorted(want)}"]
    return [f"{key} differs from the original's" for key in want
            if got[key].dtype != want[key].dtype or not torch.equal(got[key], want[key])]


def test_each_module_imports_first_and_each_transform_loads_from_a_pickle_in_a_fresh_interpreter(tmp_path):
    modules = package_modules()
    tests = os.path.dirname(os.path.abspath(__file__))
    result = run_python(SERVER.format(tests=tests, out=str(tmp_path), modules=modules))
    assert result.returncode == 0, result.stderr

    def answer(name):
        with open(tmp_path / f"{name}.pkl", "rb") as f:
            return pickle.load(f)

    count, error = answer("make")
    assert error is None, f"making the cases:\n{error}"
    failed = {m: answer(f"import-{i}")[1] for i, m in enumerate(modules) if answer(f"import-{i}")[1]}
    assert not failed, "".join(f"\nimporting {m} first:\n{e}" for m, e in failed.items())
    with open(tmp_path / "cases.pkl", "rb") as f:
        names = [name for name, _ in pickle.load(f)]
    assert len(names) == count > 0
    for k, name in enumerate(names):
        differences, error = answer(f"load-{k}")
        assert error is None, f"loading {name} first:\n{error}"
        assert differences == [], f"{name}: {differences}"
