import torch, triton
from triton.testing import do_bench
torch.manual_seed(0)
def ln0(x):
    xf = x.float(); m = xf.mean(0, keepdim=True); d = xf - m
    return (d * torch.rsqrt((d * d).mean(0, keepdim=True) + 1e-5)).to(x.dtype)
cases = [("softmax(x,0) f32 8192x1024", lambda x: torch.softmax(x, 0), torch.randn(8192, 1024, device="cuda")),
         ("layernorm(x,0) bf16 8192x4096", ln0, torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16))]
for name, f, x in cases:
    nbytes = 2 * x.numel() * x.element_size()
    for impl, g in (("eager", f), ("torch.compile", torch.compile(f))):
        g(x); torch.cuda.synchronize()
        us = do_bench(lambda: g(x), warmup=25, rep=200) * 1e3
        print(f"{name:32s} {impl:14s} {us:8.1f} us {nbytes / us / 1e6:.3f} TB/s", flush=True)
