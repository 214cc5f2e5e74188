#!/usr/bin/env bash
# Builds the flashcore wheel: one file, py3-none-manylinux_2_NN_x86_64, that installs into any
# CPython >= 3.9 beside any PyTorch >= 2.4 (the package calls the library through its C ABI, so it
# never links PyTorch). Inside: libflashcore.so (the kernels and the CPU backends, with the CUDA
# runtime and libstdc++ linked in), libflashcore_c.so (the C ABI) and the `flashcore` CLI; it needs
# only glibc and, for GPUs, the NVIDIA driver. No torch at build time.
#
#   bash scripts/wheel.sh           CUDA wheel: the sm80 family as sm_80 + sm_90 machine code (A100,
#                                   RTX 30xx/40xx, L4, L40, H100 ...), the sm90 family as sm_90a (H100/H200)
#   bash scripts/wheel.sh --cpu     CPU-only wheel (what CI builds; about a minute)
#
# Environment:
#   FLASHCORE_PYTHON   interpreter whose pip builds it (default .venv/bin/python, set up by
#                      scripts/setup.sh); needs scikit-build-core, installed into it when missing
#   JOBS               parallel compile jobs (default: every core)
#   ARCHS              CMake CUDA architectures of the sm80 family (default "80-real;90-real"; add
#                      "90-virtual" for PTX that newer GPUs compile at load, at a much larger wheel)
#   OUT_DIR            where the wheel goes (default dist/, dist/cpu/ for --cpu: the two wheels have
#                      the same file name)
#   CUTLASS_DIR        CuTe/CUTLASS headers to use instead of the nvidia-cutlass wheel's
# The build directory is build/wheel-{cuda,cpu}; a second run recompiles only what changed.
# Prints the build time, the wheel's size and its tag (the newest glibc symbol the binaries use
# sets manylinux_2_NN: build on an older distribution, e.g. the manylinux_2_28 image, for a lower one).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

variant=cuda
[ "${1:-}" = "--cpu" ] && variant=cpu
python="${FLASHCORE_PYTHON:-$root/.venv/bin/python}"
[ -n "${FLASHCORE_PYTHON:-}" ] || bash scripts/setup.sh
if ! "$python" -c 'import scikit_build_core' 2>/dev/null; then
  "$python" -m pip install -q --disable-pip-version-check scikit-build-core==1.1.2
fi
out_dir="${OUT_DIR:-$root/dist}"
[ "$variant" = cpu ] && out_dir="${OUT_DIR:-$root/dist/cpu}"
build_dir="build/wheel-$variant"
export CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-$(nproc)}"

config=(-C "build-dir=../$build_dir")  # relative to python/
[ -n "${CUTLASS_DIR:-}" ] && config+=(-C "cmake.define.CUTLASS_DIR=$CUTLASS_DIR")
if [ "$variant" = cpu ]; then
  config+=(-C cmake.define.FLASHCORE_CUDA=OFF)
else
  command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "wheel: no nvcc: install the CUDA toolkit or use --cpu"; exit 1; }
  command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
  config+=(-C cmake.define.FLASHCORE_CUDA=ON -C "cmake.define.FLASHCORE_CUDA_ARCHS=${ARCHS:-80-real;90-real}"
           -C cmake.define.FLASHCORE_KERNEL_FAMILIES=sm80\;sm90)
fi

staging="$(mktemp -d)"
trap 'rm -rf "$staging"' EXIT
echo "wheel: building the $variant wheel in $build_dir with $CMAKE_BUILD_PARALLEL_LEVEL jobs ($(date -u +%T) UTC)"
start=$(date +%s)
# -v: CMake's and ninja's progress. No build isolation: the build requirements (scikit-build-core,
# nvidia-cutlass's headers) are already in this environment, so nothing is fetched.
# The whole log goes to build/wheel-$variant.log; the terminal gets the progress lines.
mkdir -p build
"$python" -m pip wheel -v --no-deps --no-build-isolation --disable-pip-version-check "${config[@]}" -w "$staging" ./python \
  2>&1 | tee "build/wheel-$variant.log" | grep --line-buffered -E '^ *\[[0-9]+/[0-9]+\]|flashcore:|error' || true
built=("$staging"/flashcore-*.whl)
[ -f "${built[0]}" ] || { echo "wheel: the build failed; the log is build/wheel-$variant.log"; exit 1; }
seconds=$(( $(date +%s) - start ))

mkdir -p "$out_dir"
wheel="$("$python" scripts/wheel_platform_tag.py "${built[0]}" "$out_dir")"
echo "wheel: $wheel"
echo "wheel: built in ${seconds} s ($(( seconds / 60 )) min $(( seconds % 60 )) s) with $CMAKE_BUILD_PARALLEL_LEVEL jobs on $(nproc) cores; $(du -m "$wheel" | cut -f1) MiB ($(stat -c %s "$wheel") bytes)"
# The compilers' CPU time (user, system), which a shared machine does not inflate: divided by the
# cores it is about the build's time on an idle machine.
times >"$staging/times"  # in this shell: a subshell would count none of its children
echo "wheel: CPU time of the build (user, system): $(tail -1 "$staging/times")"
