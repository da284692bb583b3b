"""The examples run as a user runs them (tiny settings): they train, print finite figures
and write what they say."""

import math
import os
import re
import subprocess
import sys

import shardify

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


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
