"""shardify's --preprocess nnunet (and --plans) against nnunet_reference.py, a reference of
nnU-Net v2.8.1's fingerprint, planner and DefaultPreprocessor (3d_fullres) written function
by function after nnU-Net's code. Cases: ITK's example brain MRI with its segmentations,
ITK's three-slice proton density brain, and generated cases in nnU-Net's raw layout that
found differences: scaled NIfTI, ties of nearest neighbour along the anisotropic axis and
of the labels' 0.5 threshold, shapes that only after cropping decide the anisotropy, a
noNorm channel. Every label is compared exactly, -1 outside the nonzero region included."""

import json
import shutil
from pathlib import Path

import numpy as np

import nnunet_reference as ref
import shardify
from conftest import write_nifti

ITK_DATA = Path("/usr/share/doc/insighttoolkit5-examples/examples/Data")
# Foreground draws per channel over all cases, on both sides (--intensity-samples): a tenth
# of nnU-Net's (and shardify's default) 100,000,000, which would take seconds per channel.
CT_DRAWS = 10_000_000

# Where nothing is resampled, both sides compute (x - mean) / std of the same float32
# voxels, with mean and std summed in float32 by nnU-Net (numpy) and in float64 by
# shardify: measured at most 4.8e-7, 1 float32 ulp of the values (|x| < 8).
NORMALIZED_TOL = 1e-4
# Resampled, the cubic B-spline is the same on both sides (shardify pads the edges as scipy
# does) but computed differently: scipy prefilters and interpolates in float64 and the result
# is rounded to float32 (nnU-Net's output dtype), ITK reads float32 voxels, sums in float64
# and writes float32, its prefilter starts from a truncated sum (tolerance 1e-10), and the
# far ends of the 12 padded voxels (reflected by scipy, mirrored by ITK) weigh 0.268^12 =
# 1.4e-7 on the first voxel. Measured at most 4.8e-7 on every case here (2 float32 ulps at
# |x| < 4); 1e-5 bounds that twentyfold.
RESAMPLED_TOL = 1e-5


def nnunet_dataset(root, channel_names, labels, file_ending=".nii"):
    for d in ("imagesTr", "labelsTr"):
        (root / d).mkdir(parents=True)
    (root / "dataset.json").write_text(json.dumps({
        "channel_names": {str(i): n for i, n in enumerate(channel_names)},
        "labels": {"background": 0, **{f"label{k}": k for k in labels}}, "file_ending": file_ending}))


def read_case(root, name, channels, ending=".nii"):
    """A case of an nnU-Net raw folder as NibabelIO reads it: (data, seg, spacing)."""
    data, spacing = ref.read_images([root / "imagesTr" / f"{name}_{c:04d}{ending}" for c in range(channels)])
    seg, _ = ref.read_images([root / "labelsTr" / f"{name}{ending}"])
    return data, seg, spacing


def expected(cases, channel_names, target=None, foreground_draws=CT_DRAWS):
    """The reference's fingerprint, plans and preprocessed cases (in the source's axis order)."""
    fp = ref.fingerprint(cases, foreground_draws)
    plan = ref.plans(fp, channel_names, target)
    out = []
    for data, seg, spacing in cases:
        d, s, box = ref.run_case_npy(data, seg, spacing, plan)
        forward = plan["transpose_forward"]
        box = tuple(box[int(i)] for i in np.argsort(forward))  # the source's axes
        out.append((ref.untranspose(d, forward), ref.untranspose(s, forward), box))
    return fp, plan, out


def check_case(sample, want, want_seg, box, tol, region):
    """shardify's sample against the reference: crop box, shapes, voxels within tol, labels
    exactly; `region`: the dataset marks the outside of the nonzero region -1 as nnU-Net does
    (else it stores 0 there, which nnU-Net's training makes of its -1)."""
    np.testing.assert_array_equal(sample["source.crop_box"], [[b.start for b in box], [b.stop - b.start for b in box]])
    assert sample["image"].shape == want.shape and sample["mask"].shape == want_seg.shape
    assert sample["image"].dtype == np.float32
    diff = np.abs(sample["image"].astype(np.float64) - want)
    assert diff.max() <= tol, f"max difference {diff.max():.3g} at {np.unravel_index(diff.argmax(), diff.shape)}"
    labels = want_seg if region else np.maximum(want_seg, 0)
    differ = np.count_nonzero(sample["mask"] != labels)
    assert differ == 0, f"{differ} of {labels.size} labels differ"
    return diff.max()


