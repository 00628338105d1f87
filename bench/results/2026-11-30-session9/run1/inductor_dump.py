"""Compiles a few anchor cases with torch.compile (same definitions as
bench/anchors_*.py) so that Inductor's generated Triton source and PTX land
in TORCHINDUCTOR_CACHE_DIR, to read its configs."""
import torch, torch.nn.functional as F
dev = "cuda"
def rmsnorm(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)
def layernorm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)
for M, N, dt in [(32768, 4096, torch.float32), (4096, 32768, torch.float32), (4096, 32768, torch.bfloat16)]:
    x = torch.randn(M, N, device=dev, dtype=dt); w = torch.randn(N, device=dev, dtype=dt); b = torch.randn(N, device=dev, dtype=dt)
    torch.compile(rmsnorm, dynamic=False)(x, w); torch.compile(layernorm, dynamic=False)(x, w, b)
    torch.compile(lambda a: torch.softmax(a, -1), dynamic=False)(x)
    torch.compile(lambda a: a.sum(-1), dynamic=False)(x)
    torch._dynamo.reset()
x, y, z = (torch.randn(32768, 4096, device=dev) for _ in range(3))
torch.compile(lambda a, c, d: a * c + d, dynamic=False)(x, y, z)
torch.cuda.synchronize()
print("ok")
