#!/usr/bin/env bash
# The race: the same Fashion-MNIST images read two ways on this machine, samples/s each.
#   1. PyTorch's DataLoader as users run it: torchvision ImageFolder over class-folder
#      PNGs, ToTensor, shuffle=True, num_workers 0 and 2, batch 64 and 300.
#   2. shardify's Loader over the shards of those images (bin/loader_bench), shuffled,
#      same batch sizes, all cores, checksums verified.
# Prints one line per configuration and the ratio of the Loader to the best DataLoader.
#
# Usage: tests/reader/race.sh [--build DIR] [--pngs DIR] [--shards DIR] [--work DIR]
#                             [--epochs N] [--batches 64,300]
#   --build   build directory holding bin/loader_bench (default: build-reader)
#   --pngs    class-folder PNGs; made from the idx files when missing (bin/idx2png if
#             built, else Python/PIL)
#   --shards  the dataset converted from those PNGs; made when missing (bin/shardify if
#             built, else bin/reader_idx_fixture from the same idx files: same pixels)
#   --work    where made inputs go (default: /tmp/shardify-race)
#   --epochs  Loader epochs per run (default 3; median of 3 runs; the DataLoader runs one epoch)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build-reader
work=/tmp/shardify-race
pngs= shards= epochs=3 batches=64,300
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --pngs) pngs=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "race.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $build = /* ]] || build=$PWD/$build
pngs=${pngs:-$work/pngs}
shards=${shards:-$work/shards}
src=/usr/share/datasets/fashion-mnist
classes="T-shirt_top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle_boot"
py=/usr/bin/python3
mkdir -p "$work"

if [[ ! -d $pngs ]]; then
  if [[ -x $build/bin/idx2png ]]; then
    "$build/bin/idx2png" "$src/train-images-idx3-ubyte.gz" "$src/train-labels-idx1-ubyte.gz" \
      -o "$pngs" --classes "$classes"
  else
    echo "race: writing PNGs with Python to $pngs" >&2
    "$py" - "$src" "$pngs" "$classes" <<'PY'
import gzip, os, sys
import numpy as np
from PIL import Image
src, out, classes = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
images = np.frombuffer(gzip.open(f"{src}/train-images-idx3-ubyte.gz").read()[16:], np.uint8).reshape(-1, 28, 28)
labels = np.frombuffer(gzip.open(f"{src}/train-labels-idx1-ubyte.gz").read()[8:], np.uint8)
for c in classes:
    os.makedirs(f"{out}/{c}", exist_ok=True)
for i, (img, lab) in enumerate(zip(images, labels)):
    Image.fromarray(img, mode="L").save(f"{out}/{classes[lab]}/{i:05d}.png")
PY
  fi
fi

if [[ ! -f $shards/manifest.sfm ]]; then
  if [[ -x $build/bin/shardify ]]; then
    "$build/bin/shardify" "$pngs" -o "$shards" --no-fsync --quiet
  else
    echo "race: bin/shardify not built; writing $shards from the same idx files" >&2
    gunzip -c "$src/train-images-idx3-ubyte.gz" > "$work/images.idx"
    gunzip -c "$src/train-labels-idx1-ubyte.gz" > "$work/labels.idx"
    "$build/bin/reader_idx_fixture" "$work/images.idx" "$work/labels.idx" -o "$shards" \
      --classes "$classes"
  fi
fi

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "images: $(find "$pngs" -name '*.png' | wc -l) PNGs in $pngs; shards in $shards"

results=$work/results.txt
: > "$results"
for b in ${batches//,/ }; do
  for w in 0 2; do
    "$py" - "$pngs" "$b" "$w" <<'PY' | tee -a "$results"
import sys, time, torch
from torchvision import datasets, transforms
root, batch, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ds = datasets.ImageFolder(root, transform=transforms.ToTensor())
t0 = time.perf_counter()
loader = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers)
n = 0
for x, y in loader:
    n += x.shape[0]
dt = time.perf_counter() - t0
print(f"dataloader batch={batch} workers={workers} samples={n} seconds={dt:.3f} samples_per_s={n / dt:.1f}")
PY
  done
  runs=()
  for _ in 1 2 3; do
    runs+=("$("$build/bin/loader_bench" "$shards" --batch "$b" --threads 0 --epochs "$epochs" --json)")
  done
  "$py" - "$b" "${runs[@]}" <<'PY' | tee -a "$results"
import json, sys
batch, runs = sys.argv[1], sorted((json.loads(a) for a in sys.argv[2:]), key=lambda r: r["samples_per_second"])
r = runs[len(runs) // 2]  # the median of three runs
print("loader batch=%s threads=all samples=%d seconds=%.3f samples_per_s=%.1f mb_per_s=%.1f (median of %d)"
      % (batch, r["samples"], r["seconds"], r["samples_per_second"], r["mb_per_second"], len(runs)))
PY
done

"$py" - "$results" <<'PY'
import re, sys
rows = [dict(re.findall(r"(\w+)=(\S+)", line)) | {"kind": line.split()[0]} for line in open(sys.argv[1])]
best = max(float(r["samples_per_s"]) for r in rows if r["kind"] == "dataloader")
for r in rows:
    if r["kind"] == "loader":
        ratio = float(r["samples_per_s"]) / best
        print(f"ratio batch={r['batch']}: loader {float(r['samples_per_s']):.0f} / best dataloader {best:.0f} samples/s = {ratio:.1f}x")
PY
