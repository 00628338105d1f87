"""kiln's exported kernels (KILN_EXPORT_KERNELS of bench_pointwise and
bench_reduction: a cubin and a line of kernels.jsonl each), launched with
cuLaunchKernel through ctypes, so that the anchor scripts time kiln's kernel
and torch.compile's with one method (triton.testing.do_bench) in one process."""
import ctypes, json, os

import torch

TORCH_DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "f64": torch.float64,
                "i64": torch.int64, "i32": torch.int32, "bool": torch.bool}

class KilnKernels:
    """The exported kernels by op name (a variant's op is the case's op,
    a space, and its config override)."""

    def __init__(self, folder):
        self.folder = folder
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.by_op = {}
        with open(os.path.join(folder, "kernels.jsonl")) as f:
            for line in f:
                k = json.loads(line)
                self.by_op[k["op"]] = k
        self.modules = []

    def check(self, r, what):
        if r != 0:
            raise RuntimeError(f"{what} failed with CUresult {r}")

    def variants(self, op):
        """Exported ops that are `op` or a variant of it, the case itself first."""
        return sorted((o for o in self.by_op if o == op or o.startswith(op + " {")), key=lambda o: (o != op, o))

    def outputs(self, op):
        """Fresh NaN-filled (or zero, for integers) output tensors of `op`, by name."""
        outs = {}
        for t in self.by_op.get(op, {}).get("tensors", []):
            if t["output"]:
                dt = TORCH_DTYPES[t["dtype"]]
                fill = float("nan") if dt.is_floating_point else 0
                outs[t["name"]] = torch.full(t["shape"], fill, dtype=dt, device="cuda")
        return outs

    def results(self, op, outs):
        """The graph's outputs among `outs` (outputs(op)), without the
        workspace a grid tail writes (its partials and block counter)."""
        ws = {t["name"] for t in self.by_op.get(op, {}).get("tensors", []) if t.get("workspace")}
        return [v for name, v in outs.items() if name not in ws]

    def bind(self, op, names, args):
        """`op`'s launch on `args` (its inputs, by `names`) and fresh outputs:
        (launch, outputs by name); launch is None when `op` was not exported."""
        outs = self.outputs(op)
        tensors = dict(zip(names, args))
        tensors.update(outs)
        return self.launcher(op, tensors), outs

    def launcher(self, op, tensors):
        """A function launching `op`'s kernel on `tensors` (by name), or None."""
        k = self.by_op.get(op)
        if k is None:
            return None
        data = open(os.path.join(self.folder, k["cubin"]), "rb").read()
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(self.cuda.cuModuleLoadData(ctypes.byref(mod), data), "cuModuleLoadData")
        self.modules.append(mod)
        self.check(self.cuda.cuModuleGetFunction(ctypes.byref(fn), mod, k["entry"].encode()), "cuModuleGetFunction")
        grid, block, shared = k["grid"], k["block"], k["shared"]
        if shared > 48 * 1024:  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self.check(self.cuda.cuFuncSetAttribute(fn, 8, ctypes.c_int(shared)), "cuFuncSetAttribute")
        ptrs = [ctypes.c_void_p(tensors[t["name"]].data_ptr()) for t in k["tensors"]]
        params = (ctypes.c_void_p * len(ptrs))(*[ctypes.cast(ctypes.byref(p), ctypes.c_void_p) for p in ptrs])
        cuda = self.cuda

        def launch():
            stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
            r = cuda.cuLaunchKernel(fn, ctypes.c_uint(grid), 1, 1, ctypes.c_uint(block), 1, 1, ctypes.c_uint(shared),
                                    stream, params, None)
            if r != 0:
                raise RuntimeError(f"cuLaunchKernel failed with CUresult {r}")
        launch.keep = (ptrs, params)
        return launch

def from_env():
    folder = os.environ.get("KILN_KERNELS")
    if folder and os.path.exists(os.path.join(folder, "kernels.jsonl")):
        return KilnKernels(folder)
    return None
