#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs them for a bounded time in all: dataset
# open + read-all for most of it, then the S3 listing parser and the object-name checks
# for a sixth each (at least a second each).
# Usage: tests/fuzz/run_fuzz.sh [seconds=60]. Exits non-zero when a fuzzer finds a crash.
set -euo pipefail
seconds=${1:-60}
share=$((seconds / 6 > 0 ? seconds / 6 : 1))
root=$(cd "$(dirname "$0")/../.." && pwd)
build="$root/build-fuzz"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSHARDIFY_FUZZ=ON -DSHARDIFY_WITH_ITK=OFF -DSHARDIFY_WITH_TORCH=OFF -DSHARDIFY_WITH_CUDA=OFF >/dev/null
cmake --build "$build" --target dataset_fuzz s3_listing_fuzz object_name_fuzz

# run TARGET SECONDS WHAT: fuzzes TARGET from its corpus folder for SECONDS (at least 1).
run() {
  local corpus="$build/fuzz-corpus/$1" time=$(($2 > 0 ? $2 : 1))
  echo "fuzzing $3 for ${time}s"
  "$build/bin/$1" -max_total_time="$time" -max_len=65536 -print_final_stats=1 "$corpus" 2>&1 | tail -n 15
}

mkdir -p "$build/fuzz-corpus/dataset_fuzz" "$build/fuzz-corpus/s3_listing_fuzz" "$build/fuzz-corpus/object_name_fuzz"
SHARDIFY_FUZZ_SEED="$build/fuzz-corpus/dataset_fuzz/seed" "$build/bin/dataset_fuzz" -runs=0 \
  "$build/fuzz-corpus/dataset_fuzz" >/dev/null 2>&1 || true
printf '%s' '<?xml version="1.0"?><ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>p/parts/00001-of-00002/shard-00000.sfs</Key></Contents><Contents><Key>p/a&amp;b&#47;..&#x2F;c</Key></Contents><NextContinuationToken>t</NextContinuationToken></ListBucketResult>' \
  >"$build/fuzz-corpus/s3_listing_fuzz/seed"
printf '%s' 'parts/00001-of-00002/../shard 0?#%.sfs' >"$build/fuzz-corpus/object_name_fuzz/seed"
run dataset_fuzz $((seconds - 2 * share)) "dataset open + read-all"
run s3_listing_fuzz "$share" "the S3 listing parser"
run object_name_fuzz "$share" "object names into paths, URLs and messages"
