"""shardify.convert's preprocessing options (crop, ct normalization, spacing, dtype) against numpy."""

import os

import numpy as np
from scipy import ndimage

import shardify
from conftest import write_nifti


def make_cases(root):
    """Three i16 CT-like cases with zero borders and a foreground box each (pairs layout)."""
    rng = np.random.default_rng(3)
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    cases = []
    for k in range(3):
        shape = (10 + k, 12, 14)
        image = np.zeros(shape, np.int16)
        image[2:8, 3:10, 2:12] = rng.integers(1, 1500, size=(6, 7, 10)) * rng.choice([-1, 1], size=(6, 7, 10))
        mask = np.zeros(shape, np.uint8)
        mask[3:6, 4:8, 4:9 + k] = 1
        write_nifti(root / "images" / f"c{k}.nii", image, spacing=(2.0, 1.0, 1.0))
        write_nifti(root / "masks" / f"c{k}.nii", mask, spacing=(2.0, 1.0, 1.0))
        cases.append((image, mask))
    return cases


def test_preprocessing_options_reach_the_converter_and_match_numpy(tmp_path):
    cases = make_cases(tmp_path / "src")
    summary = shardify.convert(tmp_path / "src", tmp_path / "ds", crop="nonzero", normalize="ct",
                               spacing=(1.0, 1.0, 1.0), dtype="f16", resample_image="linear",
                               intensity_samples=10_000_000, progress=False)
    assert any("ct statistics" in line for line in summary.preprocessing)
    # nnU-Net's ct statistics, computed here with numpy as its fingerprint computes them: every
    # training case draws the same number of foreground values (here 10,000,000 over the split),
    # with replacement, from RandomState(1234); the statistics are those of all the draws.
    per_case = 10_000_000 // len(cases)
    foreground = np.concatenate([np.random.RandomState(1234).choice(image[mask > 0].astype(np.float64), per_case)
                                 for image, mask in cases])
    want = [np.percentile(foreground, 0.5), np.percentile(foreground, 99.5), foreground.mean(), foreground.std()]
    ds = shardify.Dataset(tmp_path / "ds")
    options = ds.provenance["options"]
    assert options["crop"] == "nonzero" and options["normalize"] == "ct" and options["dtype"] == "f16"
    assert options["spacing"] == "x=1,y=1,z=1" and options["resample_image"] == "linear"
    for i, (image, mask) in enumerate(cases):
        sample = ds[i]
        np.testing.assert_allclose(sample["image.normalization"][0], want, rtol=1e-12)
        assert sample["image.source_dtype"] == "i16"
        np.testing.assert_array_equal(sample["source.shape"], image.shape)
        np.testing.assert_array_equal(sample["source.crop_box"], [[2, 3, 2], [6, 7, 10]])
        assert sample["image"].dtype == np.float16
        assert sample["image"].shape == (1, 12, 7, 10)  # z: 6 voxels of 2 mm -> 12 of 1 mm
        assert sample["mask"].shape == (1, 12, 7, 10)
        np.testing.assert_allclose(sample["image.spacing"], [1.0, 1.0, 1.0])


def test_preprocessing_options_are_listed_and_checked(tmp_path):
    options = shardify.convert_options()
    for key in ("spacing", "crop", "normalize", "dtype", "resample_image", "resample_mask"):
        assert key in options and options[key]
    make_cases(tmp_path / "src")
    for bad, message in (({"crop": "box"}, "--crop"), ({"normalize": "minmax"}, "normalize"),
                         ({"spacing": (1, 0, 1)}, "spacing"), ({"dtype": "u9"}, "--dtype")):
        try:
            shardify.convert(tmp_path / "src", tmp_path / "x", progress=False, **bad)
        except ValueError as e:
            assert message in str(e)
        else:
            raise AssertionError(f"{bad} was accepted")


def write_brains(root, radius, cases=3):
    """nnU-Net-layout cases like skull-stripped MRI: two channels, nonzero in a ball (with a
    zero voxel enclosed at its centre, and channel 1 reaching one voxel further), zero
    around it; labels inside the ball and one label where the image is zero."""
    rng = np.random.default_rng(7)
    (root / "imagesTr").mkdir(parents=True)
    (root / "labelsTr").mkdir()
    (root / "dataset.json").write_text('{"channel_names": {"0": "T1", "1": "T2"}, '
                                       '"labels": {"background": 0, "a": 1, "b": 2}, "file_ending": ".nii"}')
    shape = (14, 16, 18)
    z, y, x = np.indices(shape)
    written = []
    for k in range(cases):
        centre = (7 + k % 2, 8, 9)
        ball = (z - centre[0]) ** 2 + (y - centre[1]) ** 2 + (x - centre[2]) ** 2 <= radius ** 2
        images = np.zeros((2,) + shape, np.int16)
        images[0][ball] = rng.integers(50, 900, size=ball.sum())
        images[1][ball] = rng.integers(1, 300, size=ball.sum())
        images[:, centre[0], centre[1], centre[2]] = 0  # a hole
        edge = np.argwhere(ball)[0]
        images[1, edge[0] - 1, edge[1], edge[2]] = 40  # one channel alone
        seg = np.zeros(shape, np.uint8)
        seg[ball & (x < centre[2])] = 1
        seg[tuple(np.argwhere(ball)[-1] + [0, 0, 1])] = 2  # labelled where the image is 0
        for c in range(2):
            write_nifti(root / "imagesTr" / f"b{k}_{c:04d}.nii", images[c])
        write_nifti(root / "labelsTr" / f"b{k}.nii", seg)
        written.append((images, seg))
    return written


