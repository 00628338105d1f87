import torch, triton
from triton.testing import do_bench
torch.manual_seed(0)
cases = [("var(x,0) f32 32768x4096", lambda x: torch.var(x, 0), torch.randn(32768, 4096, device="cuda")),
         ("var(x,0) bf16 32768x4096", lambda x: torch.var(x, 0), torch.randn(32768, 4096, device="cuda", dtype=torch.bfloat16)),
         ("std(x) f32 32768x4096", lambda x: torch.std(x), torch.randn(32768, 4096, device="cuda"))]
for name, f, x in cases:
    nbytes = x.numel() * x.element_size()
    for impl, g in (("eager", f), ("torch.compile", torch.compile(f))):
        g(x); torch.cuda.synchronize()
        us = do_bench(lambda: g(x), warmup=25, rep=200) * 1e3
        print(f"{name:32s} {impl:14s} {us:8.1f} us {nbytes / us / 1e6:.3f} TB/s", flush=True)
