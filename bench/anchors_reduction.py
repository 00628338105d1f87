"""Anchors for kiln's reduction benchmarks (bench/bench_reduction.cpp), run in
the same device call: PyTorch eager, torch.compile and the hand-written
Triton softmax and rmsnorm kernels of shared/bench/anchors.py, on exactly
the cases of bench_reduction, with the same names, the same byte counts
(every input read once, every output written once, weights and biases
included) and the same input ranges.

Timing: triton.testing.do_bench (median; it clears a 256 MB cache before
every run, so it is an L2-flushed time like bench_reduction's). The small
batches are also timed back to back without any flush (100 calls between
two CUDA events, per call; median of 20 batches), as bench_reduction does,
and as CUDA graph replays (20 calls captured in a graph, per call: the GPU's
time without any host cost, which the back-to-back times of Python
launchers are not).

With KILN_KERNELS=DIR (what `KILN_EXPORT_KERNELS=DIR bench_reduction`
wrote), kiln's kernel of each case is also timed here by the same do_bench
(and graph replay for the small batches), launched through the driver
(bench/kiln_kernels.py): one method for kiln and the anchors.

torch.compile: one compile per (op, shape, dtype), dynamic=False (shapes
specialized, the strongest setting; shared/bench/anchors.py used the
default, where a second shape can switch to a dynamic-shape kernel), and
the recompile limit raised so that no case silently falls back to eager.
A time budget (KILN_ANCHOR_BUDGET_S, default 330 s) skips the compiles that
would start after it; each skip is printed.

Usage: python3 anchors_reduction.py [substring...]  (cases whose name
contains any substring; all by default). Writes $OUT/anchors_reduction.json
(after every measurement)."""
import json, os, sys, time
import torch, triton, triton.language as tl
import torch.nn.functional as F
from triton.testing import do_bench

import kiln_kernels

T0 = time.perf_counter()
BUDGET_S = float(os.environ.get("KILN_ANCHOR_BUDGET_S", "330"))
FILTERS = sys.argv[1:]
dev = "cuda"
results = []
NOFLUSH = "(back to back, not flushed)"

import torch._dynamo
for _name in ("recompile_limit", "cache_size_limit"):
    if hasattr(torch._dynamo.config, _name):
        setattr(torch._dynamo.config, _name, 256)

kiln = kiln_kernels.from_env()

def elapsed():
    return time.perf_counter() - T0

def bench(fn):
    return do_bench(fn, warmup=25, rep=200, return_mode="median")

