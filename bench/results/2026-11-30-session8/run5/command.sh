#!/usr/bin/env bash
# session 8, device call 5: every pointwise and reduction benchmark next to the anchors (eager, torch.compile, Triton, floor.cu), pointwise variants in rounds
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="pointwise reduction" KILN_VARIANTS=1 \
  KILN_DEADLINE_S=560 bash .device/gpu-run.sh $OUT/r
rm -rf $OUT/r/kiln-kernels $OUT/r/kiln-kernels-reduction $OUT/r/kiln-variants
tar -C $OUT -czf $OUT/r.tgz r && rm -rf $OUT/r
