#!/usr/bin/env bash
# session 11, device call 7: cluster exchanges by st.async onto the peers' mbarriers: 262144 benchmarks, the cluster
# GPU test and the -inf / NaN / argmax-tie tests
R=$PWD
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
t() {
  (cd $K/bin && timeout $1 ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -c 300 $OUT/t.txt | tail -2 | tr '\n' ' ')" | tee -a $L; grep -aiE "failed|error" $OUT/t.txt | cut -c1-300 | head -10 | tee -a $L
}
(cd $K/bin && timeout 40 ./bench_reduction "rmsnorm [1024x262144" 2>&1) | grep -aE "TB/s|error|FAIL" | tee -a $L
rc=${PIPESTATUS[0]}; echo "first bench rc=$rc $((SECONDS-S)) s" | tee -a $L
if [ "$rc" != 124 ]; then
  (cd $K/bin && timeout 90 ./bench_reduction 262144 2>&1) | grep -aE "TB/s|error|FAIL" | tee -a $L
  t 230 "rows split across a thread-block cluster match the reference"
  t 40 "softmax of rows holding -inf stays finite*"
  t 40 "*propagate NaN like PyTorch*"
  t 40 "argmax and argmin return the first index among tied extremes"
fi
echo "done $((SECONDS-S)) s" | tee -a $L