def back_to_back(fn, calls=100, batches=20):
    """Not flushed: `calls` calls back to back between two events, per call;
    the median over `batches` (as bench_reduction's small cases). No event
    per call, whose Python cost (~10 us) would swamp a small kernel."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(batches):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            fn()
        e.record(); e.synchronize()
        ts.append(s.elapsed_time(e) / calls)
    ts.sort()
    return 0.5 * (ts[(batches - 1) // 2] + ts[batches // 2])

GRAPH = "(CUDA graph replay, not flushed)"

def graph_replay(fn, calls=20, replays=10, batches=7):
    """GPU time per call without the host: `calls` calls captured in one CUDA
    graph, replayed `replays` times between two events, per call; the median
    over `batches`. What a model that replays graphs sees of a small kernel,
    whoever launches it (torch.compile's Python wrapper, kiln through the
    driver, Triton's launcher)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay(); torch.cuda.synchronize()
    ts = []
    for _ in range(batches):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(replays):
            g.replay()
        b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) / (replays * calls))
    ts.sort()
    return ts[len(ts) // 2]

KTIME = "(kernel time, L2 flushed; profiler)"
_flush_names = None

def _kernel_records(prof):
    """(start ns, duration ns, name) of every GPU activity the profiler
    recorded (CUPTI: the GPU's own start and end stamps), in start order."""
    out = []
    for e in prof.profiler.kineto_results.events():
        if e.device_type() != torch.autograd.DeviceType.CUDA:
            continue
        start = e.start_ns() if hasattr(e, "start_ns") else e.start_us() * 1e3
        dur = e.duration_ns() if hasattr(e, "duration_ns") else e.duration_us() * 1e3
        out.append((start, dur, e.name()))
    out.sort()
    return out

def kernel_time_flushed(fn, calls=100):
    """GPU time of the kernels one call of `fn` runs, each call after the
    same L2 flush as do_bench's (zeroing 256 MB), from the profiler's kernel
    records: the median over calls of the summed durations of a call's
    kernels (launch gaps and host time excluded). CUDA events step by about
    0.5 us, so do_bench's flushed medians of a 5 us call jump between two
    values a step apart; these stamps resolve far finer."""
    global _flush_names
    from torch.profiler import profile, ProfilerActivity
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int, device=dev)
    if _flush_names is None:
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            cache.zero_(); torch.cuda.synchronize()
        _flush_names = {n for _, _, n in _kernel_records(p)}
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(calls):
            cache.zero_()
            fn()
        torch.cuda.synchronize()
    per_call, cur = [], None
    for _, dur, name in _kernel_records(p):
        if name in _flush_names:
            if cur is not None:
                per_call.append(cur)
            cur = 0.0
        elif cur is not None:
            cur += dur
    if cur is not None:
        per_call.append(cur)
    per_call = sorted(t for t in per_call if t > 0)
    if not per_call:
        raise RuntimeError("the profiler recorded no kernel of the call")
    return per_call[len(per_call) // 2] * 1e-6  # ns -> ms

deferred_kernel_times = []

def kernel_time_report(op, impl, fn, nbytes, keep=()):
    """Queued for run_kernel_times(), after every other measurement, so
    that the profiler (CUPTI stays attached to a process once used) cannot
    touch the others. (torch.compile's and Triton's small calls under
    do_bench measured 5-76 us with the profiler interleaved, session 22
    call 5, and 5-137 us with it last, call 6: host-bound either way.)
    `keep`: tensors the call writes through raw pointers, kept alive."""
    deferred_kernel_times.append((op, impl, fn, nbytes, keep))

def run_kernel_times():
    for op, impl, fn, nbytes, _ in deferred_kernel_times:
        try:
            report(op, impl, kernel_time_flushed(fn), nbytes, KTIME, kernel_time=True)
        except Exception as e:  # the profiler is a diagnostic here: say why, go on
            print(f"{op:40s} {impl:14s} kernel time not measured: {type(e).__name__}: {e}", flush=True)
    deferred_kernel_times.clear()

def save():
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "anchors_reduction.json"), "w") as f:
            json.dump(results, f, indent=1)

def report(op, impl, ms, nbytes, extra="", flushed=True, **more):
    tbps = nbytes / (ms * 1e-3) / 1e12
    r = {"op": op, "impl": impl, "median_us": round(ms * 1e3, 2), "TBps": round(tbps, 3), "flushed": flushed}
    r.update(more)
    results.append(r)
    save()  # after every line, so a run cut short keeps what it measured
    print(f"{op:40s} {impl:14s} {ms*1e3:9.1f} us  {tbps:.3f} TB/s {extra}", flush=True)

def compile_or_skip(op, fn):
    """torch.compile(fn) with Dynamo's caches reset first (one compiled entry
    per case, so no guard walk over other shapes' entries adds host time);
    None (printed) once the time budget is spent."""
    if elapsed() > BUDGET_S:
        print(f"{op:40s} torch.compile  SKIPPED (time budget {BUDGET_S:.0f} s spent)", flush=True)
        return None
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False)

def timed_first_call(c, args):
    t0 = time.perf_counter(); c(*args); torch.cuda.synchronize()
    return time.perf_counter() - t0

# --- hand-written Triton (shared/bench/anchors.py) ---

@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * in_stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride + offs, y.to(out_ptr.dtype.element_ty), mask=mask)

def triton_softmax(x):
    M, N = x.shape
    y = torch.empty_like(x)
    BLOCK = triton.next_power_of_2(N)
    nw = 4 if BLOCK <= 2048 else (8 if BLOCK <= 8192 else 16)
    softmax_kernel[(M,)](y, x, x.stride(0), y.stride(0), N, BLOCK=BLOCK, num_warps=nw)
    return y

@triton.jit
def rmsnorm_kernel(out_ptr, in_ptr, w_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * n_cols + offs, mask=mask, other=0.).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(out_ptr + row * n_cols + offs, (x * r * w).to(out_ptr.dtype.element_ty), mask=mask)

def triton_rmsnorm(x, w, eps=1e-6):
    M, N = x.shape
    y = torch.empty_like(x)
    BLOCK = triton.next_power_of_2(N)
    rmsnorm_kernel[(M,)](y, x, w, N, eps, BLOCK=BLOCK, num_warps=8 if BLOCK <= 8192 else 16)
    return y

