"""python -m shardify.check nnunet against a stand-in of nnunetv2 (nnunet_standin.py: nnU-Net's
API over nnunet_reference.py): test_nnunet_parity.py's generated anisotropic T2, CT and noNorm
cases in nnU-Net's raw layout, a plans file in nnU-Net's schema, converted with --plans."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

import nnunet_reference as ref
import nnunet_standin
import shardify
from shardify import check
from test_nnunet_parity import write_ct_cases

ZYX_SPACING = (2.6, 0.8, 0.8)  # nnU-Net's target for write_ct_cases' cases (test_nnunet_parity)
CHANNELS = ("T2", "CT", "noNorm")  # write_ct_cases'
TRANSPOSED = (2, 0, 1)  # nnU-Net's axes x, z, y


def _kwargs(seg, order):
    return {"is_seg": seg, "order": order, "order_z": 0, "force_separate_z": None}


def plans(use_mask, transpose_forward):
    """nnUNetPlans.json as nnUNetv2_plan_and_preprocess writes it (the keys nnU-Net's
    PlansManager, ConfigurationManager and DefaultPreprocessor read), for CHANNELS; `use_mask`
    one flag per channel."""
    tf = list(transpose_forward)
    ct = {"percentile_00_5": -1000.0, "percentile_99_5": 1400.0, "mean": 100.0, "std": 400.0, "median": 40.0,
          "min": -1100.0, "max": 1500.0}
    fullres = {"data_identifier": "nnUNetPlans_3d_fullres", "preprocessor_name": "DefaultPreprocessor",
               "batch_size": 2, "patch_size": [8, 8, 8], "median_image_size_in_voxels": [8, 27, 27],
               "spacing": [ZYX_SPACING[a] for a in tf],
               "normalization_schemes": [ref.get_normalization_scheme(n) for n in CHANNELS],
               "use_mask_for_norm": use_mask,
               "resampling_fn_data": "resample_data_or_seg_to_shape", "resampling_fn_data_kwargs": _kwargs(False, 3),
               "resampling_fn_seg": "resample_data_or_seg_to_shape", "resampling_fn_seg_kwargs": _kwargs(True, 1),
               "resampling_fn_probabilities": "resample_data_or_seg_to_shape",
               "resampling_fn_probabilities_kwargs": _kwargs(False, 1), "batch_dice": False,
               "architecture": {"network_class_name": "dynamic_network_architectures.architectures.unet.PlainConvUNet",
                                "arch_kwargs": {}, "_kw_requires_import": []}}
    return {"dataset_name": "Dataset042_Check", "plans_name": "nnUNetPlans", "image_reader_writer": "NibabelIO",
            "original_median_spacing_after_transp": [3.0, 0.8, 0.8], "original_median_shape_after_transp": [6, 36, 40],
            "transpose_forward": tf, "transpose_backward": [tf.index(a) for a in range(3)],
            "configurations": {"3d_fullres": fullres}, "experiment_planner_used": "ExperimentPlanner",
            "label_manager": "LabelManager",
            "foreground_intensity_properties_per_channel": {str(c): ct for c in range(len(CHANNELS))}}


def converted(root, use_mask, transpose_forward, **options):
    """The raw cases, their plans file and the dataset converted with it: (raw, dataset, plans)."""
    write_ct_cases(root / "raw")
    path = root / "nnUNetPlans.json"
    path.write_text(json.dumps(plans(use_mask, transpose_forward), indent=1))
    shardify.convert(root / "raw", root / "ds", plans=str(path), progress=False, **options)
    return str(root / "raw"), str(root / "ds"), str(path)


@pytest.fixture(scope="module")
def ct(tmp_path_factory):
    """Normalized without the nonzero region (no zscore_region), nnU-Net's axes x, z, y."""
    return converted(tmp_path_factory.mktemp("check"), [False] * 3, TRANSPOSED)


