#!/usr/bin/env bash
# Fills .carry/ (git-ignored) with what the GPU device machine lacks and cannot download: CuTe's
# headers (from .venv's nvidia-cutlass) and GoogleTest's sources (from Debian's libgtest-dev).
# Name ".carry" in the device tool's `carry` list; scripts/device.sh picks them up.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh >/dev/null
mkdir -p .carry
if [ ! -f .carry/cutlass_include/cute/tensor.hpp ]; then
  cp -r .venv/lib/python3*/site-packages/cutlass_library/source/include .carry/cutlass_include
fi
if [ ! -f .carry/googletest/CMakeLists.txt ]; then
  cp -r /usr/src/googletest .carry/googletest
fi
du -sh .carry