# --- the ops, as in shared/bench/anchors.py ---

def softmax(x):
    return torch.softmax(x, -1)

def rmsnorm(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)

def layernorm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)

def rowsum(x):
    return x.sum(-1)

def wholesum(x):
    return x.sum()

def colsum(x):
    return x.sum(0)

def sumsq(x):
    xf = x.float()
    return (xf * xf).sum()

def gradcols(r, x):
    return (r.float() * x.float()).sum(0)

def cross_entropy(logits, target):
    return F.cross_entropy(logits.float(), target)

def residual_rmsnorm(x, r, w, eps=1e-6):
    s = x + r
    sf = s.float()
    return s, (sf * torch.rsqrt(sf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)

def uniform(shape, dtype, lo, hi):
    return (torch.rand(shape, device=dev, dtype=torch.float32) * (hi - lo) + lo).to(dtype)

def tag(M, N, dtype):
    return f"{M}x{N} {str(dtype).replace('torch.', '')}"

def wanted(op):
    return not FILTERS or any(f in op for f in FILTERS)

def run_case(op, eager_fn, args, nbytes, triton_fn=None, small=False, names=None):
    """`names`: kiln's input names for `args` (bench_reduction's graphs), to
    time kiln's exported kernel of the case here too (KILN_KERNELS)."""
    if not wanted(op):
        return
    report(op, "eager", bench(lambda: eager_fn(*args)), nbytes)
    if small:
        report(op, "eager", back_to_back(lambda: eager_fn(*args)), nbytes, NOFLUSH, flushed=False)
    c = compile_or_skip(op, eager_fn)
    if c is not None:
        cold = timed_first_call(c, args)
        report(op, "torch.compile", bench(lambda: c(*args)), nbytes, f"(cold compile {cold:.1f} s)",
               cold_compile_s=round(cold, 2))
        if small:
            report(op, "torch.compile", back_to_back(lambda: c(*args)), nbytes, NOFLUSH, flushed=False)
            report(op, "torch.compile", graph_replay(lambda: c(*args)), nbytes, GRAPH, flushed=False, graph=True)
            kernel_time_report(op, "torch.compile", lambda: c(*args), nbytes)
    # kiln's exported kernel of the case, and every exported variant of it
    # (bench_reduction under KILN_ROW_CONFIG exports "<op> <override>";
    # several runs may export into one folder): "kiln" / "kiln <override>".
    for v in (kiln.variants(op) if kiln is not None and names is not None else []):
        override = v[len(op):]  # "" or " {...}"
        launch, outs = kiln.bind(v, names, args)
        launch(); torch.cuda.synchronize()
        ref = eager_fn(*[a.float() if a.is_floating_point() else a for a in args])
        ref = ref if isinstance(ref, tuple) else (ref,)
        err = max((o.float() - r.float()).abs().max().item() for o, r in zip(kiln.results(v, outs), ref))
        report(op, "kiln (do_bench)" + override, bench(launch), nbytes, f"(max abs err {err:.1e}; kiln's exported cubin)")
        if small:
            report(op, "kiln" + override, graph_replay(launch), nbytes, GRAPH, flushed=False, graph=True)
            kernel_time_report(op, "kiln" + override, launch, nbytes, keep=(args, outs))
    if triton_fn is not None:
        out = triton_fn(*args)
        ref = eager_fn(*[a.float() for a in args]).float()
        err = (out.float() - ref).abs().max().item()
        report(op, "triton", bench(lambda: triton_fn(*args)), nbytes, f"(max abs err {err:.1e})")
        if small:
            report(op, "triton", back_to_back(lambda: triton_fn(*args)), nbytes, NOFLUSH, flushed=False)
            report(op, "triton", graph_replay(lambda: triton_fn(*args)), nbytes, GRAPH, flushed=False, graph=True)
            kernel_time_report(op, "triton", lambda: triton_fn(*args), nbytes)

def run_rows(M, N, dtype):
    t = tag(M, N, dtype)
    names = [f"{o} [{t}]" for o in ("softmax(-1)", "layernorm", "rmsnorm", "sum(-1)", "sum", "sum(0)", "sum(x*x)",
                                     "sum(r*x,0)", "residual+rmsnorm")]
    if not any(wanted(n) for n in names):
        return
    es = torch.tensor([], dtype=dtype).element_size()
    MN = M * N * es
    x = uniform((M, N), dtype, -2, 2)
    w = uniform((N,), dtype, -1, 1); b = uniform((N,), dtype, -1, 1)
    small_rows = N <= 65536  # the Triton kernels hold one row in registers
    run_case(f"softmax(-1) [{t}]", softmax, (x,), 2 * MN, triton_softmax if small_rows else None, names=["x"])
    run_case(f"layernorm [{t}]", layernorm, (x, w, b), 2 * MN + 2 * N * es, names=["x", "w", "b"])
    run_case(f"rmsnorm [{t}]", rmsnorm, (x, w), 2 * MN + N * es, triton_rmsnorm if small_rows else None,
             names=["x", "w"])
    run_case(f"sum(-1) [{t}]", rowsum, (x,), MN + M * es, names=["x"])
    if M == 32768 and N == 4096:
        run_case(f"sum [{t}]", wholesum, (x,), MN + es, names=["x"])
        run_case(f"sum(0) [{t}]", colsum, (x,), MN + N * es, names=["x"])
        run_case(f"sum(x*x) [{t}]", sumsq, (x,), MN + 4, names=["x"])
        r = uniform((M, N), dtype, -2, 2)
        run_case(f"sum(r*x,0) [{t}]", gradcols, (r, x), 2 * MN + N * 4, names=["r", "x"])
        if dtype == torch.bfloat16:
            run_case(f"residual+rmsnorm [{t}]", residual_rmsnorm, (x, r, w), 4 * MN + N * es,
                     names=["x", "r", "w"])
        del r
    del x

def run_cross_entropy(M, V):
    op = f"cross_entropy [{tag(M, V, torch.bfloat16)}]"
    if not wanted(op):
        return
    logits = uniform((M, V), torch.bfloat16, -2, 2)
    target = torch.randint(0, V, (M,), device=dev)
    run_case(op, cross_entropy, (logits, target), M * V * 2 + M * 8 + 4)
    del logits

def run_small(M):
    t = tag(M, 4096, torch.bfloat16)
    x = uniform((M, 4096), torch.bfloat16, -2, 2)
    w = uniform((4096,), torch.bfloat16, -1, 1)
    run_case(f"softmax(-1) [{t}]", softmax, (x,), 2 * M * 4096 * 2, triton_softmax, small=True, names=["x"])
    run_case(f"rmsnorm [{t}]", rmsnorm, (x, w), 2 * M * 4096 * 2 + 4096 * 2, triton_rmsnorm, small=True,
             names=["x", "w"])

def run_few(M, N, dtype, ops):
    """A few long rows (a softmax over a vocabulary for a few sequences):
    latency-bound like the small batches."""
    t = tag(M, N, dtype)
    es = torch.tensor([], dtype=dtype).element_size()
    x = uniform((M, N), dtype, -2, 2)
    w = uniform((N,), dtype, -1, 1)
    if "softmax" in ops:
        run_case(f"softmax(-1) [{t}]", softmax, (x,), 2 * M * N * es, triton_softmax if N <= 65536 else None,
                 small=True, names=["x"])
    if "rmsnorm" in ops:
        run_case(f"rmsnorm [{t}]", rmsnorm, (x, w), 2 * M * N * es + N * es, triton_rmsnorm if N <= 65536 else None,
                 small=True, names=["x", "w"])

def run_copy():
    a = torch.empty(1 << 30, device=dev, dtype=torch.uint8).fill_(1); b = torch.empty_like(a)
    report("copy [1 GiB]", "torch copy_", bench(lambda: b.copy_(a)), 2 * a.numel())

if __name__ == "__main__":
    print(torch.__version__, triton.__version__, torch.cuda.get_device_name(), flush=True)
    run_copy()
    run_rows(32768, 4096, torch.bfloat16)
    run_rows(32768, 4096, torch.float32)
    run_rows(4096, 32768, torch.bfloat16)
    run_rows(4096, 32768, torch.float32)
    run_rows(1024, 262144, torch.float32)
    run_cross_entropy(8192, 32768)
    run_cross_entropy(8192, 128256)
    for M in (1, 64, 512):
        run_small(M)
    run_few(8, 32768, torch.bfloat16, ("softmax", "rmsnorm"))
    run_few(8, 128256, torch.float32, ("softmax",))
    run_kernel_times()
    print(f"anchors_reduction: {len(results)} measurements in {elapsed():.0f} s", flush=True)
    save()
