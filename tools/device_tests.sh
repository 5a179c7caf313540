#!/usr/bin/env bash
# device_tests.sh - run the GPU test programs that tools/bundle_for_device.sh copied into build-dev/bin, in two parts
# that each fit the device tool's 10-minute limit per command (the whole set run at once did not: on 2026-11-27 five
# programs in parallel left the householder suite unfinished after 570 s). Run from the repository root on the GPU
# machine, one part per device call:
#
#   bash tools/device_tests.sh householder   # test_householder_qr_gpu alone (about 6-7 minutes on an H100)
#   bash tools/device_tests.sh rest          # precision (two halves) + tsqr + tall-skinny + panel kernel, in parallel
#
# Each program's output goes to $OUT/<name>.log (OUT defaults to ./out); the last lines of each and its exit status and
# duration are printed at the end. Extra doctest arguments for every program: DOCTEST_ARGS (word-split).
set -uo pipefail
part="${1:-}"
OUT="${OUT:-./out}"
BIN="${BIN:-build-dev/bin}"
LIMIT="${LIMIT:-570}"
mkdir -p "$OUT"
[[ -x "$BIN/test_householder_qr_gpu" ]] || { echo "device_tests.sh: no test programs in $BIN" >&2; exit 2; }
echo "commit $(cat "$BIN/../COMMIT" 2>/dev/null || echo '?'), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"

declare -a names=() pids=() starts=()
# start NAME PROGRAM [ARGS...]: runs it in the background under the time limit.
start() {
  local name="$1"
  shift
  # shellcheck disable=SC2086
  timeout "$LIMIT" "$@" ${DOCTEST_ARGS:-} > "$OUT/$name.log" 2>&1 &
  names+=("$name")
  pids+=("$!")
  starts+=("$(date +%s)")
}

case "$part" in
  householder)
    start householder "$BIN/test_householder_qr_gpu"
    ;;
  rest)
    start precision-cap "$BIN/test_precision_gpu" -tc="*merge cap*"
    start precision-rest "$BIN/test_precision_gpu" -tce="*merge cap*"
    start tsqr "$BIN/test_tsqr_gpu"
    start tall-skinny "$BIN/test_tall_skinny_qr_gpu"
    start panel-kernel "$BIN/test_panel_kernel_gpu"
    ;;
  *)
    echo "usage: tools/device_tests.sh householder|rest" >&2
    exit 2
    ;;
esac

failed=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"
  rc=$?
  [[ $rc -eq 0 ]] || failed=1
  echo "${names[$i]}: exit $rc ($(( $(date +%s) - starts[i] )) s or less; 124 = stopped by the ${LIMIT} s limit)"
done
for n in "${names[@]}"; do
  echo "== $n"
  tail -4 "$OUT/$n.log"
done
exit "$failed"
