#!/usr/bin/env bash
# session 12, device call 4: max_blocks (blocks per SM capped by padded shared memory) at 32768x4096, 2c5bb65 (B)
# against the heuristic, A (be8e29c) for the softmax f32 reference
R=$PWD
for v in A B; do
  f=.device/kiln-bundle.tar.xz; [ $v = A ] && f=.device/kiln-bundle-old.tar.xz
  mkdir -p /tmp/k$v && xz -dc $f | tar -C /tmp/k$v -xf -
done
S=$SECONDS; L=$OUT/log.txt
echo "A $(cat /tmp/kA/kiln/COMMIT) B $(cat /tmp/kB/kiln/COMMIT)" | tee $L
bench() {  # variant, config, cases...
  echo "== $1 '$2'" | tee -a $L
  (cd /tmp/k$1/kiln/bin && LD_LIBRARY_PATH=/tmp/k$1/kiln/lib KILN_ROW_CONFIG="$2" timeout 60 ./bench_reduction "${@:3}" 2>&1) | grep -aE "kiln [0-9] kernel|error|FAIL" | sed 's/  */ /g' | tee -a $L
}
(cd /tmp/kB/kiln/bin && LD_LIBRARY_PATH=/tmp/kB/kiln/lib timeout 40 ./bench_reduction "softmax(-1) [32768x4096 float32]" 2>&1) | grep -aE "TB/s|error|FAIL" | tee -a $L
rc=${PIPESTATUS[0]}; echo "first bench rc=$rc $((SECONDS-S)) s" | tee -a $L
[ "$rc" = 124 ] && exit 1
C="[32768x4096"
bench A "" "softmax(-1) $C float32"
for i in 1 2; do
  bench B "" "$C"
  for m in 4 5 6; do bench B "{\"max_blocks\": $m}" "$C"; done
done
bench A "" "softmax(-1) $C float32"
echo "done $((SECONDS-S)) s" | tee -a $L