def check_dataset(ds_path, cases, want, tol):
    ds = shardify.Dataset(ds_path)
    region = "zscore_region" in ds.provenance["options"]
    assert len(ds) == len(cases)
    for i, (w, w_seg, box) in enumerate(want):
        resampled = ds[i]["image"].shape[1:] != tuple(b.stop - b.start for b in box)
        check_case(ds[i], w, w_seg, box, tol if resampled else NORMALIZED_TOL, region)
    return ds


# ---------------------------------------------------------------- cases

def write_ct_cases(root):
    """Three anisotropic cases (z 2.5..3.5 mm, in-plane 0.75..0.8 mm), channels T2, CT and
    noNorm: a field of view (a disc through every slice) around a body of soft tissue with
    a bone, an air pocket and water (0 HU, 0 in T2: holes of the nonzero region); CT -1000 HU
    in the field of view around the body, every channel 0 outside it. Labels: an organ (1)
    reaching into the bone, a lesion (2) in it, one label-2 voxel outside the field of view
    inside its box."""
    nnunet_dataset(root, ["T2", "CT", "noNorm"], [1, 2])
    rng = np.random.default_rng(11)
    for k, spacing in enumerate([(3.0, 0.8, 0.8), (3.5, 0.75, 0.75), (2.5, 0.8, 0.8)]):
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
        raw = np.where(body, rng.integers(0, 50, shape), 0)
        seg = np.zeros(shape, np.uint8)
        seg[body & (x < 26) & (y < 18)] = 1
        seg[body & ((y - 14) ** 2 + (x - 18) ** 2 <= 4)] = 2
        seg[0, 5, 7] = 2
        for c, image in enumerate((t2, ct, raw)):
            write_nifti(root / "imagesTr" / f"ct{k}_{c:04d}.nii", image.round().astype(np.int16), spacing=spacing)
        write_nifti(root / "labelsTr" / f"ct{k}.nii", seg, spacing=spacing)
    return [read_case(root, f"ct{k}", 3) for k in range(3)]


# ---------------------------------------------------------------- tests

def test_brain_mri_cropped_and_zscored_in_its_nonzero_region_as_nnunet_does(tmp_path):
    """ITK's T1 brain MRI with its skull-stripped labels (4, 5, 6; 0 elsewhere) as a pair:
    cropping keeps 45.7% (< 3/4), so zscore takes the nonzero region (plus labels) and the
    mask holds -1 outside it; one case, so the target spacing is its own."""
    for d in ("images", "masks"):
        (tmp_path / "src" / d).mkdir(parents=True)
    shutil.copy(ITK_DATA / "KmeansTest_T1UCharRaw.nii.gz", tmp_path / "src" / "images" / "brain.nii.gz")
    shutil.copy(ITK_DATA / "KmeansTest_T1RawSkullStrip.nii.gz", tmp_path / "src" / "masks" / "brain.nii.gz")
    summary = shardify.convert(tmp_path / "src", tmp_path / "ds", preprocess="nnunet",
                               intensity_samples=CT_DRAWS, progress=False)

    data, _ = ref.read_images([tmp_path / "src" / "images" / "brain.nii.gz"])
    seg, spacing = ref.read_images([tmp_path / "src" / "masks" / "brain.nii.gz"])
    fp, plan, want = expected([(data, seg, spacing)], ["T1"])
    assert 0.4 < fp["median_relative_size_after_cropping"] < 0.75
    assert plan["configurations"]["3d_fullres"]["use_mask_for_norm"] == [True]
    assert any("zscore within the nonzero region" in line for line in summary.preprocessing)
    assert np.count_nonzero(want[0][1] == -1) > 0.4 * want[0][1].size  # the region is not the box
    ds = check_dataset(tmp_path / "ds", [0], want, RESAMPLED_TOL)
    mask = next(f for f in ds.fields if f["name"] == "mask")
    assert mask["dtype"] == "i16" and ds.provenance["options"]["zscore_region"] == "nonzero"  # labels undeclared
    assert np.count_nonzero(ds[0]["image"][want[0][1] == -1]) == 0  # outside the region: 0, as nnU-Net leaves it


