#!/usr/bin/env bash
# session 7, device call 1: pointwise variants next to torch.compile (+ SASS of both),
# small-batch reductions through do_bench next to torch.compile/Triton, [gpu][reduction] tests
REPO=$PWD
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS
echo "commit $(cat $K/COMMIT)"
left() { echo $((560 - (SECONDS - S))); }
mkdir -p $OUT/kv $OUT/kr $OUT/sass
KILN_EXPORT_KERNELS=$OUT/kv timeout 90 ./bench_pointwise variants > $OUT/bench-variants.log 2>&1; echo "variants bench rc=$? $((SECONDS-S)) s"
grep -E "TB/s" $OUT/bench-variants.log | head -40
python3 $REPO/.device/add_variants.py $OUT/kv $REPO/.device/variants
(cd $K/anchors && TRITON_CACHE_DIR=$OUT/tc TORCH_LOGS=output_code KILN_KERNELS=$OUT/kv timeout 200 python3 anchors_pointwise.py variants) > $OUT/anchors-variants.log 2>&1; echo "anchors variants rc=$? $((SECONDS-S)) s"
grep -E "TB/s|max \|" $OUT/anchors-variants.log
for f in $OUT/kv/*.cubin; do cuobjdump --dump-sass $f > $OUT/sass/kiln_$(basename $f .cubin).sass 2>&1; done
find $OUT/tc -name '*.cubin' | while read f; do cuobjdump --dump-sass $f > $OUT/sass/triton_$(basename $f .cubin).sass 2>&1; done
find $OUT/tc -name '*.cubin' -delete
KILN_EXPORT_KERNELS=$OUT/kr timeout 60 ./bench_reduction "[1x4096" "[64x4096" "[512x4096" > $OUT/bench-small.log 2>&1; echo "bench small rc=$? $((SECONDS-S)) s"
grep -E "TB/s|us per call" $OUT/bench-small.log
(cd $K/anchors && KILN_KERNELS=$OUT/kr timeout 150 python3 anchors_reduction.py "[1x4096" "[64x4096" "[512x4096") > $OUT/anchors-small.log 2>&1; echo "anchors small rc=$? $((SECONDS-S)) s"
grep -v "back to back" $OUT/anchors-small.log | grep -E "us "
timeout $(left) ./kiln_tests "[gpu][reduction]" --reporter compact 2>&1 | tail -30 > $OUT/tests-reduction.log; echo "tests rc=${PIPESTATUS[0]} $((SECONDS-S)) s"; tail -4 $OUT/tests-reduction.log
echo "done $((SECONDS-S)) s"
