#!/usr/bin/env bash
# The packages, tested as a user gets them (CI runs this; no GPU needed):
#   1. the CPU-only wheel (scripts/wheel.sh --cpu), installed into a fresh venv beside the project's
#      torch (scripts/wheel_venv.sh); the Python tests run against that installed package, not the
#      source tree, and its console script `flashcore` runs the bundled CLI;
#   2. a CPU-only build installed with `cmake --install`; each installed header compiles alone (no
#      CUTLASS or CUDA needed), examples/consumer is built against the install with
#      find_package(flashcore) and run; the installed CLI runs too.
# Everything goes under build/package-tests/. Prints each step's time.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
python="$root/.venv/bin/python"
work="$root/build/package-tests"
mkdir -p "$work"
unset FLASHCORE_LIBRARY  # the installed package must load its own library
t0=$(date +%s)

if ! "$python" -c 'import torch, pytest, scikit_build_core' 2>/dev/null; then
  echo "package_tests: installing torch 2.11.0, pytest and scikit-build-core into .venv"
  "$python" -m pip install -q --disable-pip-version-check torch==2.11.0 numpy==2.4.6 pytest==9.2.0 scikit-build-core==1.1.2
fi

echo "=== package_tests: the CPU-only wheel"
rm -rf "$work/dist"
OUT_DIR="$work/dist" JOBS="${JOBS:-2}" bash scripts/wheel.sh --cpu | grep -v '^ *\['
wheel=("$work"/dist/flashcore-*.whl)
bash scripts/wheel_venv.sh "$python" "$work/venv" "${wheel[0]}"
venv_python="$work/venv/bin/python"
# The package imported must be the installed one.
"$venv_python" -c 'import flashcore, sys; assert flashcore.__file__.startswith(sys.prefix), flashcore.__file__; print("package_tests: flashcore", flashcore.__version__, "from", flashcore.__file__, "kernel families", flashcore.kernel_families)'
"$venv_python" -m flashcore
"$work/venv/bin/flashcore" --version
"$work/venv/bin/flashcore" run --device cpu --batch 1 --seqlen 64 --heads 2 --head-dim 32 --check | tail -1
# From the repository root: python/flashcore is not on sys.path (pytest adds only python/tests).
"$venv_python" -m pytest -q -rs -p no:cacheprovider python/tests
t1=$(date +%s)

echo "=== package_tests: cmake --install of a CPU-only build, and examples/consumer against it"
cmake -S . -B "$work/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA=OFF -DFLASHCORE_BUILD_TESTS=OFF \
  -DFLASHCORE_BUILD_EXAMPLES=OFF -DCMAKE_INSTALL_PREFIX="$work/prefix" ${CUTLASS_DIR:+-DCUTLASS_DIR=$CUTLASS_DIR} >/dev/null
cmake --build "$work/cmake" -j"${JOBS:-2}"
rm -rf "$work/prefix"
cmake --install "$work/cmake" >/dev/null
ls "$work/prefix/lib/cmake/flashcore"
# Each installed header compiles on its own with nothing but the install's include/ (no CUTLASS,
# no CUDA); c_api.h as C too.
for header in "$work"/prefix/include/flashcore/*.h; do
  echo "#include <flashcore/$(basename "$header")>" | g++ -std=c++17 -fsyntax-only -Wall -Wextra -I"$work/prefix/include" -x c++ -
done
echo '#include <flashcore/c_api.h>' | gcc -std=c99 -fsyntax-only -I"$work/prefix/include" -x c -
echo "package_tests: every installed header is self-contained"
cmake -S examples/consumer -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer"
"$work/consumer/consumer"
"$work/prefix/bin/flashcore" --version
t2=$(date +%s)
echo "package_tests: passed; wheel + Python tests $(( t1 - t0 )) s, CMake package + consumer $(( t2 - t1 )) s"