def run(capsys, *args):
    code = check.main(["nnunet", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_matching_dataset_passes_with_a_line_per_case(ct, monkeypatch, capsys):
    nnunet_standin.install(monkeypatch)
    raw, ds, plans_file = ct
    code, out, err = run(capsys, raw, ds, "--plans", plans_file)
    assert (code, err) == (0, ""), out
    assert "transpose_forward [2, 0, 1], the dataset's arrays compared transposed by it" in out
    assert "nnU-Net's -1 outside the nonzero region read as 0 (the dataset has no zscore_region" in out
    assert "|diff| <= 0.0001 * max(1, |nnU-Net's value|) per voxel (float32 rounding" in out
    lines = [line for line in out.splitlines() if line.startswith("OK ct")]
    assert [line.split()[1] for line in lines] == ["ct0", "ct1", "ct2"]
    assert lines[1].startswith("OK ct1 (train, sample 1): shape nnU-Net [3, 27, 9, 27], dataset [3, 9, 27, 27]; "
                               "image max |diff| ")
    assert "; labels 0 of 6,561 differ; crop box z 0:7 y 4:33 x 6:35 of [7, 36, 40], both sides" in lines[1]
    assert out.splitlines()[-1] == "OK: 3 case(s) match nnU-Net's preprocessing"

    report = check.nnunet(raw, ds, cases=2, plans=plans_file)
    assert report.ok and report.exit_code == 0 and not report.minus_one_stored
    assert [c.name for c in report.cases] == ["ct0", "ct1"] and report.held == 3
    assert all(0 <= c.image_max_diff <= 1e-5 and c.labels_total > 0 for c in report.cases)


def test_a_shifted_voxel_label_or_crop_box_fails_naming_the_case(ct, monkeypatch, capsys):
    nnunet_standin.install(monkeypatch)
    plain = nnunet_standin.DefaultPreprocessor.run_case

    def shifted(self, image_files, seg_file, *args):
        data, seg, properties = plain(self, image_files, seg_file, *args)
        if "ct0_" in image_files[0]:
            properties["bbox_used_for_cropping"][1][0] -= 1  # nnU-Net's axis 1: z
        if "ct1_" in image_files[0]:
            data[1, 5, 3, 10] += 0.01  # channel CT at x 5, z 3, y 10
        if "ct2_" in image_files[0]:
            seg[0, 4, 2, 9] = 2 if seg[0, 4, 2, 9] != 2 else 1
        return data, seg, properties

    monkeypatch.setattr(nnunet_standin.DefaultPreprocessor, "run_case", shifted)
    raw, ds, plans_file = ct
    code, out, _ = run(capsys, raw, ds, "--plans", plans_file)
    assert code == 1, out
    lines = {line.split()[1]: line for line in out.splitlines() if line.startswith(("OK ct", "MISMATCH ct"))}
    assert lines["ct0"].startswith("MISMATCH ct0") and "; labels 0 of " in lines["ct0"]
    assert lines["ct0"].endswith("; crop box nnU-Net z -1:6 y 4:33 x 6:35 of [6, 36, 40], "
                                 "dataset z 0:6 y 4:33 x 6:35 of [6, 36, 40]")
    assert lines["ct1"].startswith("MISMATCH ct1")
    assert "; image max |diff| 0.01 at [1, 5, 3, 10] (nnU-Net " in lines["ct1"]
    assert "; labels 0 of " in lines["ct1"] and lines["ct1"].endswith("both sides")
    assert lines["ct2"].startswith("MISMATCH ct2") and "; labels 1 of " in lines["ct2"]
    assert out.splitlines()[-1] == "MISMATCH: 3 of 3 case(s) differ from nnU-Net's: ct0, ct1, ct2"

    code, out, _ = run(capsys, raw, ds, "--plans", plans_file, "--case", "ct1", "--tolerance", "0.01")
    assert code == 0 and "OK ct1" in out and "float32 rounding" not in out


def test_without_nnunetv2_it_says_how_to_install_it(ct, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "nnunetv2", None)  # import nnunetv2 fails
    raw, ds, plans_file = ct
    code, out, err = run(capsys, raw, ds, "--plans", plans_file)
    assert code == 2 and out == ""
    assert "nnunetv2 is not importable" in err and "pip install nnunetv2" in err
    with pytest.raises(ImportError, match="nnunetv2 is not importable"):
        check.nnunet(raw, ds, plans=plans_file)


def _break(tmp_path, ct, what):
    """Arguments after `nnunet` with one input broken, and the text the error must hold."""
    raw, ds, plans_file = ct
    if what == "raw":
        return [tmp_path / "nope", ds, "--plans", plans_file], f"{tmp_path / 'nope'}: no such directory"
    if what == "dataset":
        return [raw, tmp_path / "nope", "--plans", plans_file], f"{tmp_path / 'nope'}: cannot open"
    if what == "plans":
        return [raw, ds, "--plans", tmp_path / "p.json"], f"{tmp_path / 'p.json'}: no such file (--plans)"
    if what == "no plans":
        return [raw, ds], "was converted with --plans nnUNetPlans.json (xxh3 0x"
    if what == "other transpose":
        (tmp_path / "p.json").write_text(json.dumps(plans([False] * 3, (0, 1, 2))))
        return [raw, ds, "--plans", tmp_path / "p.json"], "converted with plans whose transpose_forward is [2,0,1]"
    if what == "case":
        return [raw, ds, "--plans", plans_file, "--case", "ct9"], f"{ds} holds no training case ct9; it has ct0, ct1"
    shutil.copytree(raw, tmp_path / "raw")
    (tmp_path / "raw" / "labelsTr" / "ct0.nii").unlink()
    return [tmp_path / "raw", ds, "--plans", plans_file], f"{tmp_path / 'raw' / 'labelsTr' / 'ct0.nii'}: no such file"


@pytest.mark.parametrize("what", ["raw", "dataset", "plans", "no plans", "other transpose", "case", "label file"])
def test_bad_input_exits_2_naming_it(ct, tmp_path, monkeypatch, capsys, what):
    nnunet_standin.install(monkeypatch)
    args, message = _break(tmp_path, ct, what)
    code, out, err = run(capsys, *args)
    assert code == 2 and message in err, err
    assert "Traceback" not in err


def test_the_module_runs_as_a_program(tmp_path):
    done = subprocess.run([sys.executable, "-m", "shardify.check", "nnunet", str(tmp_path / "raw"), str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"python -m shardify.check nnunet: {tmp_path / 'raw'}: no such directory "
                           "(the nnU-Net raw dataset)\n")


def test_with_zscore_region_the_dataset_keeps_nnunets_minus_one(tmp_path, monkeypatch):
    """T2 normalized within the nonzero region: the dataset stores nnU-Net's -1 outside it, and
    the labels are compared with it as they are."""
    nnunet_standin.install(monkeypatch)
    raw, ds, plans_file = converted(tmp_path, [True, False, False], (0, 1, 2))
    assert shardify.Dataset(ds).provenance["options"]["zscore_region"] == "nonzero"  # every zscore channel
    report = check.nnunet(raw, ds, plans=plans_file, cases=["ct2"])
    assert report.minus_one_stored and "-1 included" in str(report)
    assert report.ok, str(report)
    assert np.any(shardify.Dataset(ds)[report.cases[0].index]["mask"] == -1)


def test_an_f16_dataset_may_differ_by_its_rounding(tmp_path, monkeypatch):
    """--dtype f16 rounds each voxel to half an f16 step (2^-11 of the value), beyond 1e-4."""
    nnunet_standin.install(monkeypatch)
    raw, ds, plans_file = converted(tmp_path, [False] * 3, (0, 1, 2), dtype="f16")
    report = check.nnunet(raw, ds, plans=plans_file, cases=1)
    assert "image stored as f16: a voxel may differ by half a step of f16 more" in str(report)
    assert report.ok and 1e-4 < report.cases[0].image_max_diff < 5e-3, str(report)
