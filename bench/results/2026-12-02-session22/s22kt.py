# Kernel times after the L2 flush (anchors_reduction.kernel_time_flushed:
# profiler stamps) of kiln's exported small-row variants beside
# torch.compile's and Triton's kernels, interleaved in rounds.
import os, sys, statistics, torch
sys.path.insert(0, os.environ["K"] + "/anchors")
import anchors_reduction as A
kk = A.kiln
M, N = int(os.environ.get("ROWS", "512")), 4096
x = A.uniform((M, N), torch.bfloat16, -4, 4)
w = A.uniform((N,), torch.bfloat16, 0.5, 1.5)
cases, keep = {}, []
for opname, fn, args, names in (("rmsnorm", A.rmsnorm, (x, w), ["x", "w"]),
                                ("softmax(-1)", A.softmax, (x,), ["x"])):
    op = f"{opname} [{M}x{N} bfloat16]"
    c = torch.compile(fn); c(*args)
    cases[op + " torch.compile"] = lambda c=c, args=args: c(*args)
    tf = A.triton_rmsnorm if opname == "rmsnorm" else A.triton_softmax
    cases[op + " triton"] = lambda tf=tf, args=args: tf(*args)
    for v in kk.variants(op):
        t = dict(zip(names, args)); outs = kk.outputs(v); t.update(outs); keep.append(outs)
        l = kk.launcher(v, t); l()
        cases["kiln " + v] = l
torch.cuda.synchronize()
res = {k: [] for k in cases}
for r in range(int(os.environ.get("ROUNDS", "5"))):
    for k, f in cases.items():
        res[k].append(A.kernel_time_flushed(f) * 1e3)
for k, v in res.items():
    print(f"{k:110s} median {statistics.median(v):6.3f} us  rounds " + " ".join(f"{t:.3f}" for t in v), flush=True)
