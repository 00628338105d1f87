"""Anchors for kiln's pointwise benchmarks, run in the same device call:
PyTorch eager and torch.compile on x + y, x*y + z, gelu_tanh(x + b) and the
same chain of six elementwise ops as bench_pointwise.cpp. Same byte counts
and method as shared/bench/anchors.py (triton.testing.do_bench, median).

With KILN_KERNELS=DIR (what `KILN_EXPORT_KERNELS=DIR bench_pointwise` wrote:
each case's cubin and its launch), kiln's own kernel for each case is also
timed here, by the same do_bench on the same kind of tensors, launched
through the driver (ctypes), so kiln and torch.compile are measured by one
method in one process ("kiln (do_bench)")."""
import ctypes, json, os, sys, time
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

class KilnKernels:
    """The exported kiln kernels by op name, launched with cuLaunchKernel."""

    def __init__(self, folder):
        self.folder = folder
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.by_op = {}
        with open(os.path.join(folder, "kernels.jsonl")) as f:
            for line in f:
                k = json.loads(line)
                self.by_op[k["op"]] = k
        self.modules = []

    def check(self, r, what):
        if r != 0:
            raise RuntimeError(f"{what} failed with CUresult {r}")

    def launcher(self, op, tensors):
        """A function launching the case's kernel on `tensors` (by name), or None."""
        k = self.by_op.get(op)
        if k is None:
            return None
        data = open(os.path.join(self.folder, k["cubin"]), "rb").read()
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(self.cuda.cuModuleLoadData(ctypes.byref(mod), data), "cuModuleLoadData")
        self.modules.append(mod)
        self.check(self.cuda.cuModuleGetFunction(ctypes.byref(fn), mod, k["entry"].encode()), "cuModuleGetFunction")
        ptrs = [ctypes.c_void_p(tensors[t["name"]].data_ptr()) for t in k["tensors"]]
        params = (ctypes.c_void_p * len(ptrs))(*[ctypes.cast(ctypes.byref(p), ctypes.c_void_p) for p in ptrs])
        grid, block, shared = k["grid"], k["block"], k["shared"]
        cuda = self.cuda

        def launch():
            stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
            r = cuda.cuLaunchKernel(fn, ctypes.c_uint(grid), 1, 1, ctypes.c_uint(block), 1, 1, ctypes.c_uint(shared),
                                    stream, params, None)
            if r != 0:
                raise RuntimeError(f"cuLaunchKernel failed with CUresult {r}")
        launch.keep = (ptrs, params)
        return launch

kiln = KilnKernels(os.environ["KILN_KERNELS"]) if os.environ.get("KILN_KERNELS") else None

def run(M, N, dtype):
    es = torch.tensor([], dtype=dtype).element_size()
    x, y, z = (torch.randn(M, N, device="cuda", dtype=dtype) for _ in range(3))
    b = torch.randn(N, device="cuda", dtype=dtype)
    tag = f"{M}x{N} {str(dtype).replace('torch.', '')}"
    MN = M * N * es
    cases = [
        ("add", lambda a, c: a + c, (x, y), 3 * MN, ["x", "y"]),
        ("fma x*y+z", lambda a, c, d: a * c + d, (x, y, z), 4 * MN, ["x", "y", "z"]),
        ("gelu(x+b)", lambda a, c: F.gelu(a + c, approximate="tanh"), (x, b), 2 * MN, ["x", "b"]),
        ("chain of 6", chain6, (x,), 2 * MN, ["x"]),
    ]
    for name, fn, args, nbytes, names in cases:
        op = f"{name} [{tag}]"
        report(op, "eager", do_bench(lambda: fn(*args), warmup=25, rep=200, return_mode="median"), nbytes)
        c = torch.compile(fn)
        t0 = time.perf_counter(); want = c(*args); torch.cuda.synchronize(); cold = time.perf_counter() - t0
        report(op, "torch.compile", do_bench(lambda: c(*args), warmup=25, rep=200, return_mode="median"), nbytes,
               f"(cold compile {cold:.1f} s)")
        launch = None
        if kiln is not None:
            out = torch.full_like(want, float("nan"))
            tensors = dict(zip(names, args))
            for k in kiln.by_op.get(op, {}).get("tensors", []):
                if k["output"]:
                    tensors[k["name"]] = out
            launch = kiln.launcher(op, tensors)
        if launch is not None:
            launch(); torch.cuda.synchronize()
            err = (out.float() - want.float()).abs().max().item()
            # torch.compile again, then kiln, then torch.compile: both see the same machine state.
            report(op, "torch.compile", do_bench(lambda: c(*args), warmup=25, rep=200, return_mode="median"), nbytes,
                   "(again, next to kiln)")
            report(op, "kiln (do_bench)", do_bench(launch, warmup=25, rep=200, return_mode="median"), nbytes,
                   f"(max |kiln - torch.compile| {err:.2e})")

if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    run(32768, 4096, torch.bfloat16)
    run(32768, 4096, torch.float32)
    run(1024, 262144, torch.float32)
    out = os.environ.get("OUT")
    if out:
        json.dump(results, open(os.path.join(out, "anchors_pointwise.json"), "w"), indent=1)
