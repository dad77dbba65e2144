#!/usr/bin/env bash
# Installs the Debian 12 packages dptwin needs, only those that are missing.
# Needs root (or sudo). Safe to run again: does nothing when all are present.
set -euo pipefail

PACKAGES=(
  build-essential meson ninja-build pkg-config python3
  libyaml-cpp-dev libfmt-dev libboost-graph-dev doctest-dev nlohmann-json3-dev libcli11-dev
  libopenmpi-dev openmpi-bin chromium
  libtorch-dev libgloo-dev libopenblas0-pthread python3-torch iproute2
  clang-14 libclang-rt-14-dev llvm-14
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
