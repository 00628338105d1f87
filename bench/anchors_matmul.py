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
