#!/usr/bin/env bash
# gpu_check.sh - build, test, run the examples and benchmark on the GPU machine (H100, sm_90). Run from the repo root:
#
#   tools/gpu_check.sh
#
# Phases (a failing phase is reported and recorded; later phases still run; the exit status is non-zero if any
# phase failed):
#   configure   cmake Release, -DCMAKE_CUDA_ARCHITECTURES=90 -DTCQR_ENABLE_CUDA=ON, in $BUILD_DIR  -> $OUT/build.log
#               (if it fails with tests on, configure-retry reconfigures without tests so the rest can run)
#   build       cmake --build with all cores (if it fails, build-retry builds the examples + qr_bench alone)
#                                                                                                  -> $OUT/build.log
#   tests       ctest --output-on-failure (all tests, GPU ones included)                           -> $OUT/ctest.log
#   examples    example_swap 8192 2048, example_least_squares                                      -> $OUT/examples.log
#   bench       qr_bench $BENCH_ARGS, CSV appended to $BENCH_CSV and copied to $OUT/h100.csv       -> $OUT/bench.log
#   tsqr        tsqr_bench $TSQR_ARGS (tall-skinny QR against cuSOLVER), CSV appended to $TSQR_CSV and copied to
#               $OUT/h100-tsqr.csv                                                                  -> $OUT/tsqr.log
#   accuracy    precision_accuracy $ACCURACY_ARGS (every precision mode, 4096 x 4096, issue 4's bounds)
#               -> $OUT/precision_accuracy.md, $OUT/precision_accuracy.csv                        -> $OUT/accuracy.log
#   summary     phase exit codes, ctest counts, the benchmark table                                -> $OUT/summary.txt
#
# Environment:
#   OUT           output folder (default ./out)
#   BUILD_DIR     build folder (default build-gpu)
#   SKIP_TESTS=1  do not build or run the tests
#   SKIP_BENCH=1  do not run the benchmark
#   SKIP_TSQR=1   do not run tsqr_bench
#   TSQR_ARGS     extra tsqr_bench arguments, word-split (e.g. "--shapes 8388608x32"); do not pass --csv, use TSQR_CSV
#   TSQR_CSV      CSV tsqr_bench appends to (default bench/results/h100-tsqr.csv)
#   SKIP_ACCURACY=1  do not run precision_accuracy
#   ACCURACY_ARGS extra precision_accuracy arguments, word-split (e.g. "--n 1024" or "--modes FP16,TF32")
#   BENCH_ARGS    extra qr_bench arguments, word-split (default: none = the full run), e.g. "--quick" or
#                 "--shapes 16384x16384 --precision float"; do not pass --csv here, use BENCH_CSV
#   BENCH_CSV     CSV the benchmark appends to (default bench/results/h100.csv)
#   TCQR_COMMIT   commit string recorded in the CSV (default: the git hash qr_bench was configured with)
#   CTEST_ARGS    extra ctest arguments, word-split (e.g. "-L gpu -j 4" or "--timeout 1200")
set -euo pipefail

OUT="${OUT:-./out}"
BUILD_DIR="${BUILD_DIR:-build-gpu}"
BENCH_CSV="${BENCH_CSV:-bench/results/h100.csv}"
SKIP_TESTS="${SKIP_TESTS:-0}"
SKIP_BENCH="${SKIP_BENCH:-0}"
SKIP_ACCURACY="${SKIP_ACCURACY:-0}"
SKIP_TSQR="${SKIP_TSQR:-0}"
TSQR_CSV="${TSQR_CSV:-bench/results/h100-tsqr.csv}"
JOBS="$(nproc 2>/dev/null || echo 4)"

if [[ ! -f CMakeLists.txt || ! -d include/tcqr ]]; then
  echo "gpu_check.sh: run this from the repository root" >&2
  exit 2
fi
mkdir -p "$OUT"

declare -a PHASES=()
declare -A RC=()

# run_phase NAME LOG CMD...: runs CMD with stdout+stderr appended to LOG (and shown), records its exit status.
run_phase() {
  local name="$1" log="$2"
  shift 2
  echo
  echo "=== [$name] $* ===" | tee -a "$log"
  local rc=0
  set +e
  "$@" 2>&1 | tee -a "$log"
  rc="${PIPESTATUS[0]}"
  set -e
  echo "=== [$name] exit code $rc ===" | tee -a "$log"
  PHASES+=("$name")
  RC["$name"]="$rc"
  return 0
}

