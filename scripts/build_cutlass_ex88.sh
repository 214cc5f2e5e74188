#!/usr/bin/env bash
# Builds CUTLASS's Hopper FMHA example (example 88, the open peer the benchmark races as impl
# `cutlass_ex88`) from the sources that ship in the nvidia-cutlass wheel in .venv. Nothing of it
# is committed: the binary goes to the git-ignored .carry/ex88/88_hopper_fmha, beside a build log
# and a stamp, so it can be carried to the GPU machine (name ".carry/ex88" in the device tool's
# carry list) or built there.
#   bash scripts/build_cutlass_ex88.sh            build unless the stamp says it is up to date
#   bash scripts/build_cutlass_ex88.sh --force    rebuild
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc), EX88_OUT (default
# .carry/ex88), EX88_SRC (default: the wheel's source/ folder), EX88_NICE (default 19: the build is
# one heavy translation unit, ~5 min on 16 cores and 30-60 min on 2; it is a single nvcc process so
# it never takes more than one core besides its own --threads, which stays 1).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
force=0
[ "${1:-}" = "--force" ] && force=1
src="${EX88_SRC:-}"
if [ -z "$src" ]; then
  for d in .venv/lib/python3*/site-packages/cutlass_library/source; do
    [ -d "$d" ] && src="$d"
  done
fi
if [ -z "$src" ] || [ ! -f "$src/examples/88_hopper_fmha/88_hopper_fmha.cu" ]; then
  echo "build_cutlass_ex88: no CUTLASS sources (the nvidia-cutlass wheel's cutlass_library/source;" \
       "run scripts/setup.sh or set EX88_SRC)" >&2
  exit 1
fi
src="$(cd "$src" && pwd)"
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
out="${EX88_OUT:-$root/.carry/ex88}"
mkdir -p "$out"
bin="$out/88_hopper_fmha"
cutlass_version="$("${PYTHON:-$root/.venv/bin/python}" -c 'import importlib.metadata as m; print(m.version("nvidia-cutlass"))' 2>/dev/null || echo unknown)"
nvcc_version="$("$nvcc" --version | tail -1)"
flags=(-std=c++17 -O3 -DNDEBUG --use_fast_math
       -gencode arch=compute_90a,code=sm_90a
       --expt-relaxed-constexpr
       -I"$src/include" -I"$src/tools/util/include" -I"$src/examples/common"
       -I"$src/examples/88_hopper_fmha")
stamp_text="cutlass=$cutlass_version nvcc=$nvcc_version flags=${flags[*]//$src/<src>}"
if [ "$force" = 0 ] && [ -x "$bin" ] && [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp_text" ]; then
  echo "build_cutlass_ex88: $bin is up to date ($(du -h "$bin" | cut -f1)); --force rebuilds"
  exit 0
fi
echo "build_cutlass_ex88: building $bin (nice ${EX88_NICE:-19}; log $out/build.log)"
start=$(date +%s)
rm -f "$out/stamp" "$bin.tmp"
set +e
nice -n "${EX88_NICE:-19}" "$nvcc" "${flags[@]}" \
  "$src/examples/88_hopper_fmha/88_hopper_fmha.cu" -o "$bin.tmp" >"$out/build.log" 2>&1
rc=$?
set -e
secs=$(( $(date +%s) - start ))
if [ "$rc" -ne 0 ]; then
  echo "build_cutlass_ex88: nvcc failed (exit $rc) after ${secs}s; the last lines of $out/build.log:" >&2
  tail -n 30 "$out/build.log" >&2
  exit "$rc"
fi
mv "$bin.tmp" "$bin"
echo "$stamp_text" >"$out/stamp"
echo "build_seconds=$secs cores=$(nproc) host=$(hostname)" >"$out/build_info"
echo "build_cutlass_ex88: built $bin in ${secs}s ($(du -h "$bin" | cut -f1))"
