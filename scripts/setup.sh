#!/usr/bin/env bash
# Installs what a build needs on a fresh Debian/Ubuntu machine, idempotently:
#   Debian packages: g++, cmake, ninja-build, libgtest-dev, python3-venv (only the missing ones)
#   .venv/ (project-local): nvidia-cutlass 4.2.0.0, whose wheel ships CuTe's and CUTLASS's headers.
# The CUDA toolkit is optional: without nvcc the library builds CPU-only.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

missing=()
command -v g++ >/dev/null || missing+=(g++)
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if ! ls .venv/lib/python*/site-packages/cutlass_library/source/include/cute/tensor.hpp >/dev/null 2>&1; then
  echo "setup: installing nvidia-cutlass 4.2.0.0 (CuTe headers) into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps nvidia-cutlass==4.2.0.0
fi
