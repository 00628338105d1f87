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
for kind in ['pointwise', 'reduction']:
    k = kiln(f'{d}/kiln_{kind}.jsonl')
    a = json.load(open(f'{d}/anchors_{kind}.json'))
    rows = {}
    for e in a:
        if kind == 'reduction' and not e.get('flushed', True): continue
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
        ratio = j['TBps'] / best if best else 0
        flag = '' if j['TBps'] >= 4.0 and ratio >= 1 else ' ←'
        print(f"| {op} | {j['median_us']:.1f} | {j['TBps']:.3f} | {f('kiln (do_bench)')} | {f('eager')} | {f('torch.compile')} | {f('triton')} | {ratio:.3f}{flag} |")
