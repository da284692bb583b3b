#!/usr/bin/env bash
# The test suite, from a fresh Debian 12 machine: the quick one for people (lint, Release
# build, every test in it) or, with --full, the one CI runs (adds ASan+UBSan and fuzzing).
# usage() below says what each runs.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/test.sh [--full]

  (none)   install missing packages, lint, build Release (build/), run every test in it
  --full   all of the above, then build under ASan+UBSan (build-asan/) and run every
           test there but the documentation's (label docs), counting line coverage and printing it
           per folder (below COVERAGE_FLOOR percent, default 90, fails), then fuzz shard opening,
           the S3 listing parser and object names for FUZZ_SECONDS in all (default 60); CI runs this
  --help   print this and exit

Environment: JOBS (parallel jobs; default: all cores), FUZZ_SECONDS, COVERAGE (0: do not count line
coverage), COVERAGE_FLOOR.
To run a part of the Release tests: ctest --test-dir build -L unit (docs/extending.md, "Tests").
EOF
}

full=0
case $# in
  0) ;;
  1)
    case $1 in
      --full) full=1 ;;
      -h | --help)
        usage
        exit 0
        ;;
      *)
        echo "scripts/test.sh: unknown argument '$1'" >&2
        usage >&2
        exit 2
        ;;
    esac
    ;;
  *)
    echo "scripts/test.sh: takes at most one argument, got $#" >&2
    usage >&2
    exit 2
    ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${JOBS:-$(nproc)}
bash scripts/install-deps.sh

echo "== Lint (clang-format, test names, pyflakes, doc links)"
bash scripts/lint.sh

echo "== Release build and tests"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHARDIFY_WITH_ITK=ON -DSHARDIFY_WITH_TORCH=ON \
  -DSHARDIFY_SANITIZE=OFF >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build -j "$jobs" --output-on-failure

if [ "$full" = 0 ]; then
  echo "all Release tests passed (scripts/test.sh --full adds ASan+UBSan and fuzzing)"
  exit 0
fi

coverage=${COVERAGE:-1}
echo "== ASan+UBSan build and tests$([ "$coverage" = 1 ] && echo ", counting line coverage")"
# -O1 -g1: the sanitizers' checks and stacks with file and line, in about 60 percent of the
# compile time of -O2 -g (this build is the longest part of the run).
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DSHARDIFY_WITH_ITK=ON -DSHARDIFY_WITH_TORCH=ON -DSHARDIFY_SANITIZE=ON \
  -DSHARDIFY_COVERAGE="$([ "$coverage" = 1 ] && echo ON || echo OFF)" >/dev/null
cmake --build build-asan -j "$jobs"
find build-asan -name '*.gcda' -delete  # this run's counts only
# Full stacks for every allocation, so that a leak is attributed to the library it comes
# from; tests/lsan.supp names the only library whose leaks are not ours (ITK). An
# allocation too large for any machine fails as it does without ASan (null, bad_alloc)
# instead of aborting, so the tests of out-of-memory errors run here too. The tests of the
# documentation (label docs: the pages' blocks, the command-line reference) ran in the
# Release build; their commands are run by the other tests here.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0:allocator_may_return_null=1 \
  LSAN_OPTIONS=suppressions="$root/tests/lsan.supp" UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -j "$jobs" --output-on-failure -LE docs
# The product code's line coverage over those tests, per folder; below the floor fails.
if [ "$coverage" = 1 ]; then
  python3 scripts/coverage.py build-asan --jobs "$jobs" --floor "${COVERAGE_FLOOR:-90}"
fi

echo "== Fuzzing"
bash tests/fuzz/run_fuzz.sh "${FUZZ_SECONDS:-60}"
echo "all tests passed"
