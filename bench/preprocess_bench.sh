#!/bin/bash
# Conversion time per case with each preprocessing step on and off, and the stored size:
# converts SRC (default: ITK's example brain MRI with its segmentation, as an image/mask
# pair) with one thread, fastest of 5 runs per option set.
#   bench/preprocess_bench.sh [SRC]      (BIN=build/bin by default)
set -euo pipefail
BIN=${BIN:-build/bin}
DATA=/usr/share/doc/insighttoolkit5-examples/examples/Data
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=${1:-}
if [ -z "$src" ]; then
  src=$work/brain
  mkdir -p "$src/images" "$src/masks"
  cp "$DATA/KmeansTest_T1UCharRaw.nii.gz" "$src/images/brain.nii.gz"
  cp "$DATA/KmeansTest_T1KmeansPrelimSegmentation.nii.gz" "$src/masks/brain.nii.gz"
fi
run() {
  local best=""
  for _ in 1 2 3 4 5; do
    local s
    s=$("$BIN/shardify" "$src" -o "$work/out" --overwrite --threads 1 --no-fsync -q "$@" | awk '$2 == "s," {print $1}')
    best=$(awk -v a="$best" -v b="$s" 'BEGIN {print (a == "" || b < a) ? b : a}')
  done
  printf '%-80s %7.3f s %10d bytes\n' "${*:-(none)}" "$best" "$(cat "$work"/out/*.sfs | wc -c)"
}
run
run --crop nonzero
run --normalize zscore
run --normalize ct
run --spacing 1.5,1.5,1.5
run --spacing 1,1,1
run --spacing 1,1,1 --resample-image linear --resample-mask nearest
run --crop nonzero --normalize ct --spacing 1,1,1
run --crop nonzero --normalize ct --spacing 1,1,1 --dtype f16
run --patch-size 64x64x64
run --patch-size 64x64x64 --crop nonzero --normalize ct --spacing 1,1,1 --dtype f16
