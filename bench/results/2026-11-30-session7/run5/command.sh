#!/usr/bin/env bash
# session 7, device call 5: kiln benchmarks (reduction, pointwise) and the reduction anchors in one call
mkdir -p $OUT/r
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="reduction" KILN_TIMEOUT_ANCHORS=400 KILN_DEADLINE_S=560 bash .device/gpu-run.sh $OUT/r
rc=$?
cp $OUT/r/run.log $OUT/run.log
rm -rf $OUT/r/kiln-kernels $OUT/r/kiln-kernels-reduction
tar -C $OUT -czf $OUT/r.tgz r && rm -rf $OUT/r
exit $rc
