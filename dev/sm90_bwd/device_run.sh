#!/bin/bash
# One device call of the sm90 backward's dev harness, its steps given as arguments (replaces the
# per-run scripts device_run2..9.sh, device_ab.sh and run_device.sh of sessions 6-9; git history
# at 8d7f859 has them). Usage, from the carried tree (the harness libraries built on the host by
# build.sh into dev/sm90_bwd/ of that tree):
#   bash dev/sm90_bwd/device_run.sh STEP [KEY=VALUE ...] [STEP [KEY=VALUE ...] ...]
# KEY=VALUEs after a step are that step's environment (check.py / san.py / bench*.py read theirs;
# T= is the step's timeout in seconds). Steps, run in the order given:
#   libbuild   the library in the background (preset sm90-sm90a; HEAD_DIMS="128;256", DTYPES=bf16,
#              FAMILIES (default: every family; "sm90" builds that one alone),
#              TARGETS="flashcore_c flashcore_gpu_tests"), so the harness steps run beside it
#   quick      check.py --quick (hang guard: the call ends if it times out)
#   (check, san and bench take CHECK_SCRIPT / SAN_SCRIPT / BENCH_SCRIPT: another script of this
#   folder in check.py's / san.py's / bench.py's place, e.g. the score-option kernels' check_options.py
#   (SAN=1: its sanitizer cases) and bench_options.py)
#   check      check.py, the full case list (CHECK_DIMS, CHECK_FP16, CHECK_SPLITS, CHECK_LPT, DET_REPEATS,
#              POISON_WS, VARIANT, FC_LIB); a failure ends the call before anything is timed;
#              BG=1 runs it in the background (the next timing step waits for it); SOFT=1 with
#              VARIANT=v: a failure only drops variant v from the timing steps
#   san        compute-sanitizer memcheck, racecheck and synccheck on san.py (SAN_DIMS, VARIANT,
#              TOOLS), in the background; the next timing step waits for them
#   bench      bench.py (BENCH_D, BENCH_GQA, VARIANTS, DET_VARIANTS, BENCH_SPLITS, FC_LIB)
#   ab         bench_ab.py (FC_LIB, AB_SECTIONS, AB_VARIANTS)
#   ncu        Nsight Compute (--set full, clocks left alone) on bench_ab.py's once section (AB_ONCE):
#              the first NCU_COUNT (3) launches of kernels matching NCU_KERNEL (bwd_swapkv); the
#              report (ncu.ncu-rep, when under 15 MB) and its raw metrics (ncu_raw.csv) come back
#   gputests   waits for libbuild; the library's GPU tests with FLASHCORE_KERNELS=sm90 (FILTER)
#   libbench   waits for libbuild; scripts/bench.sh with ARGS
# Results: $OUT/summary.txt (one line a step), logs.tgz (every step's log), bench rows (jsonl).
# Examples: session 9's run 6 = `check CHECK_DIMS=64,128 DET_REPEATS=10 CHECK_SPLITS=2,4 san
# SAN_DIMS=64,128 ab ab FC_LIB=libfc_base.so AB_SECTIONS=det,prof`; session 10's run 10 in
# docs/tuning/backward_sm90.md.
cd "$(dirname "$0")"
harness=$PWD
root=$(cd ../.. && pwd)
out=${OUT:-/tmp/out}
logs=${LOGS:-/tmp/sm90bwd_logs}
mkdir -p "$out" "$logs"
S="$out/summary.txt"
export PYTHONUNBUFFERED=1 OUT=$logs LOGS_DIR=$logs
say() { echo "$*" | tee -a "$S"; }
pack() { tar czf "$out/logs.tgz" -C "$logs" . 2>/dev/null; }
san_pids=()
build_pid=
wait_san() {
  wait_checks
  [ ${#san_pids[@]} = 0 ] && return
  wait "${san_pids[@]}"
  for f in "$logs"/san_*.log; do
    say "$(basename "$f" .log): done=$(tail -c 3000 "$f" | grep -c 'san.py done') \
$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tr '\n' ' ')"
  done
  cat "$logs"/san_*.log | grep -E 'Invalid|Error|Hazard|Race' | grep -v SUMMARY | head -10 | cut -c1-300 | tee -a "$S"
  san_pids=()
}
check_pids=() check_logs=() bad_variants=""
# AB_VARIANTS / VARIANTS without the variants whose SOFT=1 check failed.
good_variants() { local v out=""; for v in ${1//,/ }; do [[ " $bad_variants " == *" $v "* ]] || out+="${out:+,}$v"; done; echo "$out"; }
report_check() {  # TAG ARGS RC
  say "$1 ($2): rc=$3 $(tail -1 "$logs/$1.log")"
  grep -E '^FAIL|Error' "$logs/$1.log" | head -6 | cut -c1-400 | tee -a "$S"
}
wait_checks() {  # background checks: a failure ends the call before anything is timed
  [ ${#check_pids[@]} = 0 ] && return
  wait "${check_pids[@]}"
  local failed=0 entry tag args
  for entry in "${check_logs[@]}"; do
    tag=${entry%%:*} args=${entry#*:}
    report_check "$tag" "$args" "$(cat "$logs/$tag.log.rc")"
    [ "$(cat "$logs/$tag.log.rc")" = 0 ] && continue
    if [[ " $args " == *" SOFT=1 "* && " $args " =~ \ VARIANT=([0-9]+)\  ]]; then
      bad_variants+=" ${BASH_REMATCH[1]}"  # a dev variant that failed: left out of the timing steps
      say "variant ${BASH_REMATCH[1]} failed its check: not timed"
    else
      failed=1
    fi
  done
  check_pids=() check_logs=()
  [ $failed = 1 ] && { say "check failed: stopping before any timing"; wait_san; pack; exit 1; }
}
wait_build() {
  [ -z "$build_pid" ] && return
  wait "$build_pid"
  say "libbuild: rc=$(cat "$logs/build.rc" 2>/dev/null), $(( $(date +%s) - build_t0 )) s"
  grep -E "error|FAILED" "$logs/build.log" | head -20 | tee -a "$S"
  build_pid=
}
n=0
run_step() {  # NAME KEY=VALUE...
  local name=$1; shift
  n=$((n + 1))
  local tag="$n.$name" t=120 s0=$(date +%s) rc
  for kv in "$@"; do [ "${kv%%=*}" = T ] && t=${kv#T=}; done
  local log="$logs/$tag.log"
  case $name in
    libbuild)
      build_t0=$s0
      (
        cd "$root" || exit 1
        [ -e .carry ] || ln -s ../.carry .carry
        env "$@" bash -c 'cmake --preset sm90-sm90a -DCUTLASS_DIR=$PWD/.carry/cutlass_include \
          -DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.carry/googletest -DFLASHCORE_BUILD_EXAMPLES=OFF \
          "-DFLASHCORE_HEAD_DIMS=${HEAD_DIMS:-128;256}" "-DFLASHCORE_DTYPES=${DTYPES:-bf16}" \
          ${FAMILIES:+"-DFLASHCORE_KERNEL_FAMILIES=$FAMILIES"} >$LOGS_DIR/configure.log 2>&1 &&
          nice -n 5 cmake --build build/sm90-sm90a -j15 --target ${TARGETS:-flashcore_c flashcore_gpu_tests} \
          >$LOGS_DIR/build.log 2>&1'
        echo $? >"$logs/build.rc"
      ) &
      build_pid=$!
      say "$tag: started $*"
      return ;;
    quick)
      env "$@" timeout "$t" python3 check.py --quick >"$log" 2>&1; rc=$?
      say "$tag ($*): rc=$rc $(tail -1 "$log")"
      [ $rc = 124 ] && { say "HANG in the quick check: stopping"; pack; exit 1; } ;;
    check)
      if [[ " $* " == *" BG=1 "* ]]; then  # beside the next steps; the next timing step waits for it
        (env CHECK_NAME="$tag.checks.jsonl" "$@" timeout "$t" bash -c 'python3 ${CHECK_SCRIPT:-check.py}' >"$log" 2>&1; echo $? >"$log.rc") &
        check_pids+=($!) check_logs+=("$tag:$*")
        say "$tag: started ($*)"
        return
      fi
      env CHECK_NAME="$tag.checks.jsonl" "$@" timeout "$t" bash -c 'python3 ${CHECK_SCRIPT:-check.py}' >"$log" 2>&1; rc=$?
      report_check "$tag" "$*" "$rc"
      if [ $rc != 0 ]; then
        if [[ " $* " == *" SOFT=1 "* && " $* " =~ \ VARIANT=([0-9]+)\  ]]; then
          bad_variants+=" ${BASH_REMATCH[1]}"; say "variant ${BASH_REMATCH[1]} failed its check: not timed"
        else
          say "check failed: stopping before any timing"; wait_san; pack; exit 1
        fi
      fi ;;
    san)
      local tools
      tools=$(env "$@" bash -c 'echo ${TOOLS:-memcheck racecheck synccheck}')
      for tool in $tools; do
        env "$@" timeout "$t" bash -c "compute-sanitizer --tool $tool --error-exitcode 3 python3 \${SAN_SCRIPT:-san.py}" \
          >"$logs/san_${n}_$tool.log" 2>&1 &
        san_pids+=($!)
      done
      say "$tag: started $tools ($*)"
      return ;;
    bench)
      wait_san
      env "$@" VARIANTS="$(good_variants "$(env "$@" bash -c 'echo $VARIANTS')")" timeout "$t" \
        bash -c 'python3 ${BENCH_SCRIPT:-bench.py}' >"$log" 2>&1; rc=$?
      say "$tag ($*): rc=$rc"; grep -v '^{' "$log" | tee -a "$S" ;;
    ab)
      wait_san
      env "$@" AB_VARIANTS="$(good_variants "$(env "$@" bash -c 'echo $AB_VARIANTS')")" timeout "$t" python3 bench_ab.py >"$log" 2>&1; rc=$?
      say "$tag ($*): rc=$rc rows=$(grep -c '^{' "$log")"; grep -vE '^\{' "$log" | head -10 | tee -a "$S" ;;
    ncu)
      wait_san
      env "$@" AB_SECTIONS=once timeout "$t" bash -c 'ncu --set full --clock-control none -k "regex:${NCU_KERNEL:-bwd_swapkv}" \
        -c "${NCU_COUNT:-3}" -f -o "$LOGS_DIR/ncu" python3 bench_ab.py' >"$log" 2>&1; rc=$?
      say "$tag ($*): rc=$rc $(grep -c '^==PROF== Profiling' "$log") kernels profiled"
      grep -E '^==(ERROR|WARNING)==' "$log" | head -5 | tee -a "$S"
      if [ -f "$logs/ncu.ncu-rep" ]; then
        ncu -i "$logs/ncu.ncu-rep" --page raw --csv >"$out/ncu_raw.csv" 2>&1
        ncu -i "$logs/ncu.ncu-rep" --page details >"$logs/ncu_details.txt" 2>&1
        [ "$(stat -c %s "$logs/ncu.ncu-rep")" -lt 15000000 ] && cp "$logs/ncu.ncu-rep" "$out/"
        mv "$logs/ncu.ncu-rep" /tmp/ 2>/dev/null
      fi ;;
    gputests)
      wait_build
      (cd "$root" && timeout "$t" env FLASHCORE_KERNELS=sm90 "$@" bash -c \
        'build/sm90-sm90a/tests/gpu/flashcore_gpu_tests --gtest_filter="${FILTER:-*CudaBackward*}"') >"$log" 2>&1; rc=$?
      say "$tag ($*): rc=$rc $(grep -E '^\[  (PASSED|FAILED) ' "$log" | tr '\n' ' ')"
      grep -E '^\[  FAILED|Failure' "$log" | head -20 | tee -a "$S" ;;
    libbench)
      wait_build; wait_san
      (cd "$root" && env FLASHCORE_LIBRARY="$root/build/sm90-sm90a/src/c_api/libflashcore_c.so" "$@" \
        timeout "$t" bash -c 'bash scripts/bench.sh --hopper --out-dir $LOGS_DIR/bench --flat $ARGS') >"$log" 2>&1; rc=$?
      say "$tag ($*): rc=$rc"; grep -A30 "^summary over all" "$log" | head -30 | tee -a "$S"
      cp "$logs/bench/"*.json "$out/" 2>/dev/null ;;
    *) say "unknown step $name"; rc=2 ;;
  esac
  say "   ($tag: $(( $(date +%s) - s0 )) s)"
  pack
}

say "=== $(date +%T) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader)"
step= args=()
for a in "$@" END; do
  if [[ $a =~ ^[A-Z_][A-Z0-9_]*= ]]; then args+=("$a"); continue; fi
  [ -n "$step" ] && run_step "$step" "${args[@]}"
  step=$a args=()
  [ "$a" = END ] && break
done
wait_san
wait_build
cat "$logs"/bench_rows.jsonl "$logs"/ab.jsonl > "$out/bench_rows.jsonl" 2>/dev/null
cat "$logs"/*.check*.jsonl > "$out/checks.jsonl" 2>/dev/null
pack
say "=== done $(date +%T)"