def test_brain_mri_resampled_with_its_seven_labels(tmp_path):
    """The same MRI with its k-means segmentation (labels 0..6) in nnU-Net's layout, resampled
    from 2x2x3 to 2.4x2.4x3.6 mm: cubic B-spline over the whole volume (no axis over 3x
    coarser), labels one by one."""
    nnunet_dataset(tmp_path / "src", ["T1"], range(1, 7), ".nii.gz")
    shutil.copy(ITK_DATA / "KmeansTest_T1UCharRaw.nii.gz", tmp_path / "src" / "imagesTr" / "b_0000.nii.gz")
    shutil.copy(ITK_DATA / "KmeansTest_T1KmeansPrelimSegmentation.nii.gz", tmp_path / "src" / "labelsTr" / "b.nii.gz")
    shardify.convert(tmp_path / "src", tmp_path / "ds", preprocess="nnunet",
                     intensity_samples=CT_DRAWS, spacing={"x": 2.4, "y": 2.4, "z": 3.6},
                     progress=False)

    cases = [read_case(tmp_path / "src", "b", 1, ".nii.gz")]
    _, _, want = expected(cases, ["T1"], target=(3.6, 2.4, 2.4))
    assert want[0][0].shape == (1, 52, 72, 72) and len(np.unique(want[0][1])) >= 7
    check_dataset(tmp_path / "ds", cases, want, RESAMPLED_TOL)


def test_three_slice_brain_resampled_to_an_anisotropic_target(tmp_path):
    """ITK's three-slice proton density brain (1 mm, 99.9% nonzero: zscore over every voxel)
    with labels from its intensities: the target 0.6x0.6x1.9 mm is over 3x anisotropic, so
    each slice is resized in-plane and z (3 -> 2 slices) by nearest neighbour."""
    mha = (ITK_DATA / "BrainProtonDensity3Slices.mha").read_text()
    header = dict(line.split(" = ", 1) for line in mha.splitlines())
    image = np.fromfile(ITK_DATA / header["ElementDataFile"], np.uint8).reshape(3, 217, 181)
    seg = np.digitize(image, [60, 120, 180]).astype(np.uint8)
    for d in ("images", "masks"):
        (tmp_path / "src" / d).mkdir(parents=True)
    write_nifti(tmp_path / "src" / "images" / "pd.nii", image)
    write_nifti(tmp_path / "src" / "masks" / "pd.nii", seg)
    summary = shardify.convert(tmp_path / "src", tmp_path / "ds", preprocess="nnunet", intensity_samples=CT_DRAWS,
                               spacing={"x": 0.6, "y": 0.6, "z": 1.9}, progress=False)

    data, spacing = ref.read_images([tmp_path / "src" / "images" / "pd.nii"])
    labels, _ = ref.read_images([tmp_path / "src" / "masks" / "pd.nii"])
    _, plan, want = expected([(data, labels, spacing)], ["PD"], target=(1.9, 0.6, 0.6))
    assert ref.determine_do_sep_z_and_axis(spacing, (1.9, 0.6, 0.6)) == (True, 0)
    assert plan["configurations"]["3d_fullres"]["use_mask_for_norm"] == [False]
    assert any("zscore over every voxel" in line for line in summary.preprocessing)
    assert want[0][0].shape == (1, 2, 362, 302)
    check_dataset(tmp_path / "ds", [0], want, RESAMPLED_TOL)