def nnunet_zscore_in_region(images, seg):
    """nnU-Net's crop_to_nonzero and ZScoreNormalization with use_mask_for_norm, in numpy/scipy."""
    nonzero = np.any(images != 0, axis=0)
    box = tuple(slice(i.min(), i.max() + 1) for i in np.nonzero(nonzero))
    data = images[(slice(None),) + box].astype(np.float64)
    seg = seg[box].astype(np.int16)
    seg[(seg == 0) & ~ndimage.binary_fill_holes(nonzero[box])] = -1
    region = seg >= 0
    out = np.zeros_like(data)
    for c in range(len(data)):
        inside = data[c][region]
        out[c][region] = (inside - inside.mean()) / max(inside.std(), 1e-8)
    return out


def test_zscore_uses_the_nonzero_region_when_cropping_shrinks_the_median_case_below_three_quarters(tmp_path):
    cases = write_brains(tmp_path / "small", radius=4)  # the ball's box: under 1/4 of the volume
    summary = shardify.convert(tmp_path / "small", tmp_path / "ds", crop="nonzero", normalize="zscore", progress=False)
    assert any("zscore within the nonzero region" in line and "below 75%" in line for line in summary.preprocessing)
    ds = shardify.Dataset(tmp_path / "ds")
    assert ds.provenance["options"]["zscore_region"] == "nonzero"
    for i, (images, seg) in enumerate(cases):
        want = nnunet_zscore_in_region(images, seg)
        got = ds[i]["image"]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=2e-6)
        assert np.count_nonzero(got == 0) > 0.5 * got[0].size  # outside the region: exactly 0

    # Back on the source grid, outside the crop is outside the region too: 0, as inside.
    import struct
    import subprocess
    shardtool = os.path.join(os.path.dirname(os.path.abspath(shardify.__file__)), "..", "..", "bin", "shardtool")
    subprocess.run([shardtool, "export", str(tmp_path / "ds"), "0", "-o", str(tmp_path / "back.nii"), "--field", "image",
                    "--source-grid"], check=True, capture_output=True)
    raw = open(tmp_path / "back.nii", "rb").read()
    offset = int(struct.unpack_from("<f", raw, 108)[0])
    images, seg = cases[0]
    back = np.frombuffer(raw, np.float32, offset=offset).reshape(images.shape)
    nonzero = np.any(images != 0, axis=0)
    box = tuple(slice(i.min(), i.max() + 1) for i in np.nonzero(nonzero))
    np.testing.assert_array_equal(back[(slice(None),) + box], ds[0]["image"])
    outside = np.ones(nonzero.shape, bool)
    outside[box] = False
    assert outside.any() and np.all(back[:, outside] == 0)

    # A ball filling most of its volume: cropping keeps over 3/4, every voxel counts.
    write_brains(tmp_path / "large", radius=9, cases=1)
    summary = shardify.convert(tmp_path / "large", tmp_path / "ds2", crop="nonzero", normalize="zscore", progress=False)
    assert any("zscore over every voxel" in line for line in summary.preprocessing)
    ds2 = shardify.Dataset(tmp_path / "ds2")
    assert "zscore_region" not in ds2.provenance["options"]
    image = ds2[0]["image"]
    np.testing.assert_allclose(image.reshape(2, -1).mean(axis=1), 0, atol=1e-5)
    np.testing.assert_allclose(image.reshape(2, -1).std(axis=1), 1, atol=1e-5)


def test_preprocess_nnunet_is_the_explicit_flags_with_each_channel_normalized_by_its_name(tmp_path):
    write_brains(tmp_path / "src", radius=4, cases=2)
    (tmp_path / "src" / "dataset.json").write_text(
        '{"channel_names": {"0": "CT", "1": "T2"}, "labels": {"background": 0, "a": 1, "b": 2}, '
        '"numTraining": 2, "file_ending": ".nii"}')
    draws = 1_000_000  # a hundredth of the default (and of nnU-Net's), for time
    summary = shardify.convert(tmp_path / "src", tmp_path / "preset", preprocess="nnunet", intensity_samples=draws,
                               progress=False)
    assert any("CT -> ct, T2 -> zscore" in line for line in summary.preprocessing)
    shardify.convert(tmp_path / "src", tmp_path / "flags", crop="nonzero", spacing="auto", normalize="ct,zscore",
                     intensity_samples=draws, progress=False)
    preset, flags = shardify.Dataset(tmp_path / "preset"), shardify.Dataset(tmp_path / "flags")
    options = preset.provenance["options"]
    assert options["preprocess"] == "nnunet" and options["normalize"] == "ct,zscore"
    assert options["crop"] == "nonzero" and options["spacing_rule"] == "auto"
    assert {k: v for k, v in options.items() if k != "preprocess"} == flags.provenance["options"]
    for i in range(len(preset)):
        np.testing.assert_array_equal(preset[i]["image"], flags[i]["image"])
        np.testing.assert_array_equal(preset[i]["mask"], flags[i]["mask"])
    # A flag given as well wins over the preset's; a scheme nnU-Net has and shardify not is refused.
    shardify.convert(tmp_path / "src", tmp_path / "z", preprocess="nnunet", normalize="zscore", intensity_samples=draws,
                     progress=False)
    assert shardify.Dataset(tmp_path / "z").provenance["options"]["normalize"] == "zscore"
    (tmp_path / "src" / "dataset.json").write_text(
        '{"channel_names": {"0": "rescale_to_0_1", "1": "T2"}, "labels": {"background": 0, "a": 1, "b": 2}, '
        '"numTraining": 2, "file_ending": ".nii"}')
    try:
        shardify.convert(tmp_path / "src", tmp_path / "bad", preprocess="nnunet", progress=False)
    except ValueError as e:
        assert "rescale_to_0_1" in str(e)
    else:
        raise AssertionError("rescale_to_0_1 was accepted")
