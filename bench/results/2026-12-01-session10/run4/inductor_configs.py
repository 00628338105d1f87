"""Compiles anchor cases with torch.compile (the definitions of
bench/anchors_reduction.py), runs each once so that Inductor autotunes, then
prints every Triton kernel's chosen launch config (XBLOCK, R0_BLOCK,
num_warps, num_stages) found among the live CachingAutotuner objects."""
import gc, sys, warnings, torch, torch.nn.functional as F
warnings.filterwarnings("ignore")
from torch._inductor.runtime.triton_heuristics import CachingAutotuner
dev = "cuda"
def rmsnorm(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)
def layernorm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)
def report(tag):
    for o in gc.get_objects():
        try:
            if type(o) is not CachingAutotuner and not isinstance(o, CachingAutotuner): continue
            if getattr(o, "_kiln_seen", False): continue
            o._kiln_seen = True
            cfgs = [(l.config.kwargs, l.config.num_warps, l.config.num_stages) for l in o.launchers]
            print(f"{tag:40s} {o.fn.__name__:60s} {cfgs}", flush=True)
        except ReferenceError:
            continue
for M, N, dt in [(32768, 4096, torch.float32), (4096, 32768, torch.float32), (4096, 32768, torch.bfloat16),
                 (32768, 4096, torch.bfloat16)]:
    x = torch.randn(M, N, device=dev, dtype=dt); w = torch.randn(N, device=dev, dtype=dt); b = torch.randn(N, device=dev, dtype=dt)
    t = f"[{M}x{N} {str(dt).split('.')[-1]}]"
    for name, fn, args in [("rmsnorm", rmsnorm, (x, w)), ("layernorm", layernorm, (x, w, b)),
                           ("softmax", lambda a: torch.softmax(a, -1), (x,)), ("sum", lambda a: a.sum(-1), (x,))]:
        c = torch.compile(fn, dynamic=False)
        for _ in range(3): c(*args)
        torch.cuda.synchronize()
        report(f"{name} {t}")
    torch._dynamo.reset()
print("ok")
