"""Anchors for kiln's gradient benchmarks (bench/bench_backward.cpp), run in
the same device call: PyTorch eager autograd and torch.compile's backward
(Inductor's generated backward kernels), on the cases of bench_backward,
with the same names, the same byte counts (every input read once, every
output written once) and the same input ranges.

Each case runs the forward once with inputs that require grad, then times
only the backward: torch.autograd.grad(out, inputs, grad, retain_graph=True).
For torch.compile the forward is a compiled function (dynamic=False), so the
backward that runs is the one Inductor compiled for it.

Timing: triton.testing.do_bench (median; it clears a 256 MB cache before
every run: an L2-flushed time like bench_backward's).

Usage: python3 anchors_backward.py [substring...]. Writes
$OUT/anchors_backward.json (after every measurement)."""
import json, math, os, sys, time
import torch
import torch.nn.functional as F
from triton.testing import do_bench

import torch._dynamo
for _name in ("recompile_limit", "cache_size_limit"):
    if hasattr(torch._dynamo.config, _name):
        setattr(torch._dynamo.config, _name, 256)

FILTERS = sys.argv[1:]
dev = "cuda"
EPS = 1e-5
results = []
T0 = time.perf_counter()

def save():
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "anchors_backward.json"), "w") as f:
            json.dump(results, f, indent=1)

def report(op, impl, ms, nbytes):
    tbps = nbytes / (ms * 1e-3) / 1e12
    results.append({"op": op, "impl": impl, "median_us": round(ms * 1e3, 2), "TBps": round(tbps, 3)})
    save()
    print(f"{op:48s} {impl:14s} {ms*1e3:9.1f} us  {tbps:.3f} TB/s", flush=True)

def uniform(shape, dtype, lo, hi):
    return (torch.rand(shape, device=dev, dtype=torch.float32) * (hi - lo) + lo).to(dtype)

def name(op, M, N, dtype):
    return f"{op} [{M}x{N} {'bfloat16' if dtype == torch.bfloat16 else 'float32'}]"

def timed_backward(op, impl, forward, inputs, grad, nbytes):
    """forward(*inputs) once, then the median time of its backward."""
    try:
        ins = [t.detach().requires_grad_(t.is_floating_point()) for t in inputs]
        out = forward(*ins)
        wrt = [t for t in ins if t.requires_grad]
        fn = lambda: torch.autograd.grad(out, wrt, grad, retain_graph=True)
        fn()
        torch.cuda.synchronize()
        report(op, impl, do_bench(fn, warmup=25, rep=200, return_mode="median"), nbytes)
    except Exception as e:  # noqa: BLE001 (a failed anchor is reported, the others still run)
        print(f"{op:48s} {impl:14s} FAILED: {type(e).__name__}: {e}", flush=True)

def run_case(op, forward, inputs, grad, nbytes):
    if FILTERS and not any(f in op for f in FILTERS):
        return
    timed_backward(op, "eager", forward, inputs, grad, nbytes)
    torch._dynamo.reset()
    timed_backward(op, "torch.compile", torch.compile(forward, dynamic=False), inputs, grad, nbytes)

def norm_case(kind, M, N, dtype):
    es = torch.tensor([], dtype=dtype).element_size()
    x = uniform((M, N), dtype, -2, 2)
    w = uniform((N,), dtype, 0.5, 1.5)
    dy = uniform((M, N), dtype, -1, 1)
    if kind == "rmsnorm":
        fwd = lambda x, w: F.rms_norm(x, (N,), w, EPS)
        run_case(name("rmsnorm_backward", M, N, dtype), fwd, (x, w), dy, (3 * M * N + 2 * N) * es)
    else:
        b = uniform((N,), dtype, -1, 1)
        fwd = lambda x, w, b: F.layer_norm(x, (N,), w, b, EPS)
        # kiln's graph reads b's handle too (N values), and writes dbias.
        run_case(name("layernorm_backward", M, N, dtype), fwd, (x, w, b), dy, (3 * M * N + 4 * N) * es)

def softmax_case(M, N, dtype):
    es = torch.tensor([], dtype=dtype).element_size()
    x = uniform((M, N), dtype, -4, 4)
    dy = uniform((M, N), dtype, -1, 1)
    run_case(name("softmax_backward", M, N, dtype), lambda x: torch.softmax(x, -1), (x,), dy, 3 * M * N * es)

def cross_entropy_case(M, C):
    logits = uniform((M, C), torch.bfloat16, -4, 4)
    targets = torch.randint(0, C, (M,), device=dev)
    dloss = uniform((), torch.float32, 0.5, 2)
    fwd = lambda l, t: F.cross_entropy(l.float(), t)
    run_case(name("cross_entropy_backward", M, C, torch.bfloat16), fwd, (logits, targets), dloss,
             2 * M * C * 2 + M * 8 + 4)

def gelu_case(M, N, dtype):
    es = torch.tensor([], dtype=dtype).element_size()
    x = uniform((M, N), dtype, -2, 2)
    dy = uniform((M, N), dtype, -1, 1)
    run_case(name("gelu_tanh_backward", M, N, dtype), lambda x: F.gelu(x, approximate="tanh"), (x,), dy,
             3 * M * N * es)

if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    norm_case("rmsnorm", 32768, 4096, torch.bfloat16)
    norm_case("layernorm", 32768, 4096, torch.bfloat16)
    norm_case("rmsnorm", 32768, 4096, torch.float32)
    norm_case("rmsnorm", 4096, 32768, torch.bfloat16)
    norm_case("layernorm", 4096, 32768, torch.bfloat16)
    softmax_case(32768, 4096, torch.bfloat16)
    cross_entropy_case(8192, 32768)
    gelu_case(32768, 4096, torch.bfloat16)
    print(f"anchors_backward: {len(results)} measurements in {time.perf_counter() - T0:.0f} s", flush=True)
    save()
