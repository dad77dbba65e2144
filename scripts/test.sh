#!/usr/bin/env bash
# One command to build dptwin and pass its whole test suite (what CI runs).
# Installs missing Debian packages first, so it works on a fresh Debian 12 machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[ -d build ] || meson setup build --buildtype=release
ninja -C build
meson test -C build --print-errorlogs --num-processes 2
