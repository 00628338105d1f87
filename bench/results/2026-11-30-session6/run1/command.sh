#!/usr/bin/env bash
# session 6, device call 1: tf32 + every matmul GPU test, cluster bench, pointwise do_bench anchors
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
ROOT=$PWD
( cd $K/bin
  echo "== tests [matmul]"; timeout 240 ./kiln_tests "[gpu][matmul]" --reporter compact 2>&1 | tail -25 > $OUT/tests-matmul.log; echo rc=$? ; tail -3 $OUT/tests-matmul.log
  echo "== bench gemm bf16 default vs cluster_m 2"
  KILN_MATMUL_CONFIGS='{"cluster_m": 2}' timeout 150 ./bench_matmul "gemm bf16" 2>&1 | grep -v '^{' > $OUT/gemm-cluster.log; cat $OUT/gemm-cluster.log
) 2>&1 | tee $OUT/run1.log
KILN_STAGES="bench anchors" KILN_BENCHES="pointwise" KILN_ANCHORS="pointwise" KILN_DEADLINE_S=260 bash .device/gpu-run.sh $OUT/pw > /dev/null 2>&1
tail -40 $OUT/pw/run.log
