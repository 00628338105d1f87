# Tables of kiln against the anchors from one gpu-run.sh output folder
# (kiln_{pointwise,reduction}.jsonl, anchors_{pointwise,reduction}.json):
#   python3 bench/tables.py OUTDIR   (markdown, as in docs/benchmarks.md)
import json, sys
d = sys.argv[1]
def kiln(path):
    out = {}
    for line in open(path):
        j = json.loads(line)
        if j.get('impl') == 'kiln' and 'median_us' in j and j.get('flushed', True) and 'graph' not in j.get('op',''):
            out.setdefault(j['op'], j)
    return out
import os
for kind in ['pointwise', 'reduction']:
    if not (os.path.exists(f'{d}/kiln_{kind}.jsonl') and os.path.exists(f'{d}/anchors_{kind}.json')):
        continue
    k = kiln(f'{d}/kiln_{kind}.jsonl')
    a = json.load(open(f'{d}/anchors_{kind}.json'))
    rows = {}
    for e in a:
        if kind == 'reduction' and (not e.get('flushed', True) or e.get('kernel_time')): continue
        r = rows.setdefault(e['op'], {})
        imp = e['impl']
        r[imp] = max(r.get(imp, 0), e['TBps'])
    cols = ['eager', 'torch.compile', 'triton']
    print(f'\n{kind}\n| case | kiln µs | kiln TB/s | kiln (do_bench) | eager | torch.compile | Triton | kiln / best other |')
    print('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    for op, j in k.items():
        r = rows.get(op, {})
        best = max([r[c] for c in cols if c in r] or [0])
        f = lambda c: f"{r[c]:.3f}" if c in r else ''
        # A case no anchor measures (dynamic lengths, rows of 8192-16384):
        # no ratio, flagged only under 4.0 TB/s.
        ratio = j['TBps'] / best if best else None
        flag = '' if j['TBps'] >= 4.0 and (ratio is None or ratio >= 1) else ' ←'
        shown = f'{ratio:.3f}' if ratio is not None else '—'
        print(f"| {op} | {j['median_us']:.1f} | {j['TBps']:.3f} | {f('kiln (do_bench)')} | {f('eager')} | {f('torch.compile')} | {f('triton')} | {shown}{flag} |")

# Small batches (anchors_reduction.py's small cases), us per call: CUDA graph
# replay (not flushed), do_bench (flushed; CUDA events, ~0.5 us steps) and
# the kernels' own time after the same flush (profiler stamps).
try:
    a = json.load(open(f'{d}/anchors_reduction.json'))
except OSError:
    a = []
small = {}
for e in a:
    if e.get('graph') or e.get('kernel_time'):
        col = ('graph ' if e.get('graph') else 'kernel ') + e['impl']
        small.setdefault(e['op'], {})[col] = e['median_us']
for e in a:
    if e['op'] in small and e.get('flushed', True) and not e.get('kernel_time'):
        imp = 'kiln' if e['impl'] == 'kiln (do_bench)' else e['impl']
        small[e['op']]['do_bench ' + imp] = e['median_us']
if small:
    impls = ['kiln', 'torch.compile', 'triton']
    print('\nsmall batches (us per call)\n| case | ' + ' | '.join(f'{m} {i}' for m in ('graph', 'kernel', 'do_bench') for i in impls) + ' |')
    print('| --- |' + ' ---: |' * 9)
    for op, r in small.items():
        print(f"| {op} | " + ' | '.join(f"{r[m + ' ' + i]:.2f}" if m + ' ' + i in r else '' for m in ('graph', 'kernel', 'do_bench') for i in impls) + ' |')
