#!/usr/bin/env bash
# Builds the libFuzzer target with clang and runs it for a bounded time.
# Usage: tests/fuzz/run_fuzz.sh [seconds=60]. Exits non-zero when the fuzzer finds a crash.
set -euo pipefail
seconds=${1:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
build="$root/build-fuzz"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSHARDIFY_FUZZ=ON -DSHARDIFY_WITH_ITK=OFF -DSHARDIFY_WITH_TORCH=OFF -DSHARDIFY_WITH_CUDA=OFF >/dev/null
cmake --build "$build" --target dataset_fuzz
corpus="$build/fuzz-corpus"
mkdir -p "$corpus"
SHARDIFY_FUZZ_SEED="$corpus/seed" "$build/bin/dataset_fuzz" -runs=0 "$corpus" >/dev/null 2>&1 || true
echo "fuzzing dataset open + read-all for ${seconds}s"
"$build/bin/dataset_fuzz" -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 "$corpus" 2>&1 | tail -n 15
