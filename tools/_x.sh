#!/usr/bin/env bash
# temporary: the default-mode test verbose, qr_bench default rows, then the householder suite
B=build-dev/bin; C=$(cat build-dev/COMMIT)
TCQR_TEST_VERBOSE=1 $B/test_precision_gpu -tc="*Default runs FP16x3*" -s > $OUT/default-test.log 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/bench.log
$B/qr_bench --precision float,double --mode default --shapes 4096x4096,8192x8192,16384x16384,131072x2048,65536x1024,100000x600 --reps 5 --warmup 2 --e2e 8192x8192 --commit $C --csv $OUT/default.csv >> $OUT/bench.log 2>&1
OUT=$OUT LIMIT=420 bash tools/device_tests.sh householder > $OUT/householder.txt 2>&1
