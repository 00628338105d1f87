KILN_STAGES="bench anchors" KILN_BENCHES="pointwise" KILN_ANCHORS="pointwise" KILN_DEADLINE_S=300 bash .device/gpu-run.sh $OUT  # bundle of d032f02
