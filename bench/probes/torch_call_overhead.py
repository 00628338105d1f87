"""Host cost of one kiln_torch call next to PyTorch eager and a bare ctypes call.

python3 bench/probes/torch_call_overhead.py LIBRARY [OTHER_KILN_TORCH.py]
Times 3000 back-to-back calls on a 1x4096 bf16 rmsnorm (a ~2 us kernel, so
the host is what limits them): host time per call, then the end-to-end
time per call once the stream drained; median of 5 rounds. Also the 8192 x
4096 rmsnorm by CUDA events over 100 calls (lesson 7's row). Runs
python/kiln_torch.py and, when given, another version of it side by side
(session 37 compared the first one:
`git show e3120ce:python/kiln_torch.py > /tmp/kiln_torch_before.py`).
"""
import ctypes
import importlib.util
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import kiln_torch  # noqa: E402

LIB = sys.argv[1]
mods = {"kiln_torch": kiln_torch}
if len(sys.argv) > 2:
    spec = importlib.util.spec_from_file_location("kiln_torch_before", sys.argv[2])
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    mods["kiln_torch (before)"] = m

dev = torch.device("cuda")
x = torch.randn(1, 4096, dtype=torch.bfloat16, device=dev)
w = torch.rand(4096, dtype=torch.bfloat16, device=dev) + 0.5
y = torch.empty_like(x)


def per_call(fn, n=3000, rounds=5):
    host, total = [], []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append((t1 - t0) / n * 1e6)
        total.append((t2 - t0) / n * 1e6)
    return statistics.median(host), statistics.median(total)


rows = []
for label, mod in mods.items():
    f = mod.load(LIB, "rmsnorm")
    f(x, w)
    rows.append((f"{label}: rmsnorm(x, w), output allocated", per_call(lambda: f(x, w))))
    rows.append((f"{label}: rmsnorm(x, w, out=(y,))", per_call(lambda: f(x, w, out=(y,)))))
rows.append(("PyTorch eager: F.rms_norm(x, (4096,), w)",
             per_call(lambda: torch.nn.functional.rms_norm(x, (4096,), w, eps=1e-6))))

# The C interface alone: one prebuilt argument block, PyTorch's stream.
lib = ctypes.CDLL(LIB)
shape_x, stride_x = (ctypes.c_int64 * 2)(1, 4096), (ctypes.c_int64 * 2)(4096, 1)
shape_w, stride_w = (ctypes.c_int64 * 1)(4096), (ctypes.c_int64 * 1)(1)
T = kiln_torch._Tensor
args = (T * 3)(T(x.data_ptr(), 4, 2, shape_x, stride_x), T(w.data_ptr(), 4, 1, shape_w, stride_w),
               T(y.data_ptr(), 4, 2, shape_x, stride_x))
fn = lib.kiln_rmsnorm
fn.argtypes = [ctypes.POINTER(T), ctypes.c_int32, ctypes.POINTER(ctypes.c_double), ctypes.c_int32, ctypes.c_void_p]
stream = torch.cuda.current_stream().cuda_stream
rows.append(("bare ctypes call of kiln_rmsnorm (arguments prebuilt)", per_call(lambda: fn(args, 3, None, 0, stream))))

print(f"torch {torch.__version__}; 1x4096 bf16 rmsnorm, 3000 calls, median of 5 rounds")
for name, (host, total) in rows:
    print(f"{name:60s} host {host:6.2f} us/call, end to end {total:6.2f} us/call")

xb = torch.randn(8192, 4096, dtype=torch.bfloat16, device=dev)
for label, mod in mods.items():
    f = mod.load(LIB, "rmsnorm")
    for _ in range(10):
        f(xb, w)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        s.record()
        for _ in range(100):
            f(xb, w)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3 / 100)
    us = statistics.median(times)
    print(f"{label}: rmsnorm 8192x4096 bf16 {us:.1f} us a call ({2 * xb.numel() * 2 / us / 1e6:.2f} TB/s), median of 5 x 100")
