"""kiln's ahead-of-time kernels called from PyTorch (python/kiln_torch.py).

Usage: python3 tests/torch/test_kiln_torch.py LIBRARY [JIT_LIBRARY]
LIBRARY is libkiln_lesson07.so (examples/CMakeLists.txt): rmsnorm,
gelu_bias, cross_entropy and adamw compiled by `kiln aot`. JIT_LIBRARY is
libkiln_jit.so, for kiln_torch.compile (its case says SKIP without it). Each case draws
fresh random inputs, poisons the outputs it passes, and compares with the
same computation in float64 PyTorch. Exits 77 (skipped, said on stdout)
without torch or a CUDA device, 1 if a case fails.
"""

import os
import random
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

try:
    import torch
except ImportError:
    print("SKIPPED: no torch in this Python")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIPPED: torch sees no CUDA device")
    sys.exit(77)

import kiln_torch  # noqa: E402

LIB = sys.argv[1]
JIT = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("KILN_JIT_LIBRARY", "")
SEED = random.SystemRandom().randrange(1 << 62)
torch.manual_seed(SEED)
dev = torch.device("cuda")
TOL = {torch.bfloat16: 1.6e-2, torch.float16: 2e-3, torch.float32: 2e-5}


def close(name, got, want):
    """got (any dtype) within its dtype's tolerance of want (float64), relative above 1."""
    assert got.shape == want.shape, f"{name}: shape {tuple(got.shape)} vs {tuple(want.shape)}"
    tol = TOL[got.dtype]
    err = ((got.double() - want).abs() / want.abs().clamp(min=1.0))
    bad = int((~(err <= tol)).sum())
    assert bad == 0, f"{name}: {bad} of {got.numel()} values outside {tol} (max error {err.max().item():.3g})"
    return err.max().item()


def poisoned(shape, dtype):
    t = torch.empty(shape, dtype=dtype, device=dev)
    t.view(torch.uint8).fill_(0xFF)  # NaN for floats
    return t


def rmsnorm_ref(x, w, eps=1e-6):
    x = x.double()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.double()


def gelu_ref(x, b):
    # x + b unrounded: kiln computes a bf16 expression in f32 and rounds
    # only its result.
    return torch.nn.functional.gelu(x.double() + b.double(), approximate="tanh")


def case_rmsnorm():
    f = kiln_torch.load(LIB, "rmsnorm")
    for n in (1, 7, 1000, 4096):
        x = torch.randn(n, 4096, dtype=torch.bfloat16, device=dev)
        w = torch.rand(4096, dtype=torch.bfloat16, device=dev) + 0.5
        y = poisoned((n, 4096), torch.bfloat16)
        assert f(x, w, out=(y,)) is y
        close(f"rmsnorm N={n}", y, rmsnorm_ref(x, w))
        close(f"rmsnorm N={n} (allocated)", f(x, w), rmsnorm_ref(x, w))


def case_gelu_bias_side_stream():
    f = kiln_torch.load(LIB, "gelu_bias")
    s = torch.cuda.Stream()
    x = torch.randn(3000, 4096, dtype=torch.bfloat16, device=dev) * 3
    b = torch.randn(4096, dtype=torch.bfloat16, device=dev)
    with torch.cuda.stream(s):
        x2 = x * 2  # torch's work, then kiln's, ordered on the side stream
        y = f(x2, b)
    s.synchronize()
    close("gelu_bias on a side stream", y, gelu_ref(x2, b))


def case_cross_entropy():
    f = kiln_torch.load(LIB, "cross_entropy")
    for n in (1, 100, 1024):
        logits = torch.randn(n, 32768, dtype=torch.bfloat16, device=dev) * 4
        targets = torch.randint(0, 32768, (n,), dtype=torch.int64, device=dev)
        loss = f(logits, targets)
        want = torch.nn.functional.cross_entropy(logits.double(), targets)
        assert loss.dim() == 0 and loss.dtype == torch.float32
        close(f"cross_entropy N={n}", loss, want)


def case_adamw_scalars():
    f = kiln_torch.load(LIB, "adamw")
    n = 1000003
    p, g, m = (torch.randn(n, device=dev) for _ in range(3))
    v = torch.rand(n, device=dev)
    lr, b1, b2, eps, wd, step = 1e-3, 0.9, 0.999, 1e-8, 0.01, 5
    new_p, new_m, new_v = f(p, g, m, v, lr=lr, beta1=b1, beta2=b2, eps=eps, weight_decay=wd, step=step)
    P, G, M, V = (t.double() for t in (p, g, m, v))
    M2 = b1 * M + (1 - b1) * G
    V2 = b2 * V + (1 - b2) * G * G
    P2 = P * (1 - lr * wd) - lr / (1 - b1 ** step) * M2 / (V2.sqrt() / (1 - b2 ** step) ** 0.5 + eps)
    close("adamw new_exp_avg", new_m, M2)
    close("adamw new_exp_avg_sq", new_v, V2)
    close("adamw new_param", new_p, P2)


