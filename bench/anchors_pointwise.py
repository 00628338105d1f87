"""Anchors for kiln's pointwise benchmarks, run in the same device call:
PyTorch eager and torch.compile on x + y, x*y + z, gelu_tanh(x + b) and the
same chain of six elementwise ops as bench_pointwise.cpp. Same byte counts
and method as shared/bench/anchors.py (triton.testing.do_bench, median).

With KILN_KERNELS=DIR (what `KILN_EXPORT_KERNELS=DIR bench_pointwise` wrote:
each case's cubin and its launch), kiln's own kernel for each case is also
timed here, by the same do_bench on the same kind of tensors, launched
through the driver (ctypes), so kiln and torch.compile are measured by one
method in one process ("kiln (do_bench)")."""
import json, os, sys, time
import torch
import torch.nn.functional as F
from triton.testing import do_bench

import kiln_kernels

results = []

def report(op, impl, ms, nbytes, extra=""):
    tbps = nbytes / (ms * 1e-3) / 1e12
    results.append({"op": op, "impl": impl, "median_us": round(ms * 1e3, 2), "TBps": round(tbps, 3)})
    print(f"{op:34s} {impl:14s} {ms*1e3:9.1f} us  {tbps:.3f} TB/s {extra}", flush=True)

def chain6(x):
    c = x * 1.5 + 0.25
    c = torch.exp(c * -0.5)
    return c * 2.0 - 1.0

kiln = kiln_kernels.from_env()

def cases_of(M, N, dtype):
    """The cases at [M, N] of `dtype`: (name, fn, args, bytes, kiln's input names)."""
    es = torch.tensor([], dtype=dtype).element_size()
    x, y, z = (torch.randn(M, N, device="cuda", dtype=dtype) for _ in range(3))
    b = torch.randn(N, device="cuda", dtype=dtype)
    tag = f"{M}x{N} {str(dtype).replace('torch.', '')}"
    MN = M * N * es
    return tag, [
        ("add", lambda a, c: a + c, (x, y), 3 * MN, ["x", "y"]),
        ("fma x*y+z", lambda a, c, d: a * c + d, (x, y, z), 4 * MN, ["x", "y", "z"]),
        ("gelu(x+b)", lambda a, c: F.gelu(a + c, approximate="tanh"), (x, b), 2 * MN, ["x", "b"]),
        ("chain of 6", chain6, (x,), 2 * MN, ["x"]),
    ]

def run(M, N, dtype):
    tag, cases = cases_of(M, N, dtype)
    for name, fn, args, nbytes, names in cases:
        op = f"{name} [{tag}]"
        report(op, "eager", do_bench(lambda: fn(*args), warmup=25, rep=200, return_mode="median"), nbytes)
        c = torch.compile(fn)
        t0 = time.perf_counter(); want = c(*args); torch.cuda.synchronize(); cold = time.perf_counter() - t0
        report(op, "torch.compile", do_bench(lambda: c(*args), warmup=25, rep=200, return_mode="median"), nbytes,
               f"(cold compile {cold:.1f} s)")
        launch, outs = kiln.bind(op, names, args) if kiln is not None else (None, {})
        if launch is not None:
            launch(); torch.cuda.synchronize()
            out = next(iter(outs.values()))
            err = (out.float() - want.float()).abs().max().item()
            # torch.compile again, then kiln, then torch.compile: both see the same machine state.
            report(op, "torch.compile", do_bench(lambda: c(*args), warmup=25, rep=200, return_mode="median"), nbytes,
                   "(again, next to kiln)")
            report(op, "kiln (do_bench)", do_bench(launch, warmup=25, rep=200, return_mode="median"), nbytes,
                   f"(max |kiln - torch.compile| {err:.2e})")

def variants(M, N, dtype, rounds=3):
    """`variants` mode: for every case, torch.compile and every exported kiln
    variant of it (bench_pointwise variants), timed in `rounds` rounds in
    turn; then the median of each over the rounds."""
    tag, cases = cases_of(M, N, dtype)
    for name, fn, args, nbytes, names in cases:
        op = f"{name} [{tag}]"
        c = torch.compile(fn)
        want = c(*args)
        timed = {"torch.compile": lambda: c(*args)}
        for v in kiln.variants(op):
            launch, outs = kiln.bind(v, names, args)
            launch(); torch.cuda.synchronize()
            err = (next(iter(outs.values())).float() - want.float()).abs().max().item()
            label = "kiln " + (v[len(op):].strip() or "(heuristic)")
            print(f"{op:34s} {label:40s} max |kiln - torch.compile| {err:.2e}", flush=True)
            timed[label] = launch
        samples = {k: [] for k in timed}
        for r in range(rounds):
            for label, f in timed.items():
                samples[label].append(do_bench(f, warmup=25, rep=200, return_mode="median"))
        for label, ms in samples.items():
            ms.sort()
            med = ms[len(ms) // 2]
            report(op, label, med, nbytes, "rounds " + " ".join(f"{m*1e3:.1f}" for m in ms))

if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    if sys.argv[1:] == ["variants"]:
        if kiln is None:
            sys.exit("anchors_pointwise.py variants: set KILN_KERNELS to bench_pointwise variants' export folder")
        variants(32768, 4096, torch.bfloat16)
        variants(32768, 4096, torch.float32)
        variants(1024, 262144, torch.float32)
        sys.exit(0)
    run(32768, 4096, torch.bfloat16)
    run(32768, 4096, torch.float32)
    run(1024, 262144, torch.float32)
    out = os.environ.get("OUT")
    if out:
        json.dump(results, open(os.path.join(out, "anchors_pointwise.json"), "w"), indent=1)
