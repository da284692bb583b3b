"""DICOM series into shards with their geometry, so that `shardtool export` gives back a
NIfTI that lies where the scan lay.

Every file under the given folders is read with pydicom; the slices of one series and one
orientation form a volume, sorted along the slice normal. A volume is one sample:

    image            [1, D, H, W]  the modality values (slope and intercept applied), i16 when
                                   they are whole numbers that fit, else f32
    image.spacing    f64 [3]       x, y, z in mm: PixelSpacing's column and row spacing, then
                                   the distance between slice positions
    image.origin     f64 [3]       ImagePositionPatient of the first slice (LPS, as in ITK)
    image.direction  f64 [9]       row-major; column 0 the row direction of
                                   ImageOrientationPatient, column 1 its column direction,
                                   column 2 the slice normal
    path, series     string        the first slice's file; SeriesInstanceUID

These are the fields and the LPS convention the converter writes for NIfTI volumes
(docs/fields.md); `shardtool export DS N -o x.nii.gz` turns them into the NIfTI
affine (RAS). Default input: pydicom's test series (an axial CT of 5 slices, MR
localizers in three orientations).

    /usr/bin/python3 python/examples/dicom_series.py --out dicom-shards
    build/bin/shardtool export dicom-shards 0 -o ct.nii.gz
"""

import argparse
import os

import numpy as np
import pydicom

import shardify


def default_folders():
    data = os.path.join(os.path.dirname(pydicom.data.__file__), "test_files", "dicomdirtests")
    return [os.path.join(data, "98892001", "CT5N"), os.path.join(data, "98892003", "MR2")]


def read_slices(folders):
    """Every DICOM image file under `folders`, grouped by series and orientation."""
    series = {}
    for folder in folders:
        for root, _, names in os.walk(folder):
            for name in sorted(names):
                try:
                    ds = pydicom.dcmread(os.path.join(root, name))
                except pydicom.errors.InvalidDicomError:
                    continue
                if "PixelData" not in ds or "ImageOrientationPatient" not in ds:
                    continue
                key = (ds.SeriesInstanceUID, tuple(np.round(np.array(ds.ImageOrientationPatient, float), 4)))
                series.setdefault(key, []).append((os.path.join(root, name), ds))
    return list(series.values())


def volume(slices):
    """(pixels [D, H, W] f64, spacing, origin, direction) of one series' slices."""
    first = slices[0][1]
    iop = np.array(first.ImageOrientationPatient, float)
    row, col = iop[:3], iop[3:]
    normal = np.cross(row, col)
    slices = sorted(slices, key=lambda s: float(np.dot(normal, np.array(s[1].ImagePositionPatient, float))))
    positions = np.array([np.array(ds.ImagePositionPatient, float) for _, ds in slices])
    if len(slices) > 1:
        steps = np.diff(positions @ normal)
        if np.ptp(steps) > 1e-3 * max(1.0, abs(steps.mean())) or steps.min() <= 0:
            raise ValueError(f"series {first.SeriesInstanceUID}: slices are not evenly spaced ({steps})")
        dz = float(steps.mean())
    else:
        dz = float(first.get("SpacingBetweenSlices") or first.get("SliceThickness") or 1.0)
    dy, dx = (float(v) for v in first.PixelSpacing)  # between rows, between columns
    pixels = np.stack([ds.pixel_array * float(ds.get("RescaleSlope", 1)) + float(ds.get("RescaleIntercept", 0))
                       for _, ds in slices])
    direction = np.column_stack([row, col, normal])
    return slices, pixels, [dx, dy, dz], positions[0], direction.ravel()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", nargs="*", help="folders of DICOM files (default: pydicom's test series)")
    p.add_argument("--out", default="dicom-shards", help="the dataset to write")
    a = p.parse_args()
    volumes = [volume(s) for s in read_slices(a.folders or default_folders())]
    whole = all(np.array_equal(v[1], np.round(v[1])) and v[1].min() >= -32768 and v[1].max() <= 32767
                for v in volumes)
    dtype = np.int16 if whole else np.float32
    fields = {"image": (dtype, (1, None, None, None)), "image.spacing": ("f64", (3,)), "image.origin": ("f64", (3,)),
              "image.direction": ("f64", (9,)), "path": "string", "series": "string"}
    with shardify.Writer(a.out, fields=fields, overwrite=True) as w:
        for slices, pixels, spacing, origin, direction in volumes:
            w.write({"image": pixels.astype(dtype)[None], "image.spacing": np.array(spacing),
                     "image.origin": origin, "image.direction": direction, "path": slices[0][0],
                     "series": str(slices[0][1].SeriesInstanceUID)})
    for n, (slices, pixels, spacing, origin, _) in enumerate(volumes):
        ds = slices[0][1]
        print(f"sample {n}: {ds.Modality} series {ds.get('SeriesNumber')}, {len(slices)} slices of "
              f"{pixels.shape[1]}x{pixels.shape[2]}, spacing {np.round(spacing, 3).tolist()} mm, "
              f"origin {np.round(origin, 3).tolist()}")
    print(f"wrote {len(volumes)} volumes ({np.dtype(dtype).name}) into {a.out}")


if __name__ == "__main__":
    main()
