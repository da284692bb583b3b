"""shardify's --preprocess nnunet against a reference of nnU-Net v2's DefaultPreprocessor
(3d_fullres), written here in numpy, scipy and scikit-image from nnU-Net's rules: its
fingerprint (crop, foreground draws, spacings), its planner (target spacing, anisotropy,
use_mask_for_norm) and its per-case steps (crop_to_nonzero, normalization, resampling).
Cases: ITK's example brain MRI and its segmentations, ITK's three-slice proton density
brain, and generated two-channel (T2, CT) anisotropic cases in nnU-Net's raw layout."""

import gzip
import json
import shutil
import struct
from pathlib import Path

import numpy as np
from scipy import ndimage
from skimage.transform import resize

import shardify
from conftest import write_nifti

ITK_DATA = Path("/usr/share/doc/insighttoolkit5-examples/examples/Data")
CT_DRAWS = 10_000_000  # foreground draws per channel over all cases (shardify's; docs/volumes.md)
ANISOTROPY = 3  # nnU-Net's ANISO_THRESHOLD

# Where nothing is resampled, both sides compute (x - mean) / std of the same float32 voxels,
# with mean and std summed in float32 here (as nnU-Net sums them) and in float64 by shardify:
# measured at most 4.8e-7, 1 float32 ulp of the values (|x| < 8).
NORMALIZED_TOL = 1e-4
# Resampled, the cubic B-spline is the same on both sides (shardify pads the edges as scipy
# does) but computed differently: scipy prefilters and interpolates in float64 and the result
# is rounded to float32 (nnU-Net's output dtype), ITK reads float32 voxels, sums in float64
# and writes float32, its prefilter starts from a truncated sum (tolerance 1e-10), and the
# far ends of the 12 padded voxels (reflected by scipy, mirrored by ITK) weigh 0.268^12 =
# 1.4e-7 on the first voxel. Measured at most 4.8e-7 on every case here (2 float32 ulps at
# |x| < 4); 1e-5 bounds that twentyfold and is far below the 0.24 by which ITK's mirror
# boundary alone moved the edge voxels in test_brain_mri_resampled_with_its_seven_labels.
RESAMPLED_TOL = 1e-5


# ---------------------------------------------------------------- reference: nnU-Net v2's rules

def nonzero_crop(data, seg):
    """crop_to_nonzero: the box of the voxels nonzero in any channel, holes filled; seg
    (int16) marks the unlabelled voxels outside the filled region -1."""
    filled = ndimage.binary_fill_holes(np.any(data != 0, axis=0))
    box = tuple(slice(i.min(), i.max() + 1) for i in np.nonzero(filled))
    seg = seg[box].astype(np.int16)
    seg[(seg == 0) & ~filled[box]] = -1
    return data[(slice(None),) + box], seg, box