def test_anisotropic_ct_t2_and_nonorm_cases_planned_preprocessed_and_replanned_as_nnunet_does(tmp_path):
    """Generated nnU-Net raw cases: the planner's anisotropic target spacing (z at the 10th
    percentile of its spacings), schemes by channel name (T2 -> zscore within the region,
    CT -> ct with the fingerprint's draws, noNorm -> none), in-plane cubic then nearest
    along z; one case needs no resampling. The dataset holds nnU-Net's plans and
    fingerprint, and converting with those plans gives the same dataset."""
    cases = write_ct_cases(tmp_path / "src")
    summary = shardify.convert(tmp_path / "src", tmp_path / "ds", preprocess="nnunet",
                               intensity_samples=CT_DRAWS, progress=False)

    fp, plan, want = expected(cases, ["T2", "CT", "noNorm"])
    config = plan["configurations"]["3d_fullres"]
    np.testing.assert_allclose(config["spacing"], [2.6, 0.8, 0.8], rtol=1e-6)  # z: not the median, 3
    assert config["use_mask_for_norm"] == [True, False, False]
    assert any("T2 -> zscore, CT -> ct, noNorm -> none" in line for line in summary.preprocessing)
    ds = check_dataset(tmp_path / "ds", cases, want, RESAMPLED_TOL)
    assert next(f for f in ds.fields if f["name"] == "mask")["dtype"] == "i8"  # as nnU-Net stores labels up to 127
    ct = fp["foreground_intensity_properties_per_channel"]["1"]
    np.testing.assert_allclose(ds[0]["image.normalization"][1],
                               [ct["percentile_00_5"], ct["percentile_99_5"], ct["mean"], ct["std"]], rtol=1e-6)

    written = json.loads((tmp_path / "ds" / "nnUNetPlans.json").read_text())
    got = written["configurations"]["3d_fullres"]
    assert written["transpose_forward"] == plan["transpose_forward"] == [0, 1, 2]
    np.testing.assert_allclose(got["spacing"], config["spacing"], rtol=1e-12)
    np.testing.assert_allclose(got["median_image_size_in_voxels"], config["median_image_size_in_voxels"])
    assert got["normalization_schemes"] == ["ZScoreNormalization", "CTNormalization", "NoNormalization"]
    assert got["use_mask_for_norm"] == config["use_mask_for_norm"]
    assert written["original_median_shape_after_transp"] == plan["original_median_shape_after_transp"]
    written_fp = json.loads((tmp_path / "ds" / "dataset_fingerprint.json").read_text())
    assert written_fp["shapes_after_crop"] == [list(s) for s in fp["shapes_after_crop"]]
    np.testing.assert_allclose(written_fp["spacings"], fp["spacings"], rtol=1e-12)
    assert written_fp["median_relative_size_after_cropping"] == fp["median_relative_size_after_cropping"]
    for c, props in fp["foreground_intensity_properties_per_channel"].items():
        for key, value in props.items():
            assert abs(written_fp["foreground_intensity_properties_per_channel"][c][key] - value) <= 1e-6 * max(
                1.0, abs(value)), (c, key)

    shardify.convert(tmp_path / "src", tmp_path / "again", plans=tmp_path / "ds" / "nnUNetPlans.json", progress=False)
    again = shardify.Dataset(tmp_path / "again")
    for i in range(len(cases)):
        for field in ("image", "mask", "source.crop_box"):
            np.testing.assert_array_equal(again[i][field], ds[i][field])


