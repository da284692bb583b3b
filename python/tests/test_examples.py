"""The examples run as a user runs them (tiny settings): they train, print finite figures
and write what they say."""

import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import shardify

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
SHARDTOOL = os.path.join(os.path.dirname(os.path.abspath(shardify.__file__)), "..", "..", "bin", "shardtool")


def run(script, *args, cwd):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(shardify.__file__))))
    out = subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *args], cwd=cwd, capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_unet3d_trains_from_augmented_patches(tmp_path):
    grid = tmp_path / "grid.png"
    out = run("unet3d_patches.py", "--work", str(tmp_path / "work"), "--epochs", "2", "--steps", "3", "--patch", "16",
              "--base", "4", "--grid", str(grid), cwd=tmp_path)
    assert "read with margin (5, 5, 5)" in out  # nnU-Net's margin for a 16^3 patch
    epochs = re.findall(r"epoch (\d): loss ([\d.]+), train foreground Dice ([\d.]+), ([\d.]+) samples/s", out)
    assert [e[0] for e in epochs] == ["0", "1"], out
    for _, loss, dice, rate in epochs:
        assert math.isfinite(float(loss)) and 0 <= float(dice) <= 1 and float(rate) > 0
    assert grid.stat().st_size > 100


def test_hdf5_file_goes_through_the_writer_and_reads_back(tmp_path):
    pytest.importorskip("h5py", reason="Debian's python3-h5py")
    out = run("hdf5_to_shards.py", "--work", str(tmp_path), "--samples", "300", cwd=tmp_path)
    assert "wrote 300 samples" in out and "300 samples, each equal to its HDF5 row" in out, out
    ds = shardify.Dataset(tmp_path / "shards")
    assert ds.splits == {"train": 240, "val": 60} and ds.classes == ["ring", "bar", "dot"]
    assert ds[0]["image"].shape == (1, 28, 28) and isinstance(ds[0]["age"], float)


def dicom_series(folder):
    """The folder's slices as {(SeriesInstanceUID, orientation): [dataset, ...]}, each sorted
    along its normal."""
    import pydicom
    groups = {}
    for name in sorted(os.listdir(folder)):
        ds = pydicom.dcmread(os.path.join(folder, name))
        ds.filename = os.path.join(folder, name)
        groups.setdefault((ds.SeriesInstanceUID, tuple(ds.ImageOrientationPatient)), []).append(ds)
    for slices in groups.values():
        iop = np.array(slices[0].ImageOrientationPatient, float)
        slices.sort(key=lambda ds: np.dot(np.cross(iop[:3], iop[3:]), np.array(ds.ImagePositionPatient, float)))
    return groups


def dicom_affine(slices):
    """The RAS affine of sorted slices from their tags alone, as NIfTI tools compute it:
    columns from ImageOrientationPatient times PixelSpacing, the slice step from the first
    and last ImagePositionPatient (the normal times SliceThickness for one slice), LPS
    flipped to RAS."""
    iop = np.array(slices[0].ImageOrientationPatient, float)
    first, last = (np.array(ds.ImagePositionPatient, float) for ds in (slices[0], slices[-1]))
    if len(slices) > 1:
        step = (last - first) / (len(slices) - 1)
    else:
        step = np.cross(iop[:3], iop[3:]) * float(slices[0].SliceThickness)
    dy, dx = (float(v) for v in slices[0].PixelSpacing)
    lps = np.eye(4)
    lps[:3, 0], lps[:3, 1], lps[:3, 2], lps[:3, 3] = iop[:3] * dx, iop[3:] * dy, step, first
    return np.diag([-1.0, -1.0, 1.0, 1.0]) @ lps


def test_dicom_series_exports_to_nifti_with_the_scanners_geometry(tmp_path):
    pytest.importorskip("pydicom", reason="Debian's python3-pydicom")
    nib = pytest.importorskip("nibabel", reason="Debian's python3-nibabel")
    out = run("dicom_series.py", "--out", str(tmp_path / "ds"), cwd=tmp_path)
    assert "CT series 5, 5 slices of 16x16" in out, out
    ds = shardify.Dataset(tmp_path / "ds")
    assert len(ds) == 8  # the CT volume and seven MR localizer slices in three orientations
    groups = {}
    for folder in {os.path.dirname(ds[n]["path"]) for n in range(len(ds))}:
        groups.update(dicom_series(folder))
    oblique = 0
    for n in range(len(ds)):
        slices = next(g for g in groups.values() if g[0].filename == ds[n]["path"])
        assert ds[n]["series"] == slices[0].SeriesInstanceUID
        nii = tmp_path / f"{n}.nii.gz"
        subprocess.run([SHARDTOOL, "export", str(tmp_path / "ds"), str(n), "-o", str(nii)], check=True,
                       capture_output=True)
        image = nib.load(nii)
        np.testing.assert_allclose(image.affine, dicom_affine(slices), atol=1e-3)
        voxels = np.asarray(image.dataobj)  # [x, y, z]
        voxels = voxels.reshape(voxels.shape[0], voxels.shape[1], -1)
        for k, s in enumerate(slices):  # NIfTI slice k: the k-th along the normal; x along a row
            values = s.pixel_array * float(s.get("RescaleSlope", 1)) + float(s.get("RescaleIntercept", 0))
            np.testing.assert_array_equal(voxels[:, :, k].T, values)
        oblique += not np.allclose(np.array(slices[0].ImageOrientationPatient, float), [1, 0, 0, 0, 1, 0])
    assert oblique == 5  # coronal and sagittal slices: directions other than the identity
