#!/usr/bin/env bash
# Installs the Debian 12 packages shardify builds, tests and demos with (only the missing
# ones). Runs apt-get as root, or through sudo.
set -euo pipefail
packages=(
  cmake ninja-build g++ clang clang-format-14 libclang-rt-14-dev pkg-config
  libzstd-dev libflatbuffers-dev flatbuffers-compiler libxxhash-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev
  libcli11-dev catch2 nlohmann-json3-dev libcurl4-openssl-dev lighttpd lighttpd-mod-openssl openssl ca-certificates
  python3-swift
  libinsighttoolkit5-dev insighttoolkit5-examples
  libtorch-dev libgloo-dev python3-torch python3-torchvision
  python3-dev pybind11-dev python3-numpy python3-pil python3-pytest python3-nbclient python3-ipykernel
  python3-venv python3-pip python3-setuptools python3-wheel python3-scipy python3-skimage python3-pyflakes
  gcovr
  python3-h5py python3-pydicom python3-nibabel
  chromium chromium-driver python3-selenium
  dataset-fashion-mnist
)
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
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
