#!/usr/bin/env bash
# Same-run A/B timing of a kernel change on a GPU machine: builds the CLI from this tree and from a
# base tree (a copy of the repository at the commit to compare against), trimmed to a few
# instantiations, then times every shape with both binaries in alternation and prints the median
# TFLOP/s of each and their ratio. Run-to-run drift on the lent H100 is up to ~5%, so only pairs
# from one run mean anything (docs/tuning/backward.md).
#
#   git archive HEAD | tar -x -C .carry/ab_base     # here: the base tree, carried to the device
#   bash scripts/ab.sh .carry/ab_base               # there
#
# The libflashcore_c.so of this tree is left at build/ab-new/src/c_api/ for the benchmark.
#
# Environment:
#   AB_PASS       bwd (default), fwd, or both (backward runs; forward and backward compared from
#                 the same passes)
#   AB_HEAD_DIMS  instantiations to build, default "64;128"; AB_DTYPES default "bf16"
#   AB_SHAPES     "d:seqlen:causal ..." (causal 0/1), default d64 and d128 at 4k, 8k, 16k, both masks;
#                 batch x seqlen = 16k tokens and heads x d = 2048, as the benchmark's sweep
#   AB_ROUNDS     alternations per shape (default 3), each the CLI's own warm-up + 20 repeats; the
#                 default grid took ~7 minutes on the H100 (most of it the CLI's host-side set-up
#                 at 16k tokens), so trim AB_SHAPES or AB_ROUNDS to fit a call
#   AB_CARRY      .carry (CuTe headers) location, default .carry
#   AB_PREBUILT   set: build nothing; build/ab-new and build/ab-base already hold the two CLIs
#                 (built on a CPU machine and carried, so the device's time goes to timing)
#   AB_ARGS       extra CLI flags for every run of both sides (e.g. "--kernels sm80 --softcap 30")
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
base="${1:?usage: scripts/ab.sh BASE_TREE}"
base="$(cd "$base" && pwd)"
pass="${AB_PASS:-bwd}"
head_dims="${AB_HEAD_DIMS:-64;128}"
dtypes="${AB_DTYPES:-bf16}"
rounds="${AB_ROUNDS:-3}"
carry="$(cd "${AB_CARRY:-.carry}" && pwd)"
shapes="${AB_SHAPES:-64:4096:0 64:8192:0 64:16384:0 64:4096:1 64:16384:1 128:4096:0 128:8192:0 128:16384:0 128:4096:1 128:16384:1}"
out="${OUT:-$root/build/device-out}"
mkdir -p "$root/build" "$out"

build() {  # build <source tree> <build dir>
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA=ON -DFLASHCORE_CUDA_ARCHS=90-real \
    "-DFLASHCORE_HEAD_DIMS=$head_dims" "-DFLASHCORE_DTYPES=$dtypes" -DFLASHCORE_BUILD_TESTS=OFF -DFLASHCORE_BUILD_EXAMPLES=OFF \
    "-DCUTLASS_DIR=$carry/cutlass_include" >"$2.configure.log" 2>&1 &&
    cmake --build "$2" --target flashcore_cli flashcore_c -j"$(nproc)" >"$2.build.log" 2>&1
}
start=$(date +%s)
if [ -z "${AB_PREBUILT:-}" ]; then
  build "$root" "$root/build/ab-new" & new_pid=$!
  build "$base" "$root/build/ab-base" & base_pid=$!
  wait $new_pid || { echo "ab: build of this tree failed"; tail -n 30 "$root/build/ab-new.build.log" "$root/build/ab-new.configure.log"; exit 1; }
  wait $base_pid || { echo "ab: build of the base tree failed"; tail -n 30 "$root/build/ab-base.build.log"; exit 1; }
  echo "ab: both builds in $(( $(date +%s) - start )) s"
fi

backward_flag=""
[ "$pass" != "fwd" ] && backward_flag="--backward"
log="$out/ab_${pass}.jsonl"
: >"$log"
for shape in $shapes; do
  IFS=: read -r d s causal <<<"$shape"
  args=(run --device cuda --dtype "${dtypes%%;*}" --head-dim "$d" --seqlen "$s" --batch $((16384 / s))
        --heads $((2048 / d)) --warmup 5 --repeats 20 --json $backward_flag)
  [ "$causal" = 1 ] && args+=(--causal)
  # shellcheck disable=SC2206
  [ -n "${AB_ARGS:-}" ] && args+=(${AB_ARGS})
  for r in $(seq "$rounds"); do
    for side in base new; do
      line=$("$root/build/ab-$side/tools/flashcore" "${args[@]}") || { echo "ab: $side failed on $shape"; exit 1; }
      echo "{\"side\": \"$side\", \"round\": $r, \"shape\": \"$shape\", \"run\": $line}" >>"$log"
    done
  done
done

python3 - "$log" "$pass" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def tflops(run, pass_):
    # From the JSON's `flops` and times, which every commit's CLI prints (a base tree may predate
    # any per-pass TFLOP/s key): flops is the whole pass's, forward + backward = 3.5 x forward.
    fwd = run["flops"] / (3.5 if run["backward"] else 1.0)
    if pass_ == "bwd":
        return 2.5 * fwd / (run["ms_backward"] * 1e-3) / 1e12
    return fwd / (run["ms_forward"] * 1e-3) / 1e12
for pass_ in (("fwd", "bwd") if sys.argv[2] == "both" else (sys.argv[2],)):
    print(f"ab: {pass_} TFLOP/s, median over rounds of base (the tree given) and new (this tree)")
    print(f"{'d':>4} {'seqlen':>7} {'causal':>6} {'base':>8} {'new':>8} {'new/base':>9}")
    for shape in dict.fromkeys(r["shape"] for r in rows):
        med = {side: statistics.median(tflops(r["run"], pass_) for r in rows if r["shape"] == shape and r["side"] == side)
               for side in ("base", "new")}
        d, s, c = shape.split(":")
        print(f"{d:>4} {s:>7} {'yes' if c == '1' else 'no':>6} {med['base']:8.1f} {med['new']:8.1f} {med['new'] / med['base']:9.3f}")
EOF
