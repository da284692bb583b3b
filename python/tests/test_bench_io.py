"""bench/bench_io.py --quick: every reader of the I/O benchmark runs on the same images and
reports a figure, and the Markdown table has every row. (Speed itself is not asserted.)"""

import json
import os
import subprocess
import sys

import shardify

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "bench_io.py")
# build/python/shardify/__init__.py -> build
BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(shardify.__file__))))
ROWS = ["imagefolder", "tensordataset", "index_select", "memmap", "py_zstd", "py_raw", "cpp_zstd", "cpp_raw",
        "bare_zstd"]
QUICK_SAMPLES = 1024


def test_quick_run_gives_a_figure_for_every_reader_and_batch(tmp_path):
    out = tmp_path / "bench.json"
    r = subprocess.run([sys.executable, SCRIPT, "--build", BUILD, "--work", str(tmp_path / "work"), "--quick",
                        "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(out.read_text())
    assert report["samples"] == QUICK_SAMPLES
    assert [row["key"] for row in report["rows"]] == ROWS + (["ffcv"] if report["ffcv"] else [])
    for row in report["rows"]:
        assert sorted(row["results"], key=int) == ["64", "256"], row["key"]
        for batch, result in row["results"].items():
            assert result["samples_per_s"] > 0, (row["key"], batch)
            assert result["cpu_us_per_sample"] > 0, (row["key"], batch)
            if row["key"] == "imagefolder":  # bounded by time: at most one epoch
                assert 0 < result["samples"] <= QUICK_SAMPLES
                assert sorted(run["num_workers"] for run in result["runs"]) == [0, report["threads"]]
            else:  # whole epochs of the quick split
                assert result["samples"] == QUICK_SAMPLES * result["epochs"] > 0, (row["key"], batch)
        # every reader is a line of the table, with both batch sizes' figures
        line = next((l for l in r.stdout.splitlines() if l.startswith("| " + row["reader"] + " |")), None)
        assert line is not None, row["reader"]
        assert len(line.strip("|").split("|")) == 4
    for ratio in report["ratios"]:
        assert all(value > 0 for value in ratio["results"].values()), ratio["ratio"]
        assert any(l.startswith("| " + ratio["ratio"] + " |") for l in r.stdout.splitlines())
    # one cold epoch per batch size of each Loader (and FFCV), each in a process of its own
    for key in ["py_zstd", "py_raw"] + (["ffcv"] if report["ffcv"] else []):
        assert sorted(report["cold"][key], key=int) == ["64", "256"], key
        for result in report["cold"][key].values():
            assert result["samples"] == QUICK_SAMPLES and result["samples_per_s"] > 0, key
    assert set(report["bytes"]) >= {"index_select", "py_zstd", "py_raw"}
