#!/usr/bin/env bash
# temporary: FP32 vs FP16x3 on in-between shapes, and the rest suites
B=build-dev/bin; C=$(cat build-dev/COMMIT)
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/bench.log
date >> $OUT/bench.log
$B/qr_bench --precision float --mode FP32,FP16x3,TF32x3 --shapes 1024x1024,2048x2048,3000x3000,4096x4096,8192x8192,65536x768,262144x1024,32768x1024,100000x600,20000x5000 --reps 5 --warmup 2 --e2e 4096x4096 --commit $C --no-csv >> $OUT/bench.log 2>&1
date >> $OUT/bench.log
OUT=$OUT LIMIT=200 bash tools/device_tests.sh rest > $OUT/rest.txt 2>&1