def case_torch_cuda_graph():
    norm, act = kiln_torch.load(LIB, "rmsnorm"), kiln_torch.load(LIB, "gelu_bias")
    x = torch.randn(64, 4096, dtype=torch.bfloat16, device=dev)
    w = torch.rand(4096, dtype=torch.bfloat16, device=dev) + 0.5
    b = torch.randn(4096, dtype=torch.bfloat16, device=dev)
    y = torch.empty_like(x)
    z = torch.empty_like(x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside the capture, as torch asks
        norm(x, w, out=(y,))
        act(y, b, out=(z,))
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        norm(x, w, out=(y,))
        act(y, b, out=(z,))
    for replay in range(3):
        x.copy_(torch.randn(64, 4096, dtype=torch.bfloat16, device=dev))
        z.view(torch.uint8).fill_(0xFF)
        graph.replay()
        torch.cuda.synchronize()
        # Each kernel against the reference of its own inputs: z from the
        # y the first kernel wrote (a y one bf16 ulp off the reference's
        # rounding moved z by up to 0.017 of max(|z|, 1), session 41).
        close(f"torch.cuda.graph replay {replay}: y", y, rmsnorm_ref(x, w))
        close(f"torch.cuda.graph replay {replay}: z", z, gelu_ref(y, b))


def expect_error(what, fn, *needles):
    try:
        fn()
    except kiln_torch.KilnError as e:
        msg = str(e)
        for n in needles:
            assert n in msg, f"{what}: the message lacks {n!r}: {msg}"
        return msg
    raise AssertionError(f"{what}: no KilnError")


def case_errors():
    f = kiln_torch.load(LIB, "rmsnorm")
    x = torch.randn(8, 4096, dtype=torch.bfloat16, device=dev)
    w = torch.ones(4096, dtype=torch.bfloat16, device=dev)
    print("   ", expect_error("wrong dtype", lambda: f(x.float(), w), "'x'", "f32", "bf16"))
    print("   ", expect_error("wrong width", lambda: f(x[:, :4000], w), "'x'"))
    print("   ", expect_error("non-contiguous", lambda: f(torch.randn(4096, 8, dtype=torch.bfloat16, device=dev).t(), w),
                                "'x'"))
    print("   ", expect_error("output overlapping an input", lambda: f(x, w, out=(x,)), "'y'"))
    print("   ", expect_error("a CPU tensor", lambda: f(x.cpu(), w), "CUDA"))
    print("   ", expect_error("float64", lambda: f(x.double(), w), "float64"))
    adamw = kiln_torch.load(LIB, "adamw")
    p = torch.randn(1000, device=dev)
    print("   ", expect_error("missing scalar", lambda: adamw(p, p, p, p, lr=1), "beta1"))
    print("   ", expect_error("wrong rank", lambda: adamw(x.float(), p, p, p, lr=1, beta1=0.9, beta2=0.99, eps=1e-8,
                                                          weight_decay=0, step=1), "'param'", "2 dims"))
    print("   ", expect_error("no such function", lambda: kiln_torch.load(LIB, "nope"), "nope"))
    # Nothing ran: the poisoned output is untouched.
    y = poisoned((8, 4096), torch.bfloat16)
    expect_error("wrong weight", lambda: f(x, w[:100], out=(y,)), "'weight'")
    assert bool(torch.isnan(y.float()).all()), "a refused call wrote its output"


def case_jit_compile():
    if not JIT:
        print("SKIP case_jit_compile: no libkiln_jit.so given")
        return
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "graphs")
    softmax = kiln_torch.compile(os.path.join(here, "softmax.kiln"), dims={"N": 4096}, library=JIT)
    assert "row_reduction" in softmax.explain, softmax.explain
    for n in (1, 333, 4096):
        x = torch.randn(n, 4096, dtype=torch.bfloat16, device=dev) * 4
        close(f"compiled softmax N={n}", softmax(x), torch.softmax(x.double(), -1))
    # A graph written here, with a dynamic row length and a far-off call.
    rows = kiln_torch.compile("""kiln.graph v1
%0 = input "x" : f32[R, C]
%1 = input "w" : f32[C]
%2 = mul %0, %0 : f32[R, C]
%3 = mean %2 {axes = [1], keepdim = true} : f32[R, 1]
%4 = const 1e-5 : f32 weak
%5 = add %3, %4 : f32[R, 1]
%6 = rsqrt %5 : f32[R, 1]
%7 = mul %0, %6 : f32[R, C]
%8 = mul %7, %1 : f32[R, C]
output "y" = %8
""", dims={"C": 1024}, library=JIT)
    for r, c in ((64, 1024), (7, 50000)):
        x = torch.randn(r, c, device=dev)
        w = torch.rand(c, device=dev) + 0.5
        want = x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-5) * w.double()
        close(f"compiled rmsnorm f32 {r}x{c}", rows(x, w), want)
    print("   ", expect_error("bad graph text", lambda: kiln_torch.compile("kiln.graph v1\n%0 = nonsense", library=JIT),
                                "nonsense"))
    print("   ", expect_error("bad call", lambda: softmax(torch.randn(8, 4096, device=dev)), "'x'", "bf16"))


CASES = [case_rmsnorm, case_gelu_bias_side_stream, case_cross_entropy, case_adamw_scalars, case_torch_cuda_graph,
         case_errors, case_jit_compile]

if __name__ == "__main__":
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, seed {SEED}")
    failed = 0
    for case in CASES:
        try:
            case()
            print(f"PASS {case.__name__}")
        except Exception:  # noqa: BLE001
            failed += 1
            print(f"FAIL {case.__name__}\n{traceback.format_exc()}")
    print(f"{len(CASES) - failed} of {len(CASES)} passed")
    sys.exit(1 if failed else 0)
