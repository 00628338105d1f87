KILN_STAGES="tests bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="reduction" KILN_DEADLINE_S=580 bash .device/gpu-run.sh $OUT  # device tool, carry [".device"], bundle of d032f02
