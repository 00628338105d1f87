"""Lesson 7: kiln kernels called from PyTorch.

The graphs of examples/graphs (rmsnorm, bias + gelu, cross-entropy, AdamW)
were compiled ahead of time by `kiln aot` into one shared library,
libkiln_lesson07.so (examples/CMakeLists.txt: kiln_add_aot on a SHARED
target). python/kiln_torch.py loads it with ctypes; each function then
takes torch tensors like a PyTorch op, allocates its outputs, runs on
PyTorch's current stream, and is checked by kiln before anything runs. No
compiler, LLVM or NVRTC is in this process, and nothing is compiled here.

    python3 examples/lesson_07_pytorch.py build/examples/libkiln_lesson07.so
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402

import kiln_torch  # noqa: E402

lib = sys.argv[1] if len(sys.argv) > 1 else "build/examples/libkiln_lesson07.so"
if not torch.cuda.is_available():
    print("no CUDA device visible to torch: this lesson needs an NVIDIA GPU")
    sys.exit(0)

rmsnorm = kiln_torch.load(lib, "rmsnorm")
gelu_bias = kiln_torch.load(lib, "gelu_bias")
cross_entropy = kiln_torch.load(lib, "cross_entropy")
print(rmsnorm, gelu_bias, cross_entropy, sep="\n")

torch.manual_seed(7)
x = torch.randn(8192, 4096, dtype=torch.bfloat16, device="cuda")
w = torch.rand(4096, dtype=torch.bfloat16, device="cuda") + 0.5
b = torch.randn(4096, dtype=torch.bfloat16, device="cuda")
logits = torch.randn(4096, 32768, dtype=torch.bfloat16, device="cuda") * 4
targets = torch.randint(0, 32768, (4096,), device="cuda")


# 1. Call them like PyTorch ops, and compare with PyTorch eager (float64).
def rel_err(got, want):
    return ((got.double() - want) / want.abs().clamp(min=1)).abs().max().item()


y = rmsnorm(x, w)
want_y = torch.nn.functional.rms_norm(x.double(), (4096,), w.double(), eps=1e-6)
z = gelu_bias(x, b)
want_z = torch.nn.functional.gelu((x + b).double(), approximate="tanh")
loss = cross_entropy(logits, targets)
want_loss = torch.nn.functional.cross_entropy(logits.double(), targets)
errors = {"rmsnorm": rel_err(y, want_y), "gelu_bias": rel_err(z, want_z), "cross_entropy": rel_err(loss, want_loss)}
print("max relative error against float64 PyTorch:", ", ".join(f"{k} {v:.2g}" for k, v in errors.items()))


# 2. Time them next to PyTorch eager: CUDA events around 100 calls, after
#    10 warm-up calls, on PyTorch's stream. Bytes each must move / time.
def time_us(fn):
    for _ in range(10):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(100):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / 100


rows = [
    ("rmsnorm 8192x4096 bf16", 2 * x.numel() * 2, lambda: rmsnorm(x, w),
     lambda: torch.nn.functional.rms_norm(x, (4096,), w, eps=1e-6)),
    ("gelu(x + b) 8192x4096 bf16", 2 * x.numel() * 2, lambda: gelu_bias(x, b),
     lambda: torch.nn.functional.gelu(x + b, approximate="tanh")),
    ("cross_entropy 4096x32768 bf16", logits.numel() * 2, lambda: cross_entropy(logits, targets),
     lambda: torch.nn.functional.cross_entropy(logits, targets)),
]
for name, nbytes, kiln_fn, torch_fn in rows:
    k, t = time_us(kiln_fn), time_us(torch_fn)
    print(f"{name}: kiln {k:.1f} us ({nbytes / k / 1e6:.2f} TB/s), PyTorch eager {t:.1f} us "
          f"({nbytes / t / 1e6:.2f} TB/s)")

# 3. Bad calls raise before anything runs, naming the argument.
try:
    rmsnorm(x.float(), w)
except kiln_torch.KilnError as e:
    print("a bad call:", e)

ok = errors["rmsnorm"] < 1.6e-2 and errors["gelu_bias"] < 1.6e-2 and errors["cross_entropy"] < 2e-5
print("ok" if ok else "FAILED")
sys.exit(0 if ok else 1)
