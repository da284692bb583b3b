"""Fixtures of the Python package's tests: small real datasets made from Debian's
Fashion-MNIST (dataset-fashion-mnist) and synthetic volumes, converted with shardify."""

import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import shardify

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from common import CLASSES, FMNIST, read_idx  # noqa: E402  (the examples' Fashion-MNIST helpers)


@pytest.fixture(scope="session")
def fmnist_images():
    """The first 600 Fashion-MNIST test images and labels."""
    images = read_idx(os.path.join(FMNIST, "t10k-images-idx3-ubyte.gz"))[:600]
    labels = read_idx(os.path.join(FMNIST, "t10k-labels-idx1-ubyte.gz"))[:600]
    return images, labels


@pytest.fixture(scope="session")
def fmnist_png(tmp_path_factory, fmnist_images):
    """Class-folder PNGs, as users have them."""
    from PIL import Image
    root = tmp_path_factory.mktemp("fmnist-png")
    images, labels = fmnist_images
    for i, (image, label) in enumerate(zip(images, labels)):
        folder = root / CLASSES[label]
        folder.mkdir(exist_ok=True)
        Image.fromarray(image).save(folder / f"{i:05d}.png")
    return root


@pytest.fixture(scope="session")
def fmnist(tmp_path_factory, fmnist_png):
    """The PNGs converted: splits train (480) and val (120)."""
    out = tmp_path_factory.mktemp("fmnist") / "ds"
    shardify.convert(fmnist_png, out, split={"train": 0.8, "val": 0.2}, progress=False, shard_size="64K")
    return str(out)


def write_nifti(path, array, spacing=(1.0, 1.0, 1.0), slope=1.0, inter=0.0):
    """A minimal NIfTI-1 file (.nii) of a [D, H, W] array (stored x fastest, so W first),
    its values meaning stored * slope + inter (scl_slope, scl_inter)."""
    codes = {np.dtype(np.uint8): (2, 8), np.dtype(np.int16): (4, 16), np.dtype(np.float32): (16, 32),
             np.dtype(np.uint16): (512, 16)}
    code, bits = codes[array.dtype]
    depth, height, width = array.shape
    header = bytearray(352)
    struct.pack_into("<i", header, 0, 348)
    struct.pack_into("<8h", header, 40, 3, width, height, depth, 1, 1, 1, 1)
    struct.pack_into("<hh", header, 70, code, bits)
    struct.pack_into("<8f", header, 76, 1.0, spacing[2], spacing[1], spacing[0], 1, 1, 1, 1)
    struct.pack_into("<f", header, 108, 352.0)
    struct.pack_into("<ff", header, 112, slope, inter)  # scl_slope, scl_inter
    struct.pack_into("<b", header, 123, 10)  # xyzt_units: mm, s
    struct.pack_into("<hh", header, 252, 0, 1)  # qform_code 0, sform_code 1
    struct.pack_into("<4f", header, 280, spacing[2], 0, 0, 0)
    struct.pack_into("<4f", header, 296, 0, spacing[1], 0, 0)
    struct.pack_into("<4f", header, 312, 0, 0, spacing[0], 0)
    header[344:348] = b"n+1\0"
    with open(path, "wb") as f:
        f.write(bytes(header))
        f.write(np.ascontiguousarray(array).tobytes())


@pytest.fixture(scope="session")
def volumes(tmp_path_factory):
    """Six i16 volumes with a small foreground blob each, as image/mask pairs, converted
    with patch_size 16x16x16 (chunked, with foreground locations). Returns (path, arrays)."""
    root = tmp_path_factory.mktemp("volumes")
    rng = np.random.default_rng(7)
    arrays = []
    (root / "src" / "images").mkdir(parents=True)
    (root / "src" / "masks").mkdir()
    for case in range(6):
        shape = (20 + case, 24, 28)
        image = rng.integers(-100, 100, size=shape, dtype=np.int16)
        mask = np.zeros(shape, dtype=np.uint8)
        z, y, x = 3 + case, 5, 7
        mask[z:z + 3, y:y + 3, x:x + 3] = 1 + case % 2
        write_nifti(root / "src" / "images" / f"case{case}.nii", image)
        write_nifti(root / "src" / "masks" / f"case{case}.nii", mask)
        arrays.append((image, mask))
    out = root / "ds"
    shardify.convert(root / "src", out, layout="pairs", patch_size=(16, 16, 16), progress=False)
    return str(out), arrays


def run_python(code, env=None, timeout=120):
    """Runs `code` in a fresh interpreter (the one running the tests) with this package."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=timeout)


@pytest.fixture(scope="session")
def gi(tmp_path_factory):
    """A 2D multi-label segmentation dataset: python/examples/uw_madison_standin.py's UW-Madison
    GI tract layout (6 slices of 2 cases, 266x266 and 360x310 u16; three organs that overlap)
    converted by the rle layout: mask u8 [3, H, W], one channel per organ, named."""
    root = tmp_path_factory.mktemp("gi")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "uw_madison_standin.py")
    subprocess.run([sys.executable, script, str(root / "src"), "--cases", "2", "--days", "1", "--slices", "3"],
                   check=True, capture_output=True, timeout=120)
    shardify.convert(root / "src", root / "gi", split={"train": 0.5, "val": 0.5}, group_by="case", progress=False)
    return str(root / "gi")
