#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one run: builds the CUDA paths against the
# machine's PyTorch (its LibTorch), runs every CUDA test (tests/cuda and
# python/tests/test_cuda.py), compute-sanitizer's memcheck and racecheck on the staging
# tests, then the DataLoader-against-shards comparison (bench/gpu_compare.py).
#
#   source .devdeps/unpack.sh && scripts/gpu_check.sh OUT DATA
#
# (.devdeps: ../shared/device/fetch-debs.sh, run here first.)
# DATA holds fmnist/ (Fashion-MNIST's training images, `shardify <idx folder> --classes ...`),
# idx/ (their train-*-ubyte.gz files) and brain/ (ITK's example brain MRI and its
# segmentation as images/ and masks/, `shardify ... --patch-size 64x64x64`). OUT receives
# gpu-check.log and gpu-compare.json. convert/ is left out (no ITK needed).
# Each step has a time limit, and a failed step does not stop the later ones.
# Environment: BUILD (default build-gpu), JOBS (default nproc), BUDGET (seconds the whole
# script may take, default 570: the comparison gets what the steps before it left),
# COMPARE_ARGS (extra arguments of gpu_compare.py).
set -uo pipefail
out=$(realpath -m "$1")
data=$(realpath "$2")
build=${BUILD:-build-gpu}
jobs=${JOBS:-$(nproc)}
budget=${BUDGET:-570}
mkdir -p "$out"
exec > >(tee -a "$out/gpu-check.log") 2>&1
py=$(command -v python3)
# .devdeps/unpack.sh joins CMAKE_PREFIX_PATH with ';' (CMake's list separator); as an
# environment variable CMake splits it at ':'.
export CMAKE_PREFIX_PATH="${CMAKE_PREFIX_PATH//;/:}"
failed=()

step() {  # step NAME SECONDS COMMAND...: runs COMMAND under a time limit, records a failure
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  echo "== $name (limit ${limit} s)"
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - t0)) s"
  [ $rc -eq 0 ] || failed+=("$name")
  return $rc
}

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$py" -c 'import torch, torchvision; print("torch", torch.__version__, "cuda", torch.version.cuda,
"torchvision", torchvision.__version__, "device", torch.cuda.get_device_name())'
nvcc --version | tail -1
date -u +%FT%TZ

# pybind11: the headers PyTorch's wheel carries (made for its Python), not Debian's 2.10
# from .devdeps, which predates Python 3.12.
configure=(cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHARDIFY_WITH_ITK=OFF -DPython3_EXECUTABLE="$py"
           -DCMAKE_DISABLE_FIND_PACKAGE_pybind11=ON)
if ! step configure 120 "${configure[@]}"; then
  echo "LibTorch did not configure: building without the trainer"
  build=$build-notorch
  configure=(cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHARDIFY_WITH_ITK=OFF
             -DPython3_EXECUTABLE="$py" -DCMAKE_DISABLE_FIND_PACKAGE_pybind11=ON -DSHARDIFY_WITH_TORCH=OFF)
  step configure-without-torch 120 "${configure[@]}"
fi
targets=(cuda_tests shardify_python shardify_python_files)
[ -f "$build/CMakeCache.txt" ] && grep -q '^SHARDIFY_WITH_TORCH:BOOL=ON' "$build/CMakeCache.txt" && targets+=(shardtrain)
if ! step build 330 cmake --build "$build" -j "$jobs" --target "${targets[@]}" -- -k 0; then
  echo "The build failed (errors above): again without -Werror and NCCL, to run what builds"
  "${configure[@]}" -DSHARDIFY_WERROR=OFF -DSHARDIFY_WITH_NCCL=OFF >/dev/null
  step build-again 240 cmake --build "$build" -j "$jobs" --target "${targets[@]}" -- -k 0
fi

# One process per test case, so that a crash names its test and spares the others; a
# crashing one is run again under cuda-gdb for a backtrace.
while IFS= read -r name; do
  if ! step "cuda-test: $name" 120 "$build/bin/cuda_tests" --durations yes "$name"; then
    timeout 120 cuda-gdb -batch -ex run -ex bt -ex quit --args "$build/bin/cuda_tests" "$name" 2>&1 | tail -40
  fi
done < <("$build/bin/cuda_tests" --list-test-names-only | grep '^cuda: ')

step python-cuda-tests 180 env PYTHONPATH="$build/python" PYTHONDONTWRITEBYTECODE=1 \
  "$py" -m pytest -v -p no:cacheprovider python/tests/test_cuda.py

for tool in memcheck racecheck; do
  step "compute-sanitizer-$tool" 90 compute-sanitizer --tool "$tool" --error-exitcode 9 \
    "$build/bin/cuda_tests" "cuda: staged*,cuda: copies wait*"
done

left=$((budget - SECONDS))
step compare $((left > 60 ? left : 60)) env PYTHONUNBUFFERED=1 "$py" bench/gpu_compare.py --build "$build" --fmnist "$data/fmnist" \
  --fmnist-idx "$data/idx" --brain "$data/brain" --work /tmp/gpu-compare --out "$out/gpu-compare.json" \
  ${COMPARE_ARGS:-}

echo "== failed steps: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]
