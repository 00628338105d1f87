#!/usr/bin/env bash
# Session 13, device call 5: A = ac513be, B = ac513be + shared loads pinned at a held row's start (uncommitted).
# Small batches (1/64/512 x 4096 bf16): bench_reduction (flushed, back to back) and anchors_reduction.py
# (graph replay of kiln's exported cubin and torch.compile), A, B, A, B. The export folder was not made, so the anchors timed no kiln cubin (call 6 repeats it with the folder made).
for v in A B; do
  f=.device/kiln-bundle.tar.xz; [ $v = A ] && f=.device/kiln-bundle-old.tar.xz
  mkdir -p /tmp/k$v && xz -dc $f | tar -C /tmp/k$v -xf -
done
S=$SECONDS; L=$OUT/log.txt
echo "A $(cat /tmp/kA/kiln/COMMIT) B $(cat /tmp/kB/kiln/COMMIT | tr '\n' ' ')" | tee $L
for i in 1 2; do for v in A B; do
  K=/tmp/k$v/kiln; rm -rf /tmp/exp$v
  echo "== $v bench_reduction" | tee -a $L
  (cd $K/bin && LD_LIBRARY_PATH=$K/lib KILN_EXPORT_KERNELS=/tmp/exp$v timeout 40 ./bench_reduction "[1x4096" "[64x4096" "[512x4096" 2>&1) | grep -aE "kiln [0-9] kernel|back to back|error|FAIL" | sed 's/  */ /g' | tee -a $L
  echo "== $v anchors" | tee -a $L
  (cd $K/anchors && PYTHONUNBUFFERED=1 KILN_ANCHOR_BUDGET_S=40 KILN_KERNELS=/tmp/exp$v timeout 75 python3 anchors_reduction.py "[1x4096" "[64x4096" "[512x4096" 2>&1) | grep -aE "graph replay" | grep -E "kiln|torch.compile" | sed 's/  */ /g' | tee -a $L
  echo "t=$((SECONDS-S))" | tee -a $L
done; done
