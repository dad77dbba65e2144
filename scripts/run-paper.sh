#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to the paper scenario:
# installs what is missing, builds dptwin, simulates the paper's six strategies
# on HAL (1-64 V100s) and writes result.{txt,json,csv} and a timeline to out/paper/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[ -d build ] || meson setup build --buildtype=release
ninja -C build
mkdir -p out/paper
./build/apps/dptwin simulate scenarios/paper-hal.yaml --out out/paper --trace out/paper/trace-dps-4gpu.json --point 16
