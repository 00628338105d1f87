# Small batches under do_bench (L2 flushed): kiln's exported rmsnorm/softmax
# 512x4096 bf16 kernels (heuristic + config variants) beside torch.compile
# and the hand-written Triton kernels, interleaved in rounds.
import os, sys, statistics, torch
from triton.testing import do_bench
sys.path.insert(0, os.environ["K"] + "/anchors")
import anchors_reduction as A
kk = A.kiln
M, N = int(os.environ.get("ROWS", "512")), 4096
x = A.uniform((M, N), torch.bfloat16, -4, 4)
w = A.uniform((N,), torch.bfloat16, 0.5, 1.5)
cases = {}
for opname, fn, args, names in (("rmsnorm", A.rmsnorm, (x, w), ["x", "w"]),
                                ("softmax(-1)", A.softmax, (x,), ["x"])):
    op = f"{opname} [{M}x{N} bfloat16]"
    c = torch.compile(fn); c(*args)
    cases[op + " torch.compile"] = lambda c=c, args=args: c(*args)
    tf = A.triton_rmsnorm if opname == "rmsnorm" else A.triton_softmax
    cases[op + " triton"] = lambda tf=tf, args=args: tf(*args)
    for v in kk.variants(op):
        t = dict(zip(names, args)); t.update(kk.outputs(v))
        l = kk.launcher(v, t); l()
        cases["kiln " + v] = l
torch.cuda.synchronize()
res = {k: [] for k in cases}
for r in range(int(os.environ.get("ROUNDS", "5"))):
    for k, f in cases.items():
        res[k].append(do_bench(f, warmup=25, rep=200, return_mode="median") * 1e3)
for k, v in res.items():
    if not v: continue
    print(f"{k:100s} median {statistics.median(v):6.2f} us  rounds " + " ".join(f"{t:.2f}" for t in v), flush=True)
if os.environ.get("NCU_LAUNCH"):
    for k, f in cases.items():
        f()
    torch.cuda.synchronize()
