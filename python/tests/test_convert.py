"""shardify.convert: the command line's options as keyword arguments, progress, cancel."""

import os

import numpy as np
import pytest

import shardify


def test_keyword_arguments_become_the_command_line(fmnist_png, tmp_path):
    summary = shardify.convert(fmnist_png, tmp_path / "ds", split={"train": 0.5, "val": 0.5}, level=9, dict=False,
                               seed=3, threads=1, shard_size="32K", fsync=False, progress=False)
    assert isinstance(summary, shardify.ConvertSummary)
    assert summary.samples == 600 and summary.layout == "folder" and summary.shards > 1
    assert sum(summary.splits.values()) == 600 and not summary.dictionary
    assert "600 samples, layout folder" in str(summary)
    recorded = shardify.Dataset(tmp_path / "ds").provenance["options"]
    assert recorded["level"] == "9" and recorded["dict"] == "false" and recorded["seed"] == "3"
    same = shardify.convert(fmnist_png, tmp_path / "again", split="train=0.5,val=0.5", level=9, dict=False,
                            seed=3, threads=2, shard_size=32 * 1024, progress=False)
    assert same.splits == summary.splits
    for name in sorted(os.listdir(tmp_path / "ds")):  # byte-identical for any thread count
        assert (tmp_path / "ds" / name).read_bytes() == (tmp_path / "again" / name).read_bytes()


def test_options_are_listed_with_their_help():
    options = shardify.convert_options()
    for key in ("layout", "split", "level", "patch_size", "overwrite", "dry_run", "shuffle", "dict", "fsync"):
        assert key in options and options[key]


def test_bad_options_raise(fmnist_png, tmp_path):
    with pytest.raises(TypeError, match="unexpected keyword argument 'levle'"):
        shardify.convert(fmnist_png, tmp_path / "a", levle=3)
    with pytest.raises(ValueError, match="--level"):
        shardify.convert(fmnist_png, tmp_path / "a", level=42)
    with pytest.raises(ValueError, match="split"):
        shardify.convert(fmnist_png, tmp_path / "a", split={"train": 2})
    with pytest.raises(ValueError, match="takes a value"):
        shardify.convert(fmnist_png, tmp_path / "a", split=True)
    with pytest.raises(ValueError, match="True or False"):
        shardify.convert(fmnist_png, tmp_path / "a", overwrite="yes")
    with pytest.raises(FileNotFoundError):
        shardify.convert(tmp_path / "missing", tmp_path / "a", progress=False)
    assert not (tmp_path / "a" / "manifest.sfm").exists()


def test_existing_destination_needs_overwrite(fmnist_png, tmp_path):
    shardify.convert(fmnist_png, tmp_path / "ds", progress=False)
    with pytest.raises(FileExistsError, match=r"already holds a dataset \(manifest.sfm\); to replace it, pass "
                       r"--overwrite on the command line, overwrite=True in Python"):
        shardify.convert(fmnist_png, tmp_path / "ds", progress=False)
    shardify.convert(fmnist_png, tmp_path / "ds", overwrite=True, progress=False)
    dry = shardify.convert(fmnist_png, tmp_path / "dry", dry_run=True, progress=False)
    assert dry.dry_run and dry.samples == 600 and not (tmp_path / "dry" / "manifest.sfm").exists()


def test_progress_callback_and_cancelling_from_it(fmnist_png, tmp_path):
    calls = []
    shardify.convert(fmnist_png, tmp_path / "ds", progress=lambda *a: calls.append(a))
    assert calls and calls[-1][1] == calls[-1][2] == 600  # (phase, done, total, bytes_in)
    assert {c[0] for c in calls} <= {"scan", "inspect", "convert"}

    def stop(phase, done, total, bytes_in):
        if phase == "convert":
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        shardify.convert(fmnist_png, tmp_path / "stopped", progress=stop, threads=1)
    assert not (tmp_path / "stopped" / "manifest.sfm").exists()


def test_a_bad_input_names_the_file(tmp_path):
    (tmp_path / "src" / "a").mkdir(parents=True)
    from PIL import Image
    Image.fromarray(np.zeros((8, 8), dtype=np.uint8)).save(tmp_path / "src" / "a" / "good.png")
    (tmp_path / "src" / "a" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    with pytest.raises(OSError, match="broken.png"):
        shardify.convert(tmp_path / "src", tmp_path / "ds", progress=False)
    summary = shardify.convert(tmp_path / "src", tmp_path / "ds", on_error="skip", progress=False)
    assert summary.samples == 1 and summary.skipped[0][0].endswith("broken.png")


def test_convert_in_parts_then_merge_equals_one_run(fmnist_png, tmp_path):
    options = dict(split={"train": 0.8, "val": 0.2}, seed=2, shard_size="16K", fsync=False, progress=False)
    shardify.convert(fmnist_png, tmp_path / "one", **options)
    one = shardify.Dataset(tmp_path / "one")
    parts = [shardify.convert(fmnist_png, tmp_path / "ds", part=f"{k}/3", **options) for k in (1, 2, 3)]
    assert [p.part for p in parts] == ["1/3", "2/3", "3/3"] and not any(p.part_complete for p in parts)
    assert sum(p.samples for p in parts) == 600 and "part 2/3: samples [200, 400) of 600" in str(parts[1])
    assert shardify.convert(fmnist_png, tmp_path / "ds", part="2/3", **options).part_complete  # nothing to redo
    merged = shardify.merge(tmp_path / "ds", fsync=False)
    assert isinstance(merged, shardify.MergeSummary)
    assert merged.parts == 3 and merged.samples == 600 and not merged.already_merged
    assert merged.splits == one.splits and "600 samples from 3 parts" in str(merged)
    ds = shardify.Dataset(tmp_path / "ds")
    assert ds.splits == one.splits and ds.classes == one.classes
    for i in range(0, 600, 7):
        a, b = one[i], ds[i]
        assert a["path"] == b["path"] and a["label"] == b["label"]
        np.testing.assert_array_equal(a["image"], b["image"])
    assert shardify.merge(tmp_path / "ds").already_merged


def test_merge_refuses_a_missing_part_naming_it(fmnist_png, tmp_path):
    shardify.convert(fmnist_png, tmp_path / "ds", part="1/2", progress=False, fsync=False)
    with pytest.raises(FileNotFoundError, match="part 2/2"):
        shardify.merge(tmp_path / "ds")
    with pytest.raises(ValueError, match="--part"):
        shardify.convert(fmnist_png, tmp_path / "ds", part="3/2", progress=False)
    assert not (tmp_path / "ds" / "manifest.sfm").exists()
