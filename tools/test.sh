#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs missing packages, checks
# formatting (tools/lint.sh), builds, runs every Catch2 test under CTest in a Release build
# and again under ASan+UBSan, then fuzzes shard opening for a bounded time.
# Environment: JOBS (default: all cores), FUZZ_SECONDS (default 60).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${JOBS:-$(nproc)}
bash tools/install-deps.sh

echo "== Lint (clang-format, test names)"
bash tools/lint.sh

echo "== Release build and tests"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHARDIFY_WITH_ITK=ON -DSHARDIFY_WITH_TORCH=ON \
  -DSHARDIFY_SANITIZE=OFF >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build -j "$jobs" --output-on-failure

echo "== ASan+UBSan build and tests"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHARDIFY_WITH_ITK=ON -DSHARDIFY_WITH_TORCH=ON \
  -DSHARDIFY_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$jobs"
# Full stacks for every allocation, so that a leak is attributed to the library it comes
# from; tests/lsan.supp names the only library whose leaks are not ours (ITK). An
# allocation too large for any machine fails as it does without ASan (null, bad_alloc)
# instead of aborting, so the tests of out-of-memory errors run here too.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0:allocator_may_return_null=1 \
  LSAN_OPTIONS=suppressions="$root/tests/lsan.supp" UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -j "$jobs" --output-on-failure

echo "== Fuzzing"
bash tests/fuzz/run_fuzz.sh "${FUZZ_SECONDS:-60}"
echo "all tests passed"
