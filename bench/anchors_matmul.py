"""cuBLAS (torch.matmul) at the matmul shapes shared/bench/anchors.py lacks:
small M (decode-like) and the nn.Linear layout. Prints one line per case like
anchors.py: median us and TFLOP/s (triton.testing.do_bench)."""
import torch
from triton.testing import do_bench

dev = "cuda"
torch.manual_seed(0)


def report(op, impl, ms, flops):
    print(f"{op:34s} {impl:14s} {ms*1e3:9.1f} us  {flops / (ms * 1e-3) / 1e12:.1f} TFLOP/s", flush=True)


for m in (16, 64, 128):
    a = torch.randn(m, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    report(f"small-M gemm {m}x8192x8192", "cublas", do_bench(lambda: a @ b, warmup=25, rep=200, return_mode="median"),
           2 * m * 8192 * 8192)
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
w = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
report("gemm bf16 b[N,K] 8192x8192x8192", "cublas", do_bench(lambda: a @ w.t(), warmup=25, rep=200, return_mode="median"),
       2 * 8192 ** 3)

# Blocks with matmuls among other ops (bench_matmul's "block" cases): eager
# and torch.compile, bf16, L2 flushed by do_bench.
import math
import torch.nn.functional as F

T = 4096
q = torch.randn(T, 128, device=dev, dtype=torch.bfloat16)
k = torch.randn(T, 128, device=dev, dtype=torch.bfloat16)
scale = 1 / math.sqrt(128)


def attention_scores(q, k):
    return torch.softmax(q @ k.t() * scale, dim=-1)


x = torch.randn(T, 4096, device=dev, dtype=torch.bfloat16)
norm_w = torch.randn(4096, device=dev, dtype=torch.bfloat16)
w1 = torch.randn(11008, 4096, device=dev, dtype=torch.bfloat16) / 64
w2 = torch.randn(4096, 11008, device=dev, dtype=torch.bfloat16) / 64


def rmsnorm(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def mlp_block(x, norm_w, w1, w2):
    return x + F.linear(F.gelu(F.linear(rmsnorm(x, norm_w), w1), approximate="tanh"), w2)


for name, fn, args, flops in (("block attention_scores T4096 d128", attention_scores, (q, k), 2 * T * T * 128),
                              ("block mlp 4096x4096x11008", mlp_block, (x, norm_w, w1, w2), 4 * T * 4096 * 11008)):
    report(name, "eager", do_bench(lambda: fn(*args), warmup=25, rep=200, return_mode="median"), flops)
    compiled = torch.compile(fn)
    compiled(*args)
    report(name, "torch.compile", do_bench(lambda: compiled(*args), warmup=25, rep=200, return_mode="median"), flops)