skip_phase() {
  PHASES+=("$1")
  RC["$1"]="skipped"
  echo "=== [$1] skipped ($2) ==="
}

# ---- environment ------------------------------------------------------------------------------------------------
: >"$OUT/build.log"
{
  echo "### gpu_check.sh $(date -u '+%Y-%m-%dT%H:%M:%SZ')  host $(hostname)  jobs $JOBS"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 || true
  nvcc --version 2>&1 | tail -n 2 || true
  cmake --version 2>&1 | head -n 1 || true
  g++ --version 2>&1 | head -n 1 || true
  echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout')"
} 2>&1 | tee -a "$OUT/build.log"

# ---- configure + build ------------------------------------------------------------------------------------------
TESTS_FLAG=ON
if [[ "$SKIP_TESTS" == "1" ]]; then TESTS_FLAG=OFF; fi
run_phase configure "$OUT/build.log" \
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DTCQR_ENABLE_CUDA=ON \
  -DTCQR_BUILD_TESTS="$TESTS_FLAG" -DTCQR_BUILD_EXAMPLES=ON -DTCQR_BUILD_BENCH=ON

if [[ "${RC[configure]}" != "0" && "$TESTS_FLAG" == "ON" ]]; then
  # A broken tests/ tree must not keep the examples and the benchmark from being built: configure without tests.
  run_phase configure-retry "$OUT/build.log" \
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DTCQR_ENABLE_CUDA=ON \
    -DTCQR_BUILD_TESTS=OFF -DTCQR_BUILD_EXAMPLES=ON -DTCQR_BUILD_BENCH=ON
fi

run_phase build "$OUT/build.log" cmake --build "$BUILD_DIR" --parallel "$JOBS"
if [[ "${RC[build]}" != "0" ]]; then
  # A broken test must not keep the examples and the benchmark from being built: retry those targets alone.
  run_phase build-retry "$OUT/build.log" \
    cmake --build "$BUILD_DIR" --parallel "$JOBS" --target example_swap example_least_squares qr_bench \
    precision_accuracy tsqr_bench
fi

# ---- tests ------------------------------------------------------------------------------------------------------
: >"$OUT/ctest.log"
if [[ "$SKIP_TESTS" == "1" ]]; then
  skip_phase tests "SKIP_TESTS=1"
else
  read -r -a ctest_args <<<"${CTEST_ARGS:-}"
  run_phase tests "$OUT/ctest.log" ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error \
    ${ctest_args[@]+"${ctest_args[@]}"}
fi

# ---- examples ---------------------------------------------------------------------------------------------------
: >"$OUT/examples.log"
run_phase example_swap "$OUT/examples.log" "$BUILD_DIR/examples/example_swap" 8192 2048
run_phase example_least_squares "$OUT/examples.log" "$BUILD_DIR/examples/example_least_squares"

# ---- benchmark --------------------------------------------------------------------------------------------------
: >"$OUT/bench.log"
if [[ "$SKIP_BENCH" == "1" ]]; then
  skip_phase bench "SKIP_BENCH=1"
else
  read -r -a bench_args <<<"${BENCH_ARGS:-}"
  commit_args=()
  if [[ -n "${TCQR_COMMIT:-}" ]]; then commit_args=(--commit "$TCQR_COMMIT"); fi
  run_phase bench "$OUT/bench.log" "$BUILD_DIR/bench/qr_bench" --csv "$BENCH_CSV" \
    ${commit_args[@]+"${commit_args[@]}"} ${bench_args[@]+"${bench_args[@]}"}
  if [[ -f "$BENCH_CSV" ]]; then
    cp "$BENCH_CSV" "$OUT/h100.csv"
  else
    echo "gpu_check.sh: $BENCH_CSV was not written" | tee -a "$OUT/bench.log"
  fi
fi

# ---- tall-skinny benchmark ---------------------------------------------------------------------------------------
: >"$OUT/tsqr.log"
if [[ "$SKIP_TSQR" == "1" ]]; then
  skip_phase tsqr "SKIP_TSQR=1"
else
  read -r -a tsqr_args <<<"${TSQR_ARGS:-}"
  tsqr_commit_args=()
  if [[ -n "${TCQR_COMMIT:-}" ]]; then tsqr_commit_args=(--commit "$TCQR_COMMIT"); fi
  run_phase tsqr "$OUT/tsqr.log" "$BUILD_DIR/bench/tsqr_bench" --csv "$TSQR_CSV" \
    ${tsqr_commit_args[@]+"${tsqr_commit_args[@]}"} ${tsqr_args[@]+"${tsqr_args[@]}"}
  if [[ -f "$TSQR_CSV" ]]; then cp "$TSQR_CSV" "$OUT/h100-tsqr.csv"; fi
