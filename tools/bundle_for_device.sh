#!/usr/bin/env bash
# bundle_for_device.sh - copy the executables of a local sm_90 build into build-dev/bin, so that a device run can
# carry them (the device tool's carry: ["build-dev"]; every program together is about 65 MB, over the tool's 64 MiB, so name
# the programs a run needs) instead of spending 2-3 minutes of device time
# configuring and building there. Run from the repository root after building, e.g.:
#
#   cmake -S . -B build-sm90 -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DTCQR_ENABLE_CUDA=ON \
#         -DTCQR_BUILD_TESTS=ON -DTCQR_BUILD_EXAMPLES=ON -DTCQR_BUILD_BENCH=ON -DCMAKE_CXX_FLAGS="-mavx2 -mfma" \
#     && cmake --build build-sm90 -j
#   tools/bundle_for_device.sh build-sm90                                  # every program
#   tools/bundle_for_device.sh build-sm90 qr_bench test_precision_gpu       # only these
#
# -mavx2 -mfma (every C++ file alike: Eigen's vector width sets its heap alignment and allocator, so files built with
# different widths must not share matrices; docs/DESIGN.md "Testing on the GPU machine"): the GPU tests spend most
# of their time in Eigen's double-precision reference computations on the host, which run 2.2-2.8x faster with AVX2
# and FMA than with the default SSE2 (a 2300 x 2200 QR with its Q, Q R, Q^T Q on this machine, 2 threads;
# bench/results/logs/2026-11-27-cpu-avx2-checks.log). tools/device_tests.sh checks that the device's CPU has both. This
# script warns when the build lacks them.
#
# The executables link cuBLAS/cuSOLVER/cudart dynamically (the device's own libraries are used) and need glibc 2.34
# or later (Ubuntu 24.04 has 2.39). build-dev/COMMIT records the commit (and "-dirty") they were built from; pass
# it to the benchmarks' --commit. It is HEAD at bundle time: a program older than the code's last commit or edit gets a
# warning and "-stale" in COMMIT.
set -euo pipefail
src="${1:-build-sm90}"
[[ -f "$src/CMakeCache.txt" ]] || { echo "bundle_for_device.sh: $src is not a build folder" >&2; exit 2; }
grep -Eq 'CMAKE_CUDA_ARCHITECTURES:[A-Z]+=90$' "$src/CMakeCache.txt" || { echo "bundle_for_device.sh: $src is not an sm_90 build" >&2; exit 2; }
flags="$(grep -E '^CMAKE_CXX_FLAGS:STRING=' "$src/CMakeCache.txt" || true)"
[[ "$flags" == *-mavx2* && "$flags" == *-mfma* ]] ||
  echo "bundle_for_device.sh: warning: $src was not built with -mavx2 -mfma; its GPU tests' host checks run slower" >&2
shift || true
# Programs named after the build folder: only those (the device tool carries at most 64 MiB, and every program of a
# full bundle together came to 65 MB on 2026-11-27); none named: every GPU test, benchmark and example.
rm -rf build-dev && mkdir -p build-dev/bin
for f in "$src"/tests/test_*_gpu "$src"/bench/* "$src"/examples/example_*; do
  [[ -f "$f" && -x "$f" ]] || continue
  if [[ $# -gt 0 ]]; then
    keep=0
    for want in "$@"; do [[ "$(basename "$f")" == "$want" ]] && keep=1; done
    [[ $keep -eq 1 ]] || continue
  fi
  cp -p "$f" build-dev/bin/  # (-p: the build time, checked below)
done
for want in "$@"; do
  [[ -x "build-dev/bin/$want" ]] || { echo "bundle_for_device.sh: no program $want in $src" >&2; exit 2; }
done
# COMMIT names HEAD at bundle time (with -dirty for uncommitted edits of the code), which is what the programs were
# built from only if they were built after the last edit of the code: say so when one is older (rebuild). The code's
# files' modification times are what counts (a commit made after the build, of the files the build read, does not
# make the programs stale; until 2026-11-28 the commit's time was used, which flagged exactly that case).
code=(include src kernels tests bench examples CMakeLists.txt ':(exclude)bench/results')
commit="$(git rev-parse --short HEAD)"
git diff --quiet HEAD -- "${code[@]}" || commit="$commit-dirty"
code_time="$(git ls-files -z -- "${code[@]}" | xargs -0 -r stat -c %Y 2>/dev/null | sort -n | tail -1)"
for f in build-dev/bin/*; do
  if [[ "$(stat -c %Y "$f")" -lt "$code_time" ]]; then
    echo "bundle_for_device.sh: warning: $(basename "$f") is older than the last change of the code; COMMIT ($commit)" \
         "may not be what it was built from: rebuild, then bundle" >&2
    commit="$commit-stale"
    break
  fi
done
echo "$commit" > build-dev/COMMIT
du -sh build-dev
size_kb="$(du -sk build-dev | cut -f1)"
(( size_kb <= 60000 )) ||
  echo "bundle_for_device.sh: warning: build-dev is $((size_kb / 1024)) MiB; the device tool carries at most 64 MiB in all: name the programs you need" >&2
ls build-dev/bin
