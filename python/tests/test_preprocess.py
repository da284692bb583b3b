"""shardify.convert's preprocessing options (crop, ct normalization, spacing, dtype) against numpy."""

import numpy as np

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
                               spacing=(1.0, 1.0, 1.0), dtype="f16", resample_image="linear", progress=False)
    assert any("ct statistics" in line for line in summary.preprocessing)
    # nnU-Net's ct statistics, computed here with numpy as its fingerprint computes them: every
    # training case draws the same number of foreground values (10,000,000 over the split),
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