def test_scaled_nifti_read_as_nnunet_reads_it(tmp_path):
    """CT cases stored three ways: i16 as Hounsfield units, u16 with scl_inter -1024, i16
    with scl_slope 0.5 and scl_inter -3. nnU-Net's readers apply the scaling, so every
    statistic, crop box and voxel is taken from the scaled values; without preprocessing
    the stored values and header stay as they are."""
    nnunet_dataset(tmp_path / "src", ["CT"], [1])
    rng = np.random.default_rng(5)
    stored = []
    for k, spacing in enumerate([(2.0, 1.0, 1.0), (2.4, 0.9, 0.9), (2.0, 1.1, 1.1)]):
        shape = (8, 24, 26)
        z, y, x = np.indices(shape)
        body = ((y - 12) / 8.0) ** 2 + ((x - 13) / 9.0) ** 2 <= 1
        hu = np.where(body, rng.normal(60, 40, shape), 0).round()  # 0 HU outside the body
        seg = (body & (x < 14)).astype(np.uint8)
        slope, inter, dtype = [(1.0, 0.0, np.int16), (1.0, -1024.0, np.uint16), (0.5, -3.0, np.int16)][k]
        values = ((hu - inter) / slope).round().astype(dtype)
        stored.append((values, slope, inter))
        write_nifti(tmp_path / "src" / "imagesTr" / f"c{k}_0000.nii", values, spacing=spacing, slope=slope,
                    inter=inter)
        write_nifti(tmp_path / "src" / "labelsTr" / f"c{k}.nii", seg, spacing=spacing)
    summary = shardify.convert(tmp_path / "src", tmp_path / "ds", preprocess="nnunet",
                               intensity_samples=CT_DRAWS, progress=False)

    cases = [read_case(tmp_path / "src", f"c{k}", 1) for k in range(3)]
    assert cases[1][0].min() == -1024 + stored[1][0].min()  # the reader's values are the scaled ones
    fp, _, want = expected(cases, ["CT"])
    assert any("scl_slope/scl_inter applied to the voxels of 2 case(s)" in line for line in summary.preprocessing)
    ds = check_dataset(tmp_path / "ds", cases, want, RESAMPLED_TOL)
    ct = fp["foreground_intensity_properties_per_channel"]["0"]
    np.testing.assert_allclose(ds[1]["image.normalization"][0],
                               [ct["percentile_00_5"], ct["percentile_99_5"], ct["mean"], ct["std"]], rtol=1e-6)

    shardify.convert(tmp_path / "src", tmp_path / "plain", progress=False)
    plain = shardify.Dataset(tmp_path / "plain")
    for k, (values, slope, inter) in enumerate(stored):
        sample = plain[k]
        np.testing.assert_array_equal(sample["image"][0].astype(np.float64), values.astype(np.float64))
        header = bytes(sample["image.nifti_header"])
        assert np.frombuffer(header[112:120], "<f4").tolist() == [slope, inter]


def write_oblique(path, array, spacing, angle=0.7, origin=(-0.1, 57.3, -20.0)):
    """A NIfTI of [z, y, x] `array` whose axes are turned by `angle` about x, with an origin
    off zero: a geometry whose physical coordinates carry rounding."""
    import nibabel
    c, s = np.cos(angle), np.sin(angle)
    rotation = np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    affine = np.eye(4)
    affine[:3, :3] = rotation @ np.diag(spacing[::-1])
    affine[:3, 3] = origin
    nibabel.save(nibabel.Nifti1Image(np.ascontiguousarray(array.transpose(2, 1, 0)), affine), str(path))


def test_ties_on_the_anisotropic_axis_take_nnunets_slice(tmp_path):
    """Slices resampled along a coarse axis by nearest neighbour land exactly halfway between
    two source slices when the ratio of slice counts has an even numerator (12 -> 6 here);
    scipy's map_coordinates takes the upper one, in voxel coordinates: an oblique geometry
    (whose physical coordinates carry rounding) must not decide. One case coarse along z,
    one along x (so nnU-Net transposes its axes)."""
    nnunet_dataset(tmp_path / "src", ["MR"], [1, 2])
    rng = np.random.default_rng(3)
    for k, (shape, spacing) in enumerate([((12, 20, 22), (5.0, 1.0, 1.0)), ((20, 22, 12), (1.0, 1.0, 5.0))]):
        image = rng.integers(1, 300, shape).astype(np.int16)  # every voxel nonzero: nothing cropped
        seg = rng.integers(0, 3, shape).astype(np.uint8)
        write_oblique(tmp_path / "src" / "imagesTr" / f"t{k}_0000.nii", image, spacing)
        write_oblique(tmp_path / "src" / "labelsTr" / f"t{k}.nii", seg, spacing)
    cases = [read_case(tmp_path / "src", f"t{k}", 1) for k in range(2)]
    for k, target in enumerate([(10.0, 1.0, 1.0), (1.0, 1.0, 10.0)]):
        out = tmp_path / f"ds{k}"
        named = dict(zip("zyx", target))
        shardify.convert(tmp_path / "src", out, preprocess="nnunet",
                         intensity_samples=CT_DRAWS, spacing=named, progress=False)
        _, plan, want = expected([cases[k]], ["MR"], target=target)
        assert plan["transpose_forward"] == ([0, 1, 2] if k == 0 else [2, 0, 1])
        ds = shardify.Dataset(out)
        check_case(ds[k], *want[0], RESAMPLED_TOL, "zscore_region" in ds.provenance["options"])


