#!/usr/bin/env bash
# session 7, device call 6: every [gpu] test and the lessons
mkdir -p $OUT/r
KILN_STAGES="tests" KILN_DEADLINE_S=500 bash .device/gpu-run.sh $OUT/r
rc=$?
cp $OUT/r/run.log $OUT/run.log
tar -C $OUT -czf $OUT/r.tgz r && rm -rf $OUT/r
exit $rc
