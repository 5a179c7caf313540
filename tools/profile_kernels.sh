#!/usr/bin/env bash
# profile_kernels.sh - Nsight Compute profile of one kernel of a benchmark run, with its SASS-level instruction mix and
# stall reasons summarised (tools/sass_summary.py). Run on the GPU machine from the repository root, after a build:
#
#   tools/profile_kernels.sh 'tsqrTileQRKernel<float, \(int\)8>' build-gpu/bench/tsqr_bench --shapes f8388608x32 \
#       --reps 1 --warmup 0 --no-errors
#
# The first argument is a regex over the demangled kernel name (template arguments print as "(int)8", hence the
# escaped parentheses); the rest is the command to profile. The first matching launch is profiled with --set full and
# the clocks left alone (--clock-control none, as the device notes ask). Output in $OUT (default ./out):
#   <tag>.details.txt   ncu --page details (speed of light, occupancy, warp state, instruction statistics)
#   <tag>.sass.csv      ncu --page source --print-source sass (per-instruction counts and stall samples)
#   <tag>.summary.txt   instruction mix and stall reasons (tools/sass_summary.py)
# where <tag> is the kernel regex with non-alphanumerics dropped. Used on 2026-11-26 for the TSQR tile kernels.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
OUT="${OUT:-./out}"
mkdir -p "$OUT"
kernel="$1"
shift
tag="$(echo "$kernel" | tr -cd '[:alnum:]' | cut -c1-40)"
ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$kernel" --launch-count 1 --set full \
  --import-source no -o "$OUT/$tag" "$@" >"$OUT/$tag.run.log" 2>&1
ncu -i "$OUT/$tag.ncu-rep" --page details >"$OUT/$tag.details.txt" 2>&1
ncu -i "$OUT/$tag.ncu-rep" --page source --csv --print-source sass >"$OUT/$tag.sass.csv" 2>&1
rm -f "$OUT/$tag.ncu-rep"
python3 "$(dirname "$0")/sass_summary.py" "$OUT/$tag.sass.csv" | tee "$OUT/$tag.summary.txt"
grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued|Achieved Occupancy|Registers Per" "$OUT/$tag.details.txt" || true
