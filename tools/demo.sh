#!/usr/bin/env bash
# The main job on the built-in default dataset, from a fresh Debian 12 machine: installs
# missing packages, builds, writes Debian's Fashion-MNIST as class-folder PNGs (the layout
# users have), converts them to shards, inspects them, trains on them and reports.
# Output goes to demo-out/ (override with OUT=...). EPOCHS (default 3) sets training length.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/demo-out}
jobs=${JOBS:-$(nproc)}
bash tools/install-deps.sh
echo "== Build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"
bin=build/bin
mkdir -p "$out"

echo "== Format benchmark (quick)"
"$bin/format_bench" --quick --dir "$out/format-bench"
