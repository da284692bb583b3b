"""`pip install .` and `pip wheel .` as docs/python.md gives them, offline: a venv that sees
Debian's site-packages (numpy, torch, setuptools, wheel), no build isolation, no index.
CTest sets SHARDIFY_BUILD_DIR to its own build tree, so pip packages the extension built
there instead of building the project a second time; without it the test skips."""

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import numpy as np
import pytest

from conftest import CLASSES

ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = os.environ.get("SHARDIFY_BUILD_DIR")

pytestmark = pytest.mark.skipif(not BUILD_DIR, reason="needs SHARDIFY_BUILD_DIR, a CMake build tree with the "
                                "Python package (CTest sets it); without one pip would build the whole project")

# Run inside the venv from a folder outside the repository: convert class-folder PNGs,
# read samples back and one batch of torch tensors.
USE = """
import importlib.metadata, json, sys
import shardify
src, dst = sys.argv[1:3]
summary = shardify.convert(src, dst, split={"train": 0.8, "val": 0.2}, progress=False)
ds = shardify.Dataset(dst)
samples = [ds[i] for i in (0, 1, len(ds) - 1)]
batch = next(iter(shardify.Loader(dst, split="train", batch_size=16, shuffle=False)))
print(json.dumps({
    "file": shardify.__file__, "version": shardify.__version__,
    "metadata_version": importlib.metadata.version("shardify"),
    "samples": summary.samples, "splits": ds.splits, "classes": ds.classes,
    "read": [{"path": s["path"], "label": s["label"], "image": s["image"].tolist()} for s in samples],
    "batch": [type(batch["image"]).__module__, list(batch["image"].shape), str(batch["image"].dtype)],
}))
"""


def pip_env():
    """The environment without the build tree on PYTHONPATH, so only the venv's shardify imports."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(SHARDIFY_BUILD_DIR=BUILD_DIR, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def run(command, cwd, timeout=240):
    result = subprocess.run([str(c) for c in command], cwd=cwd, env=pip_env(), capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv made as docs/python.md says, with shardify installed into it by pip from this repository."""
    path = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", "--system-site-packages", path], cwd=path)
    run([path / "bin" / "python", "-m", "pip", "install", "--no-build-isolation", "--no-index", "."], cwd=ROOT)
    return path


def test_installed_package_converts_and_reads(venv, fmnist_png, fmnist_images, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    out = json.loads(run([venv / "bin" / "python", "-c", USE, fmnist_png, tmp_path / "ds"], cwd=work))
    assert Path(out["file"]).resolve().is_relative_to(venv.resolve()), out["file"]
    assert out["version"] == out["metadata_version"]  # CMake's project version, through both routes
    assert out["samples"] == 600 and sum(out["splits"].values()) == 600
    assert out["classes"] == sorted(CLASSES)
    images, labels = fmnist_images
    for sample in out["read"]:
        source = int(os.path.basename(sample["path"]).split(".")[0])  # the PNG's number
        assert np.array_equal(np.array(sample["image"], dtype=np.uint8)[0], images[source])
        assert out["classes"][sample["label"]] == CLASSES[labels[source]]
    assert out["batch"] == ["torch", [16, 1, 28, 28], "torch.uint8"]


def test_wheel_holds_every_module_the_typing_files_and_the_extension(venv, tmp_path):
    run([venv / "bin" / "python", "-m", "pip", "wheel", "--no-build-isolation", "--no-index", "--no-deps", ".",
         "-w", tmp_path], cwd=ROOT)
    wheels = list(tmp_path.glob("shardify-*.whl"))
    assert len(wheels) == 1, wheels
    names = set(zipfile.ZipFile(wheels[0]).namelist())
    modules = {f"shardify/{p.name}" for p in (ROOT / "python" / "shardify").glob("*.py")}
    assert modules <= names, sorted(modules - names)
    assert {"shardify/py.typed", "shardify/_core.pyi"} <= names, "the package is typed (PEP 561)"
    assert "shardify/_core" + sysconfig.get_config_var("EXT_SUFFIX") in names
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert f"-{tag}-{tag}-" in wheels[0].name  # a platform wheel for this interpreter, not a pure one


def test_cmake_install_writes_only_under_its_prefix(tmp_path):
    """`cmake --install build --prefix DIR` (docs/python.md): every file it installs lies under
    DIR, and the package imports from there with PYTHONPATH alone."""
    prefix = tmp_path / "prefix"
    result = subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", str(prefix)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    installed = [Path(line) for line in (Path(BUILD_DIR) / "install_manifest.txt").read_text().splitlines() if line]
    assert installed, "nothing installed"
    outside = [str(p) for p in installed if not p.resolve().is_relative_to(prefix.resolve())]
    assert not outside, f"installed outside {prefix}: {outside}"
    site = prefix / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    assert (site / "shardify" / ("_core" + sysconfig.get_config_var("EXT_SUFFIX"))) in installed
    assert {site / "shardify" / "py.typed", site / "shardify" / "_core.pyi"} <= set(installed)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run([sys.executable, "-c", "import shardify; print(shardify.__file__)"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).resolve().is_relative_to(site.resolve())
