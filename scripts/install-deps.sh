#!/usr/bin/env bash
# Installs the Debian 12 packages shardify needs (only the missing ones), as root or through
# sudo.
#   bash scripts/install-deps.sh            what the build, the tests and the tools need
#   bash scripts/install-deps.sh programs   only what building the programs and the demo
#                                           need (scripts/demo.sh): 19 packages in 37 s on
#                                           a bare Debian 12, against 50 in 96 s
set -euo pipefail
# The libraries and tools the programs build with, and the demo's dataset.
programs=(
  cmake ninja-build g++ pkg-config
  libzstd-dev libflatbuffers-dev flatbuffers-compiler libxxhash-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev
  libcli11-dev catch2 nlohmann-json3-dev libcurl4-openssl-dev
  libinsighttoolkit5-dev libtorch-dev libgloo-dev
  dataset-fashion-mnist
)
# Besides: the linters, sanitizer runtime and coverage; the servers the tests start; the
# Python package and its tests; real images; the browser of the viewer's tests.
tests=(
  clang clang-format-14 libclang-rt-14-dev gcovr
  curl lighttpd lighttpd-mod-openssl openssl ca-certificates python3-swift
  insighttoolkit5-examples python3-torch python3-torchvision
  python3-dev pybind11-dev python3-numpy python3-pil python3-pytest python3-nbclient python3-ipykernel
  python3-venv python3-pip python3-setuptools python3-wheel python3-scipy python3-skimage python3-pyflakes
  python3-h5py python3-pydicom python3-nibabel
  chromium chromium-driver python3-selenium
)
case "${1:-all}" in
  programs) packages=("${programs[@]}") ;;
  all) packages=("${programs[@]}" "${tests[@]}") ;;
  *)
    echo "scripts/install-deps.sh: takes 'programs' or nothing, got '$1'" >&2
    exit 2
    ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
