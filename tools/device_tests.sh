#!/usr/bin/env bash
# device_tests.sh - run the GPU test programs that tools/bundle_for_device.sh copied into build-dev/bin, in parts that
# each should fit the device tool's 10-minute limit per command. Run from the repository root on the GPU machine:
#
#   bash tools/device_tests.sh householder         # test_householder_qr_gpu alone
#   bash tools/device_tests.sh householder1        # its test cases 1-20 (doctest --first/--last), if it is too slow
#   bash tools/device_tests.sh householder2        # its test cases from 21 on
#   bash tools/device_tests.sh precision           # test_precision_gpu alone
#   bash tools/device_tests.sh rest                # tsqr + tall-skinny + panel kernel + T products + graph replay +
#                                                  # small products, then
#                                                  # the panel kernel again with TCQR_PANEL_EXCHANGE=barrier
#   bash tools/device_tests.sh precision rest      # several parts, one after the other: each has its own LIMIT, so
#                                                  # lower LIMIT to fit them all into one device call
#
# The suites spend most of their time in host-side reference computations in double (building conditioned matrices,
# Eigen's QR, Q R and Q^T Q), not on the GPU. Measured on the H100 machine (16 cores) at df13d17 with a build without
# AVX2: test_householder_qr_gpu alone did not finish in 560 s; the precision suite's lanes<float> case took 174 s alone
# and was stopped at 130 s beside lanes<double>; with six programs at once the precision suite stopped after 540 s
# in its third case. Hence one program per part for the two big suites, and programs sharing a part split the cores
# (OMP_NUM_THREADS) and do not spin-wait (OMP_WAIT_POLICY=passive). Build with -DCMAKE_CXX_FLAGS="-mavx2 -mfma"
# (tools/bundle_for_device.sh says how): Eigen's double products then run 2.2-2.8x faster than with the default SSE2
# code (bench/results/logs/2026-11-27-cpu-avx2-checks.log).
#
# Each program's output goes to $OUT/<name>.log (OUT defaults to ./out), with every test case's duration
# (--duration=true); the exit status, time and doctest summary of each are printed at the end. Where a program failed,
# its failing assertions (with context) also go to $OUT/<name>.failures, and their first 40 lines to stdout. Extra
# doctest arguments for every program: DOCTEST_ARGS (split at blanks, not globbed: write a blank inside a test name as
# ? or *). LIMIT (default 570 s) stops a program that runs longer (SIGTERM, then SIGKILL 15 s later).
# PACK=1: at the end, pack every log and failures file into $OUT/device-tests.tgz and remove them, since the device
# tool brings back at most 8 files from $OUT (the parts "householder rest precision" write 17 or more; on 2026-11-29
# nine did not come back).
set -uo pipefail
OUT="${OUT:-./out}"
BIN="${BIN:-build-dev/bin}"
LIMIT="${LIMIT:-570}"
CORES="$(nproc 2>/dev/null || echo 16)"
mkdir -p "$OUT"
[[ $# -gt 0 ]] || { echo "usage: tools/device_tests.sh householder|householder1|householder2|precision|rest [...]" >&2; exit 2; }
for part in "$@"; do
  case "$part" in
    householder | householder1 | householder2 | precision | rest) ;;
    *) echo "device_tests.sh: unknown part '$part' (householder[12], precision, rest)" >&2; exit 2 ;;
  esac
done
# The programs each part runs; all of them must be in $BIN (a bundle trimmed to fit the device tool's carry limit may
# hold only some).
programs_of() {
  case "$1" in
    householder | householder1 | householder2) echo test_householder_qr_gpu ;;
    precision) echo test_precision_gpu ;;
    rest) echo test_tsqr_gpu test_tall_skinny_qr_gpu test_panel_kernel_gpu test_t_products_gpu test_graph_replay_gpu test_small_products_gpu ;;
  esac
}
for part in "$@"; do
  for prog in $(programs_of "$part"); do
    [[ -x "$BIN/$prog" ]] || { echo "device_tests.sh: part '$part' needs $BIN/$prog, which is missing" >&2; exit 2; }
  done
done
echo "commit $(cat "$BIN/../COMMIT" 2>/dev/null || echo '?'), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $CORES cores"
# A build with -mavx2 -mfma (bundle_for_device.sh) needs both on this CPU.
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo ||
  echo "device_tests.sh: warning: this CPU lacks AVX2 or FMA; binaries built with -mavx2 -mfma will fail" >&2
read -ra extra_args <<< "${DOCTEST_ARGS:-}"
export OMP_WAIT_POLICY=passive

failed=0
# run_part NAME:PROGRAM[:DOCTEST ARGUMENTS] ...: starts the programs at once, each with CORES / count threads, and
# waits for them all. The arguments are word-split.
run_part() {
  local -a names=() pids=() starts=()
  local threads=$(( CORES / $# ))
  (( threads >= 1 )) || threads=1
  local spec name prog filter
  local -a args
  for spec in "$@"; do
    IFS=: read -r name prog filter <<< "$spec"
    read -ra args <<< "$filter"
    OMP_NUM_THREADS=$threads timeout -k 15 "$LIMIT" "$BIN/$prog" --duration=true "${args[@]}" "${extra_args[@]}" \
      > "$OUT/$name.log" 2>&1 &
    names+=("$name")
    pids+=("$!")
    starts+=("$(date +%s)")
  done
  local i rc
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    rc=$?
    [[ $rc -eq 0 ]] || failed=1
    echo "${names[$i]}: exit $rc after $(( $(date +%s) - starts[i] )) s or less, $threads threads (124 = stopped by the ${LIMIT} s limit)"
  done
  for name in "${names[@]}"; do
    echo "== $name"
    grep -E '^\[doctest\] (test cases|assertions)|CRASHED' "$OUT/$name.log"
    # The failures on their own, small enough to come back when the whole log does not (the device tool leaves out
    # files over its size limit: the precision suite's log is), and their first lines here.
    if grep -qE 'ERROR|CRASHED' "$OUT/$name.log"; then
      grep -E -B4 -A8 'ERROR|CRASHED' "$OUT/$name.log" | head -c 200000 > "$OUT/$name.failures"
      echo "-- failures of $name (all in $OUT/$name.failures):"
      head -n 40 "$OUT/$name.failures"
    fi
  done
}

for part in "$@"; do
  case "$part" in
    householder) run_part householder:test_householder_qr_gpu ;;
    householder1) run_part "householder1:test_householder_qr_gpu:--first=1 --last=20" ;;
    householder2) run_part "householder2:test_householder_qr_gpu:--first=21" ;;
    precision) run_part precision:test_precision_gpu ;;
    rest)
      run_part tsqr:test_tsqr_gpu tall-skinny:test_tall_skinny_qr_gpu panel-kernel:test_panel_kernel_gpu \
               t-products:test_t_products_gpu graph-replay:test_graph_replay_gpu small-products:test_small_products_gpu
      # The panel kernel's other exchange (read once per process; ctest's panel_kernel_barrier_gpu).
      export TCQR_PANEL_EXCHANGE=barrier
      run_part panel-kernel-barrier:test_panel_kernel_gpu
      unset TCQR_PANEL_EXCHANGE ;;
  esac
done
if [[ "${PACK:-0}" == 1 ]]; then
  (cd "$OUT" && shopt -s nullglob && files=(*.log *.failures) && tar czf device-tests.tgz "${files[@]}" && rm -f "${files[@]}")
  echo "logs packed into $OUT/device-tests.tgz"
fi
exit "$failed"
