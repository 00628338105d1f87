"""Anchors for kiln's pointwise benchmarks, run in the same device call:
PyTorch eager and torch.compile on x + y, x*y + z, gelu_tanh(x + b) and the
same chain of six elementwise ops as bench_pointwise.cpp. Same byte counts
and method as shared/bench/anchors.py (triton.testing.do_bench, median)."""
import json, os, sys, time
import torch
import torch.nn.functional as F
from triton.testing import do_bench

results = []

def report(op, impl, ms, nbytes, extra=""):
    tbps = nbytes / (ms * 1e-3) / 1e12
    results.append({"op": op, "impl": impl, "median_us": round(ms * 1e3, 2), "TBps": round(tbps, 3)})
    print(f"{op:34s} {impl:14s} {ms*1e3:9.1f} us  {tbps:.3f} TB/s {extra}", flush=True)

def chain6(x):
    c = x * 1.5 + 0.25
    c = torch.exp(c * -0.5)
    return c * 2.0 - 1.0

def run(M, N, dtype):
    es = torch.tensor([], dtype=dtype).element_size()
    x, y, z = (torch.randn(M, N, device="cuda", dtype=dtype) for _ in range(3))
    b = torch.randn(N, device="cuda", dtype=dtype)
    tag = f"{M}x{N} {str(dtype).replace('torch.', '')}"
    MN = M * N * es
    cases = [
        ("add", lambda a, c: a + c, (x, y), 3 * MN),
        ("fma x*y+z", lambda a, c, d: a * c + d, (x, y, z), 4 * MN),
        ("gelu(x+b)", lambda a, c: F.gelu(a + c, approximate="tanh"), (x, b), 2 * MN),
        ("chain of 6", chain6, (x,), 2 * MN),
    ]
    for name, fn, args, nbytes in cases:
        op = f"{name} [{tag}]"
        report(op, "eager", do_bench(lambda: fn(*args), warmup=25, rep=200, return_mode="median"), nbytes)
        c = torch.compile(fn)
        t0 = time.perf_counter(); c(*args); torch.cuda.synchronize(); cold = time.perf_counter() - t0
        report(op, "torch.compile", do_bench(lambda: c(*args), warmup=25, rep=200, return_mode="median"), nbytes,
               f"(cold compile {cold:.1f} s)")

if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    run(32768, 4096, torch.bfloat16)
    run(32768, 4096, torch.float32)
    run(1024, 262144, torch.float32)
    out = os.environ.get("OUT")
    if out:
        json.dump(results, open(os.path.join(out, "anchors_pointwise.json"), "w"), indent=1)
