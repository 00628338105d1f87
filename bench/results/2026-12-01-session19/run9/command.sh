#!/usr/bin/env bash
# Session 19 call 9: resource reports from nvJitLink's summary alone count
# the stack as spills: log_softmax 1024x262144's rebuild chain on this
# machine (as on the development machine), the GPU tests of clusters and
# composites, the 262144 rows.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
KILN_DUMP=cubin-log KILN_CACHE=0 "$K/bin/kiln" compile .device/lsm.graph --json > $R/lsm.json 2> $R/lsm-compile.err; echo "compile rc=$?"
python3 -c "import json; k=json.load(open('$R/lsm.json'))['kernels'][0]; print(k['config'], k['entries'])"
for t in "rows split across a thread-block cluster match the reference" "few long rows split across clusters by the heuristic match the reference" \
         "the op library's row-wise composites match the reference at every row length" "every reduction op along the last axis matches the reference at every row length"; do
  ( cd $R && timeout 150 "$K/bin/kiln_tests" "$t" > "tests-${t:0:12}.log" 2>&1; echo "$t rc=$?"; tail -n 2 "tests-${t:0:12}.log" ) &
done
wait
timeout 60 "$K/bin/bench_reduction" "softmax(-1) [1024x262144" "rmsnorm [1024x262144" "layernorm [1024x262144" 2>&1 | tee "$R/rows262144.log" | grep -i "kiln .*kernel\|error\|FAIL"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
