#!/usr/bin/env bash
# Checks what a review would otherwise catch by eye, in seconds: every C++ and CUDA source
# is formatted as .clang-format says (clang-format-14; `scripts/lint.sh --fix` rewrites them),
# no Catch2 test name holds a ';', which CTest would cut short so that the test never
# runs, no *_internal.h is included from another folder, every Python file passes pyflakes
# (unused imports and names, undefined names, f-strings without fields; Debian's
# python3-pyflakes), every relative link of the Markdown docs resolves
# (scripts/check_docs.py), and every code block of the pages carries its marker
# (tests/docs/run_blocks.py --check). Exits 1 naming each offender.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
format=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$format" ]; then
  echo "lint: clang-format not found (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # (Files deleted from the work tree but not yet from the index are left out.)
  mapfile -t sources < <(git ls-files '*.cpp' '*.h' '*.cu' ':!tests/data' | while IFS= read -r f; do
    [ -e "$f" ] && printf '%s\n' "$f"
  done)
  mapfile -t scripts < <(git ls-files --cached --others --exclude-standard '*.py' '*.pyi')
else
  mapfile -t sources < <(find . -path ./build -prune -o -path './build-*' -prune -o -path ./tests/data -prune -o \
    \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) -print | sed 's|^\./||' | sort)
  mapfile -t scripts < <(find . -path ./build -prune -o -path './build-*' -prune -o -path './.*' -prune -o \
    -path ./out -prune -o -path ./demo-out -prune -o \( -name '*.py' -o -name '*.pyi' \) -print | sed 's|^\./||' | sort)
fi
if [ "${1:-}" = "--fix" ]; then
  "$format" -i "${sources[@]}"
  echo "lint: formatted ${#sources[@]} files"
  exit 0
fi
status=0
unformatted=()
for f in "${sources[@]}"; do
  "$format" --dry-run --Werror "$f" >/dev/null 2>&1 || unformatted+=("$f")
done
if [ ${#unformatted[@]} -gt 0 ]; then
  echo "lint: not formatted as .clang-format says (run scripts/lint.sh --fix):" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  status=1
fi
if grep -n 'TEST_CASE("[^"]*;' "${sources[@]}" >&2; then
  echo "lint: a test name above holds ';', which CTest cuts short (the test would never run)" >&2
  status=1
fi
# A header named *_internal.h belongs to its folder: only that folder and its tests
# (tests/<folder>/) may include it.
crossing=()
for f in "${sources[@]}"; do
  own=${f%%/*}
  [ "$own" = tests ] && { rest=${f#tests/}; own=${rest%%/*}; }
  while IFS= read -r inc; do
    [ "${inc%%/*}" = "$own" ] || crossing+=("$f includes $inc")
  done < <(sed -n 's|^#include "\([^"]*_internal\.h\)".*|\1|p' "$f")
done
if [ ${#crossing[@]} -gt 0 ]; then
  echo "lint: an *_internal.h header is included from outside its folder:" >&2
  printf '  %s\n' "${crossing[@]}" >&2
  status=1
fi
# Every Python file (the package, its tests and examples, scripts/, bench/, tests/) passes pyflakes.
flakes=""
for py in /usr/bin/python3 python3; do
  if "$py" -c 'import pyflakes' >/dev/null 2>&1; then flakes=$py; break; fi
done
if [ -z "$flakes" ]; then
  echo "lint: pyflakes not found (scripts/install-deps.sh installs python3-pyflakes)" >&2
  status=1
elif ! "$flakes" -m pyflakes "${scripts[@]}" >&2; then
  echo "lint: pyflakes found the above in the Python files" >&2
  status=1
fi
# Every relative link of README.md and docs/ names an existing file and heading, and every
# code block of README.md and docs/*.md carries a marker saying how its test runs it.
python3 scripts/check_docs.py || status=1
python3 tests/docs/run_blocks.py --check || status=1
[ $status -eq 0 ] && echo "lint: ${#sources[@]} sources formatted, test names fine, internal headers stay home," \
  "${#scripts[@]} Python files clean, doc links resolve, doc blocks marked"
exit $status
