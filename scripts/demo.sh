#!/usr/bin/env bash
# The main job on the built-in default dataset, from a fresh Debian 12 machine: installs
# the missing packages the programs need (not the tests'), builds the four programs it runs, writes Debian's
# Fashion-MNIST (70,000 images) as class-folder PNGs (the layout users have), converts
# them once with shardify, inspects the shards with shardtool, trains the seed workload
# (MLP 784-128-64-10, batch 64, Adam 1e-3) with shardtrain and reports accuracy,
# samples/s and data-wait.
# Environment: OUT (default demo-out/), EPOCHS (default 5), MODEL (default mlp), JOBS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/demo-out}
epochs=${EPOCHS:-5}
model=${MODEL:-mlp}
jobs=${JOBS:-$(nproc)}
bash scripts/install-deps.sh programs

echo "== Build (Release): the four programs the demo runs"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHARDIFY_WITH_ITK=ON -DSHARDIFY_WITH_TORCH=ON \
  -DSHARDIFY_SANITIZE=OFF >/dev/null
cmake --build build -j "$jobs" --target idx2png shardify shardtool shardtrain
bin=$root/build/bin
mkdir -p "$out"

src=/usr/share/datasets/fashion-mnist
pngs=$out/fashion-mnist-png
if [ ! -f "$pngs/.complete" ]; then
  echo "== Writing Fashion-MNIST as class-folder PNGs under $pngs"
  rm -rf "$pngs"
  classes="T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot"
  "$bin/idx2png" "$src/train-images-idx3-ubyte.gz" "$src/train-labels-idx1-ubyte.gz" -o "$pngs" --classes "$classes"
  "$bin/idx2png" "$src/t10k-images-idx3-ubyte.gz" "$src/t10k-labels-idx1-ubyte.gz" -o "$pngs" --classes "$classes" \
    --prefix test-
  touch "$pngs/.complete"
fi

shards=$out/fashion-mnist
echo "== Converting with shardify"
"$bin/shardify" "$pngs" -o "$shards" --split train=0.8,val=0.1,test=0.1 --seed 1 --overwrite

echo "== Inspecting with shardtool"
"$bin/shardtool" info "$shards"
"$bin/shardtool" verify "$shards" --quick
"$bin/shardtool" grid "$shards" -o "$out/grid.png" --count 64 --seed 1
echo "contact sheet: $out/grid.png"

echo "== Training with shardtrain ($model, $epochs epochs, batch 64, Adam 1e-3)"
"$bin/shardtrain" train "$shards" --model "$model" --batch 64 --lr 1e-3 --epochs "$epochs" --test-split test \
  --out "$out/run-$model"
echo "metrics: $out/run-$model/metrics.jsonl, curve: $out/run-$model/curve.png"