def fingerprint(cases, intensities=True):
    """The dataset fingerprint of cases (data [C, D, H, W], seg, spacing z, y, x): spacings,
    cropped shapes, the median share of voxels the crop keeps, and (with `intensities`) per
    channel the 0.5 and 99.5 percentiles, mean and std of the foreground values each case
    draws, with replacement, from RandomState(1234), channel after channel."""
    draws = [[] for _ in cases[0][0]]
    shares, shapes = [], []
    for data, seg, _ in cases:
        cropped, cseg, _ = nonzero_crop(data.astype(np.float32), seg)
        rs = np.random.RandomState(1234)
        for c, channel in enumerate(cropped if intensities else []):
            draws[c].append(rs.choice(channel[cseg > 0].astype(np.float64), CT_DRAWS // len(cases)))
        shares.append(np.prod(cropped.shape[1:]) / np.prod(data.shape[1:]))
        shapes.append(cropped.shape[1:])
    stats = []
    for d in map(np.concatenate, draws if intensities else []):
        stats.append((np.percentile(d, 0.5), np.percentile(d, 99.5), d.mean(), d.std()))
    return {"spacings": np.array([s for _, _, s in cases]), "shapes": np.array(shapes),
            "median_share": np.median(shares), "stats": stats}


def target_spacing(fp):
    """determine_fullres_target_spacing: the median spacing; with one axis over 3x coarser
    and (median cropped shape) over 3x fewer voxels, its 10th percentile, not finer than
    the others."""
    target = np.percentile(fp["spacings"], 50, axis=0)
    size = np.percentile(fp["shapes"], 50, axis=0)
    worst = int(np.argmax(target))
    others = [a for a in range(3) if a != worst]
    if target[worst] > ANISOTROPY * target[others].max() and size[worst] * ANISOTROPY < size[others].min():
        t = np.percentile(fp["spacings"][:, worst], 10)
        target[worst] = t if t >= target[others].max() else target[others].max() + 1e-5
    return target


def scheme(channel_name):
    """channel_name_to_normalization_mapping (the schemes shardify has)."""
    return {"ct": "ct", "nonorm": "none"}.get(channel_name.casefold(), "zscore")


def normalize(data, seg, schemes, use_mask, stats):
    """ZScoreNormalization (within seg >= 0 where use_mask), CTNormalization, in float32."""
    data = data.astype(np.float32)
    for c, s in enumerate(schemes):
        x = data[c]
        if s == "zscore":
            region = seg >= 0 if use_mask[c] else np.ones(x.shape, bool)
            x[region] = (x[region] - x[region].mean()) / max(x[region].std(), 1e-8)
        elif s == "ct":
            lo, hi, mean, std = stats[c]
            data[c] = (np.clip(x, lo, hi) - mean) / max(std, 1e-8)
    return data


def lowres_axis(spacing, target):
    """The axis resampled apart (by nearest neighbour): the one coarsest axis of the source
    spacing when it is over 3x anisotropic, else of the target's; None when several tie."""
    for s in (np.asarray(spacing), np.asarray(target)):
        if s.max() / s.min() > ANISOTROPY:
            axes = np.flatnonzero(s.max() / s == 1)
            return int(axes[0]) if len(axes) == 1 else None
    return None


def resize_image(x, shape):
    return resize(x, shape, order=3, mode="edge", anti_aliasing=False)  # clip=True: the input's range


def resize_labels(x, shape):
    """Each label's indicator resized linearly; the last label (ascending) at >= 0.5 wins."""
    out = np.zeros(shape, x.dtype)
    for label in np.unique(x):
        out[resize((x == label).astype(float), shape, order=1, mode="edge", anti_aliasing=False) >= 0.5] = label
    return out


def resample(data, shape, spacing, target, labels):
    """resample_data_or_seg: whole volumes, or with a low-resolution axis each slice along it
    in-plane, then that axis by nearest neighbour (scipy map_coordinates, order 0)."""
    shape = tuple(int(n) for n in shape)
    if data.shape[1:] == shape:
        return data
    one = resize_labels if labels else resize_image
    axis = lowres_axis(spacing, target)
    out = np.zeros((len(data),) + shape, data.dtype)
    for c, x in enumerate(data.astype(np.float64)):
        if axis is None:
            out[c] = one(x, shape)
            continue
        plane = tuple(n for a, n in enumerate(shape) if a != axis)
        mid = np.stack([one(np.take(x, k, axis), plane) for k in range(x.shape[axis])], axis=axis)
        grid = np.meshgrid(*[(np.arange(m) + 0.5) * (n / m) - 0.5 for n, m in zip(mid.shape, shape)], indexing="ij")
        out[c] = ndimage.map_coordinates(mid, np.array(grid), order=0, mode="nearest")
    return out


def preprocess(data, seg, spacing, target, schemes, use_mask, stats=None):
    """run_case_npy: crop, normalize, resample to round-half-even(n * spacing / target)."""
    data, seg, box = nonzero_crop(data.astype(np.float32), seg)
    shape = [int(round(s / t * n)) for s, t, n in zip(spacing, target, data.shape[1:])]
    data = normalize(data, seg, schemes, use_mask, stats)
    data = resample(data, shape, spacing, target, labels=False)
    seg = resample(seg[None], shape, spacing, target, labels=True)[0]
    return data, seg, box


# ---------------------------------------------------------------- cases

def read_nii_gz(path):
    """An i16 or u8 NIfTI-1 .nii.gz: array [D, H, W] and spacing (z, y, x)."""
    raw = gzip.open(path).read()
    dim = struct.unpack_from("<8h", raw, 40)
    dtype = {2: np.uint8, 4: np.int16}[struct.unpack_from("<h", raw, 70)[0]]
    pixdim = struct.unpack_from("<8f", raw, 76)
    shape = dim[1:4][::-1]
    data = np.frombuffer(raw, dtype, count=int(np.prod(shape)), offset=int(struct.unpack_from("<f", raw, 108)[0]))
    return data.reshape(shape), tuple(float(s) for s in pixdim[1:4][::-1])


def read_mha(path):
    """A MetaImage header with its .raw beside it (u8): array [D, H, W], spacing (z, y, x)."""
    header = dict(line.split(" = ", 1) for line in path.read_text().splitlines())
    assert header["ElementType"] == "MET_UCHAR" and header["NDims"] == "3", header
    shape = [int(v) for v in header["DimSize"].split()][::-1]
    data = np.fromfile(path.parent / header["ElementDataFile"], np.uint8).reshape(shape)
    return data, tuple(float(v) for v in header["ElementSpacing"].split()[::-1])


def nnunet_dataset(root, channel_names, labels, file_ending=".nii"):
    for d in ("imagesTr", "labelsTr"):
        (root / d).mkdir(parents=True)
    (root / "dataset.json").write_text(json.dumps({
        "channel_names": {str(i): n for i, n in enumerate(channel_names)},
        "labels": {"background": 0, **{f"label{k}": k for k in labels}}, "file_ending": file_ending}))


def write_ct_cases(root):
    """Three anisotropic cases (z 2.5..3.5 mm, in-plane 0.75..0.8 mm), channels T2 and CT:
    a field of view (a disc through every slice) around a body of soft tissue with a bone,
    an air pocket and water (0 HU, 0 in T2: holes of the nonzero region); CT -1000 HU in
    the field of view around the body, both channels 0 outside it. Labels: an organ (1)
    reaching into the bone, a lesion (2) in it, and one label-2 voxel outside the field of
    view inside its box."""
    nnunet_dataset(root, ["T2", "CT"], [1, 2])
    rng = np.random.default_rng(11)
    spacings = [(3.0, 0.8, 0.8), (3.5, 0.75, 0.75), (2.5, 0.8, 0.8)]
    cases = []
    for k, spacing in enumerate(spacings):
        shape = (6 + (k == 1), 36, 40)
        z, y, x = np.indices(shape)
        fov = (y - 18) ** 2 + (x - 20) ** 2 <= 14 ** 2
        body = ((y - 18) / 10.0) ** 2 + ((x - 20 + k) / 12.0) ** 2 <= 1
        bone = (y - 15) ** 2 + (x - 24) ** 2 <= 9
        ct = np.where(fov, rng.normal(-1000, 15, shape), 0)
        ct[body] = rng.normal(40, 30, body.sum())
        ct[bone] = rng.uniform(700, 1500, bone.sum())
        ct[body & ((y - 21) ** 2 + (x - 14) ** 2 <= 4)] = -900
        t2 = np.where(body, rng.uniform(200, 600, shape), 0)
        t2[bone] = rng.uniform(50, 100, bone.sum())
        water = body & ((y - 20) ** 2 + (x - 26) ** 2 <= 1) & (z % 2 == 0)
        ct[water], t2[water] = 0, 0
        seg = np.zeros(shape, np.uint8)
        seg[body & (x < 26) & (y < 18)] = 1
        seg[body & ((y - 14) ** 2 + (x - 18) ** 2 <= 4)] = 2
        seg[0, 5, 7] = 2
        images = np.stack([t2, ct]).round().astype(np.int16)
        for c in range(2):
            write_nifti(root / "imagesTr" / f"ct{k}_{c:04d}.nii", images[c], spacing=spacing)
        write_nifti(root / "labelsTr" / f"ct{k}.nii", seg, spacing=spacing)
        cases.append((images, seg, tuple(float(np.float32(s)) for s in spacing)))  # pixdim is float32
    return cases


def check_case(sample, want, want_seg, box, tol):
    """shardify's sample against the reference: crop box, shapes, voxels within tol, labels
    exactly (the reference's -1, which shardify does not store, as 0)."""
    np.testing.assert_array_equal(sample["source.crop_box"], [[b.start for b in box], [b.stop - b.start for b in box]])
    assert sample["image"].shape == want.shape and sample["mask"].shape == (1,) + want_seg.shape
    assert sample["image"].dtype == np.float32
    diff = np.abs(sample["image"].astype(np.float64) - want)
    assert diff.max() <= tol, f"max difference {diff.max():.3g} at {np.unravel_index(diff.argmax(), diff.shape)}"
    assert np.count_nonzero(sample["mask"][0] != np.maximum(want_seg, 0)) == 0
    return diff.max()


# ---------------------------------------------------------------- tests

def test_brain_mri_cropped_and_zscored_in_its_nonzero_region_as_nnunet_does(tmp_path):
    """ITK's T1 brain MRI with its skull-stripped labels (4, 5, 6; 0 elsewhere) as a pair:
    cropping keeps 45.7% (< 3/4), so zscore takes the nonzero region (plus labels);
    one case, so the target spacing is its own and nothing is resampled."""
    image, spacing = read_nii_gz(ITK_DATA / "KmeansTest_T1UCharRaw.nii.gz")
    seg, _ = read_nii_gz(ITK_DATA / "KmeansTest_T1RawSkullStrip.nii.gz")
    for d in ("images", "masks"):
        (tmp_path / "src" / d).mkdir(parents=True)
    shutil.copy(ITK_DATA / "KmeansTest_T1UCharRaw.nii.gz", tmp_path / "src" / "images" / "brain.nii.gz")
    shutil.copy(ITK_DATA / "KmeansTest_T1RawSkullStrip.nii.gz", tmp_path / "src" / "masks" / "brain.nii.gz")
    summary = shardify.convert(tmp_path / "src", tmp_path / "ds", preprocess="nnunet", progress=False)

    fp = fingerprint([(image[None], seg, spacing)], intensities=False)
    assert 0.4 < fp["median_share"] < 0.75
    target = target_spacing(fp)
    np.testing.assert_array_equal(target, spacing)
    assert any("zscore within the nonzero region" in line for line in summary.preprocessing)
    want, want_seg, box = preprocess(image[None], seg, spacing, target, ["zscore"], [True])
    assert np.count_nonzero(want_seg == -1) > 0.4 * want_seg.size  # the region is not the box
    sample = shardify.Dataset(tmp_path / "ds")[0]
    check_case(sample, want, want_seg, box, NORMALIZED_TOL)
    assert np.count_nonzero(sample["image"][0][want_seg == -1]) == 0  # outside the region: 0, as nnU-Net leaves it


def test_brain_mri_resampled_with_its_seven_labels(tmp_path):
    """The same MRI with its k-means segmentation (labels 0..6) in nnU-Net's layout, resampled
    from 2x2x3 to 2.4x2.4x3.6 mm: cubic B-spline over the whole volume (no axis over 3x
    coarser), labels one by one."""
    image, spacing = read_nii_gz(ITK_DATA / "KmeansTest_T1UCharRaw.nii.gz")
    seg, _ = read_nii_gz(ITK_DATA / "KmeansTest_T1KmeansPrelimSegmentation.nii.gz")
    nnunet_dataset(tmp_path / "src", ["T1"], range(1, 7), ".nii.gz")
    shutil.copy(ITK_DATA / "KmeansTest_T1UCharRaw.nii.gz", tmp_path / "src" / "imagesTr" / "b_0000.nii.gz")
    shutil.copy(ITK_DATA / "KmeansTest_T1KmeansPrelimSegmentation.nii.gz", tmp_path / "src" / "labelsTr" / "b.nii.gz")
    shardify.convert(tmp_path / "src", tmp_path / "ds", preprocess="nnunet", spacing={"x": 2.4, "y": 2.4, "z": 3.6},
                     progress=False)

    target = (3.6, 2.4, 2.4)
    use_mask = [fingerprint([(image[None], seg, spacing)], intensities=False)["median_share"] < 0.75]
    want, want_seg, box = preprocess(image[None], seg, spacing, target, ["zscore"], use_mask)
    assert want.shape == (1, 52, 72, 72) and len(np.unique(want_seg)) == 7
    sample = shardify.Dataset(tmp_path / "ds")[0]
    check_case(sample, want, want_seg, box, RESAMPLED_TOL)


def test_three_slice_brain_resampled_to_an_anisotropic_target(tmp_path):
    """ITK's three-slice proton density brain (1 mm, 99.9% nonzero: zscore over every voxel)
    with labels from its intensities: the target 0.6x0.6x1.9 mm is over 3x anisotropic, so
    each slice is resized in-plane and z (3 -> 2 slices) by nearest neighbour."""
    image, spacing = read_mha(ITK_DATA / "BrainProtonDensity3Slices.mha")
    assert image.shape == (3, 217, 181) and spacing == (1.0, 1.0, 1.0)
    seg = np.digitize(image, [60, 120, 180]).astype(np.uint8)
    for d in ("images", "masks"):
        (tmp_path / "src" / d).mkdir(parents=True)
    write_nifti(tmp_path / "src" / "images" / "pd.nii", image, spacing=spacing)
    write_nifti(tmp_path / "src" / "masks" / "pd.nii", seg, spacing=spacing)
    summary = shardify.convert(tmp_path / "src", tmp_path / "ds", preprocess="nnunet",
                               spacing={"x": 0.6, "y": 0.6, "z": 1.9}, progress=False)

    target = (1.9, 0.6, 0.6)
    assert lowres_axis(spacing, target) == 0
    assert fingerprint([(image[None], seg, spacing)], intensities=False)["median_share"] >= 0.75
    assert any("zscore over every voxel" in line for line in summary.preprocessing)
    want, want_seg, box = preprocess(image[None], seg, spacing, target, ["zscore"], [False])
    assert want.shape == (1, 2, 362, 302)
    check_case(shardify.Dataset(tmp_path / "ds")[0], want, want_seg, box, RESAMPLED_TOL)


def test_anisotropic_ct_and_t2_cases_planned_and_preprocessed_as_nnunet_does(tmp_path):
    """Generated nnU-Net raw cases: the planner's anisotropic target spacing (z at the 10th
    percentile of its spacings), per-channel schemes by name (T2 -> zscore within the
    region, CT -> ct with the fingerprint's draws, CT being the second channel to draw),
    in-plane cubic then nearest along z; one case needs no resampling at all."""
    cases = write_ct_cases(tmp_path / "src")
    summary = shardify.convert(tmp_path / "src", tmp_path / "ds", preprocess="nnunet", progress=False)

    fp = fingerprint(cases)
    target = target_spacing(fp)
    np.testing.assert_allclose(target, [2.6, 0.8, 0.8], rtol=1e-7)  # z: not the median, 3
    schemes = [scheme(n) for n in ("T2", "CT")]
    use_mask = [s == "zscore" and fp["median_share"] < 0.75 for s in schemes]
    assert use_mask == [True, False]
    assert any("T2 -> zscore, CT -> ct" in line for line in summary.preprocessing)
    ds = shardify.Dataset(tmp_path / "ds")
    assert len(ds) == 3
    resampled = 0
    for i, (images, seg, spacing) in enumerate(cases):
        sample = ds[i]
        np.testing.assert_allclose(sample["image.normalization"][1], fp["stats"][1], rtol=1e-9)
        want, want_seg, box = preprocess(images, seg, spacing, target, schemes, use_mask, fp["stats"])
        shape = np.array([b.stop - b.start for b in box])
        resampled += tuple(shape) != want.shape[1:]
        exact_spacing = np.array(spacing) * shape / want.shape[1:]
        np.testing.assert_allclose(sample["image.spacing"], exact_spacing[::-1], rtol=1e-6)  # x, y, z
        check_case(sample, want, want_seg, box, RESAMPLED_TOL if tuple(shape) != want.shape[1:] else NORMALIZED_TOL)
        assert 1 in want_seg and 2 in want_seg
    assert resampled == 2