fi

# ---- accuracy of the precision modes ---------------------------------------------------------------------------
: >"$OUT/accuracy.log"
if [[ "$SKIP_ACCURACY" == "1" ]]; then
  skip_phase accuracy "SKIP_ACCURACY=1"
else
  read -r -a accuracy_args <<<"${ACCURACY_ARGS:-}"
  acc_commit_args=()
  if [[ -n "${TCQR_COMMIT:-}" ]]; then acc_commit_args=(--commit "$TCQR_COMMIT"); fi
  run_phase accuracy "$OUT/accuracy.log" "$BUILD_DIR/bench/precision_accuracy" \
    --md "$OUT/precision_accuracy.md" --csv "$OUT/precision_accuracy.csv" \
    ${acc_commit_args[@]+"${acc_commit_args[@]}"} ${accuracy_args[@]+"${accuracy_args[@]}"}
fi

# ---- summary ----------------------------------------------------------------------------------------------------
failed=0
for p in "${PHASES[@]}"; do
  if [[ "${RC[$p]}" != "0" && "${RC[$p]}" != "skipped" ]]; then failed=1; fi
done
{
  echo
  echo "################ gpu_check summary ################"
  for p in "${PHASES[@]}"; do
    rc="${RC[$p]}"
    status="ok"
    if [[ "$rc" == "skipped" ]]; then
      status="skipped"
    elif [[ "$rc" != "0" ]]; then
      status="FAILED (exit $rc)"
      # A failed full build that the targeted retry repaired is reported, but the retry's result counts.
      if [[ "$p" == "build" && "${RC[build-retry]:-1}" == "0" ]]; then
        status="FAILED (exit $rc; examples and qr_bench built by build-retry)"
      elif [[ "$p" == "configure" && "${RC[configure-retry]:-1}" == "0" ]]; then
        status="FAILED (exit $rc; configure-retry without tests succeeded)"
      fi
    fi
    printf '  %-22s %s\n' "$p" "$status"
  done
  if [[ "$SKIP_TESTS" != "1" ]]; then
    echo
    echo "ctest:"
    # e.g. "95% tests passed, 1 tests failed out of 20"
    grep -E 'tests passed(, [0-9]+ tests? failed)? out of [0-9]+' "$OUT/ctest.log" | tail -n 1 | sed 's/^/  /' ||
      echo "  (no ctest result line; see ctest.log)"
    sed -n '/The following tests FAILED:/,/^Errors while running CTest/p' "$OUT/ctest.log" | sed 's/^/  /' || true
  fi
  if [[ "$SKIP_BENCH" != "1" ]]; then
    echo
    echo "bench (${BENCH_ARGS:-full run}):"
    if grep -q '^=== qr_bench summary' "$OUT/bench.log"; then
      sed -n '/^=== qr_bench summary/,/^=== end of summary/p' "$OUT/bench.log"
      grep -E '^    note: ' "$OUT/bench.log" || true
    else
      echo "  (no table; last lines of bench.log:)"
      tail -n 20 "$OUT/bench.log" | sed 's/^/  /'
    fi
  fi
  if [[ "$SKIP_TSQR" != "1" ]]; then
    echo
    echo "tsqr (${TSQR_ARGS:-default shapes}):"
    grep -E '^(thinq|r_only) ' "$OUT/tsqr.log" | sed 's/^/  /' || tail -n 20 "$OUT/tsqr.log" | sed 's/^/  /'
  fi
  if [[ "$SKIP_ACCURACY" != "1" ]]; then
    echo
    echo "accuracy (${ACCURACY_ARGS:-n = 4096, all modes}):"
    if [[ -f "$OUT/precision_accuracy.md" ]]; then
      grep -E '^[|]' "$OUT/precision_accuracy.md" || true
    else
      echo "  (no table; last lines of accuracy.log:)"
      tail -n 20 "$OUT/accuracy.log" | sed 's/^/  /'
    fi
  fi
  echo
  if [[ "$failed" == "0" ]]; then echo "gpu_check: all phases passed"; else echo "gpu_check: SOME PHASES FAILED"; fi
} 2>&1 | tee "$OUT/summary.txt"

exit "$failed"
