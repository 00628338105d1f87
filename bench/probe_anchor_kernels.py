"""What the pointwise anchors launch (a probe, run on the GPU machine): for
x*y+z f32 and x+y bf16 at 32768x4096, torch.compile's generated Triton
kernel (its source, the autotuner's chosen config and PTX, from the
Inductor and Triton caches pointed into $OUT) and the grid, block and
registers of every kernel eager and torch.compile launch (from a profiler
trace). Usage: TORCHINDUCTOR_CACHE_DIR=... TRITON_CACHE_DIR=... python3
bench/probe_anchor_kernels.py OUTDIR [reduction] ("reduction": the
reduction rows where torch.compile led, session 34, instead)"""
import json, os, sys
import torch
from triton.testing import do_bench

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
M, N = 32768, 4096
cases = []
if len(sys.argv) > 2 and sys.argv[2] == "reduction":
    # Session 34: the rows where torch.compile led kiln by 0.2-0.3% (layernorm
    # and sum f32 at 32768x4096, rmsnorm f32 at 4096x32768), the ops as in
    # anchors_reduction.py.
    import torch.nn.functional as F
    x = torch.randn(M, N, device="cuda")
    w, b = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    cases.append(("layernorm f32 32768x4096", lambda a, ww, bb: F.layer_norm(a, (a.shape[-1],), ww, bb, eps=1e-5),
                  (x, w, b), 2 * M * N * 4))
    cases.append(("sum(-1) f32 32768x4096", lambda a: a.sum(-1), (x,), M * N * 4))
    xr = x.view(4096, 32768)
    wr = torch.randn(32768, device="cuda")
    cases.append(("rmsnorm f32 4096x32768",
                  lambda a, ww: (a.float() * torch.rsqrt(a.float().pow(2).mean(-1, keepdim=True) + 1e-6) * ww.float()).to(a.dtype),
                  (xr, wr), 2 * M * N * 4))
else:
  for dtype in (torch.float32, torch.bfloat16):
    x, y, z = (torch.randn(M, N, device="cuda", dtype=dtype) for _ in range(3))
    cases.append((f"fma {dtype}", lambda a, b, c: a * b + c, (x, y, z), 4 * M * N * x.element_size()))
    cases.append((f"add {dtype}", lambda a, b: a + b, (x, y), 3 * M * N * x.element_size()))
for name, fn, args, nbytes in cases:
    c = torch.compile(fn)
    c(*args); torch.cuda.synchronize()
    for impl, f in (("eager", fn), ("torch.compile", c)):
        ms = do_bench(lambda: f(*args), warmup=25, rep=200, return_mode="median")
        print(f"{name:22s} {impl:14s} {ms*1e3:8.1f} us {nbytes/ms/1e9:.3f} TB/s", flush=True)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            f(*args); torch.cuda.synchronize()
        trace = os.path.join(out, f"trace-{name.replace(' ', '_')}-{impl}.json")
        prof.export_chrome_trace(trace)
        with open(trace) as fh:
            t = json.load(fh)
        for e in t.get("traceEvents", []):
            if e.get("cat") == "kernel":
                a = e.get("args", {})
                print(f"   kernel {e['name'][:90]} grid {a.get('grid')} block {a.get('block')} "
                      f"regs {a.get('registers per thread')} smem {a.get('shared memory')} dur {e.get('dur')} us", flush=True)
