# torch.compile's x*y+z (and x+y) f32 [32768, 4096] beside kiln's exported
# kernels: each launched a few times (for ncu), Triton's cache kept.
import os, sys, torch
sys.path.insert(0, os.environ["K"] + "/anchors")
from kiln_kernels import KilnKernels
M, N = 32768, 4096
x, y, z = (torch.randn(M, N, device="cuda") for _ in range(3))
fma = torch.compile(lambda a, b, c: a * b + c)
add = torch.compile(lambda a, b: a + b)
want = fma(x, y, z); add(x, y); torch.cuda.synchronize()
kk = KilnKernels(os.environ["KILN_KERNELS"])
t = {"x": x, "y": y, "z": z}
outs = kk.outputs("fma x*y+z [32768x4096 float32]"); t.update(outs)
lf = kk.launcher("fma x*y+z [32768x4096 float32]", t)
t2 = {"x": x, "y": y}; o2 = kk.outputs("add [32768x4096 float32]"); t2.update(o2)
la = kk.launcher("add [32768x4096 float32]", t2)
for i in range(3):
    fma(x, y, z); lf(); add(x, y); la()
torch.cuda.synchronize()
print("max |kiln - tc|", (outs["out"] - want).abs().max().item())