def test_label_ties_at_one_half_decided_in_double(tmp_path):
    """Random labels resampled from 1 mm to 2 x 1.4 x 1.4 mm: along z every output voxel lies
    halfway between two (indicator exactly 0.5), in-plane the weights are not dyadic, so
    sums land within rounding of 0.5; nnU-Net decides in float64 as scipy computes."""
    nnunet_dataset(tmp_path / "src", ["MR"], [1, 2, 3])
    rng = np.random.default_rng(8)
    image = rng.integers(1, 100, (10, 12, 14)).astype(np.int16)
    seg = rng.integers(0, 4, (10, 12, 14)).astype(np.uint8)
    write_nifti(tmp_path / "src" / "imagesTr" / "r_0000.nii", image)
    write_nifti(tmp_path / "src" / "labelsTr" / "r.nii", seg)
    shardify.convert(tmp_path / "src", tmp_path / "ds", preprocess="nnunet",
                     intensity_samples=CT_DRAWS, spacing={"x": 1.4, "y": 1.4, "z": 2},
                     progress=False)
    cases = [read_case(tmp_path / "src", "r", 1)]
    _, _, want = expected(cases, ["MR"], target=(2.0, 1.4, 1.4))
    assert want[0][1].shape == (1, 5, 9, 10)
    check_dataset(tmp_path / "ds", cases, want, RESAMPLED_TOL)


def test_auto_spacing_takes_the_anisotropy_from_cropped_shapes(tmp_path):
    """Cases coarse along x (3.6, 4, 4.4 mm) of 40 x 40 x 12 voxels, nonzero in a 30 x 30 x 12
    box: uncropped, x has over 3x fewer voxels (12 * 3 < 40) and would take the 10th
    percentile of its spacings (3.68 mm); cropped (12 * 3 >= 30) it keeps the median, 4 mm,
    as nnU-Net's fingerprint gives it."""
    nnunet_dataset(tmp_path / "src", ["MR"], [1])
    rng = np.random.default_rng(4)
    for k, x in enumerate([3.6, 4.0, 4.4]):
        image = np.zeros((40, 40, 12), np.int16)
        image[5:35, 5:35] = rng.integers(1, 500, (30, 30, 12))
        seg = np.zeros(image.shape, np.uint8)
        seg[10:20, 10:20, 2:8] = 1
        write_nifti(tmp_path / "src" / "imagesTr" / f"x{k}_0000.nii", image, spacing=(1.0, 1.0, x))
        write_nifti(tmp_path / "src" / "labelsTr" / f"x{k}.nii", seg, spacing=(1.0, 1.0, x))
    summary = shardify.convert(tmp_path / "src", tmp_path / "ds", preprocess="nnunet",
                               intensity_samples=CT_DRAWS, progress=False)
    cases = [read_case(tmp_path / "src", f"x{k}", 1) for k in range(3)]
    _, plan, want = expected(cases, ["MR"])
    assert plan["transpose_forward"] == [2, 0, 1]
    np.testing.assert_allclose(plan["configurations"]["3d_fullres"]["spacing"], [4.0, 1.0, 1.0], rtol=1e-6)
    assert any("-> 4 mm" in line and "(auto: median of 3 case(s))" in line for line in summary.preprocessing)
    check_dataset(tmp_path / "ds", cases, want, RESAMPLED_TOL)
