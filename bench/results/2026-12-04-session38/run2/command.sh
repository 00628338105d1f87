#!/usr/bin/env bash
# Session 38 call 2 (the bundle of the commit it prints): after call 1, the
# norm gradients with column partials (dweight, dbias summed per part of the
# rows by the dx kernel): the gradients' [gpu] tests (kiln_tests "[grad]", every case in
# its own process), then bench_backward next to anchors_backward.py (eager
# autograd and torch.compile's backward) in the same call.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
$K/bin/kiln_tests "[grad]" --list-test-names-only | sed -e 's/^ *//' -e '/^$/d' > $R/grad-names.txt
i=0
while IFS= read -r name; do
  i=$((i + 1))
  ( timeout 240 $K/bin/kiln_tests "$name" --reporter compact > $R/grad-$i.log 2>&1; echo "$? $name" > $R/grad-$i.rc ) &
done < $R/grad-names.txt
wait
cat $R/grad-*.rc; for f in $R/grad-*.rc; do read -r rc n < $f; [ "$rc" = 0 ] || tail -30 "${f%.rc}.log"; done
echo "== tests done $SECONDS s"
OUT=$R timeout 200 $K/bin/bench_backward > $R/bench-backward.log 2>&1; echo "bench rc=$?"; grep -v '^JSON' $R/bench-backward.log
(cd $K/anchors && OUT=$R timeout 250 python3 anchors_backward.py) > $R/anchors-backward.log 2>&1; echo "anchors rc=$?"; grep -v Warning $R/anchors-backward.log
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
