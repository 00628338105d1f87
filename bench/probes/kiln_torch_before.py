"""Call kiln kernels compiled ahead of time (`kiln aot`) on PyTorch tensors.

`kiln aot GRAPH -o DIR` writes NAME.cpp; built into a shared library with
kiln_runtime (CMake: `kiln_add_aot(mylib GRAPH ...)` on an
`add_library(mylib SHARED)` target), it exports the C function kiln_NAME
and its signature (kiln/runtime/c_api.h). This module loads such a library
with ctypes and calls it like a PyTorch op:

    import torch, kiln_torch
    softmax = kiln_torch.load("build/libmy_kernels.so", "softmax")
    y = softmax(x)                      # y allocated like x, on x's device
    softmax(x, out=(y,))                # or into given outputs
    loss = cross_entropy(logits, targets)

Inputs are passed in the graph's order, scalars by keyword. Dynamic dims
are bound from the inputs' shapes; outputs are allocated with
torch.empty on the first input's device unless `out` gives them. The
kernels run on PyTorch's current stream of that device, so they order with
PyTorch's own work and can be captured by torch.cuda.graph like any op
(launch once before capturing: a first call loads the kernels, and a graph
with a workspace allocates it). Every argument is checked by kiln before
anything runs: a wrong dtype, shape, stride or alignment raises
KilnError naming the argument; nothing is launched then.

No compiler and no LLVM are in the process: only the library's cubins and
kiln's runtime, which loads the CUDA driver PyTorch already uses.
"""

import ctypes
import json

import torch

__all__ = ["KilnError", "Function", "load"]

_TORCH_DTYPES = {
    "bool": torch.bool,
    "i32": torch.int32,
    "i64": torch.int64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
}


class KilnError(RuntimeError):
    """A call that kiln refused or that failed: the message says why."""


class _Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
    ]


class Function:
    """One ahead-of-time graph in a loaded library, callable on tensors."""

    def __init__(self, library, name):
        self._lib = library if isinstance(library, ctypes.CDLL) else ctypes.CDLL(str(library))
        try:
            self._fn = getattr(self._lib, "kiln_" + name)
            sig_fn = getattr(self._lib, "kiln_" + name + "_signature")
        except AttributeError:
            raise KilnError(f"kiln: {self._lib._name} has no ahead-of-time function '{name}' "
                            f"(no symbol kiln_{name}; `kiln aot --name` sets it)") from None
        self._fn.restype = ctypes.c_int
        self._fn.argtypes = [ctypes.POINTER(_Tensor), ctypes.c_int32, ctypes.POINTER(ctypes.c_double),
                             ctypes.c_int32, ctypes.c_void_p]
        sig_fn.restype = ctypes.c_char_p
        self._lib.kiln_last_error.restype = ctypes.c_char_p
        self.signature = json.loads(sig_fn().decode())
        self.name = self.signature["name"]
        self.inputs = [t for t in self.signature["tensors"] if not t["output"]]
        self.outputs = [t for t in self.signature["tensors"] if t["output"]]
        self.scalars = self.signature["scalars"]

    def __repr__(self):
        def show(t):
            return f'{t["name"]}: {t["dtype"]}[{", ".join(str(d) for d in t["shape"])}]'
        args = [show(t) for t in self.inputs] + [f'{s["name"]}: {s["dtype"]}' for s in self.scalars]
        return f'kiln_torch.Function {self.name}({", ".join(args)}) -> ({", ".join(show(t) for t in self.outputs)})'

    def _error(self, what):
        return KilnError(f"kiln: call of ahead-of-time function '{self.name}': {what}")

    def __call__(self, *inputs, out=None, **scalars):
        if len(inputs) != len(self.inputs):
            raise self._error(f"{len(inputs)} inputs given, but it takes {len(self.inputs)} "
                              f"({', '.join(t['name'] for t in self.inputs)})")
        for t, x in zip(self.inputs, inputs):
            if not isinstance(x, torch.Tensor):
                raise self._error(f"input '{t['name']}' is a {type(x).__name__}, not a torch.Tensor")
        device = inputs[0].device if inputs else (out[0].device if out else torch.device("cuda"))
        if device.type != "cuda":
            raise self._error(f"its tensors must be on a CUDA device; input '{self.inputs[0]['name']}' is on {device}")

        missing = [s["name"] for s in self.scalars if s["name"] not in scalars]
        extra = [k for k in scalars if k not in {s["name"] for s in self.scalars}]
        if missing or extra:
            raise self._error(("missing scalars " + ", ".join(missing) if missing else "") +
                              ("; " if missing and extra else "") +
                              ("unknown scalars " + ", ".join(extra) if extra else ""))

        # Dynamic dims from the inputs' shapes (kiln checks them all again).
        dims = {}
        for t, x in zip(self.inputs, inputs):
            if x.dim() != len(t["shape"]):
                raise self._error(f"input '{t['name']}' has {x.dim()} dims, but it takes {len(t['shape'])} "
                                  f"({t['dtype']}[{', '.join(str(d) for d in t['shape'])}])")
            for d, size in zip(t["shape"], x.shape):
                if isinstance(d, str):
                    dims.setdefault(d, size)

        if out is None:
            out = []
            for t in self.outputs:
                shape = []
                for d in t["shape"]:
                    if isinstance(d, str) and d not in dims:
                        raise self._error(f"output '{t['name']}' has dim {d}, which no input binds: pass out=")
                    shape.append(dims[d] if isinstance(d, str) else d)
                out.append(torch.empty(shape, dtype=_TORCH_DTYPES[t["dtype"]], device=device))
        else:
            out = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(out) != len(self.outputs):
                raise self._error(f"{len(out)} outputs given, but it has {len(self.outputs)}")

        tensors = list(inputs) + out
        keep = []  # the shape and stride arrays live until the call returns
        args = (_Tensor * len(tensors))()
        for i, (t, x) in enumerate(zip(self.signature["tensors"], tensors)):
            if x.dtype not in _KILN_NAMES:
                raise self._error(f"tensor '{t['name']}' is {x.dtype}, a type kiln does not have "
                                  f"(it takes {t['dtype']})")
            code = _CODES[_KILN_NAMES[x.dtype]]  # a mismatch is kiln's to report
            shape = (ctypes.c_int64 * x.dim())(*x.shape)
            strides = (ctypes.c_int64 * x.dim())(*x.stride())
            keep += [shape, strides]
            args[i] = _Tensor(x.data_ptr(), code, x.dim(), shape, strides)
        values = (ctypes.c_double * max(1, len(self.scalars)))(*[float(scalars[s["name"]]) for s in self.scalars])

        with torch.cuda.device(device):
            stream = torch.cuda.current_stream(device).cuda_stream
            rc = self._fn(args, len(tensors), values, len(self.scalars), ctypes.c_void_p(stream))
        if rc != 0:
            raise KilnError(self._lib.kiln_last_error().decode())
        return out[0] if len(out) == 1 else tuple(out)


_KILN_NAMES = {v: k for k, v in _TORCH_DTYPES.items()}
_CODES = {"bool": 0, "i32": 1, "i64": 2, "f16": 3, "bf16": 4, "f32": 5}  # kiln/runtime/c_api.h


def load(library, name):
    """The ahead-of-time function `name` (kiln aot --name) in the shared library at `library`."""
    return Function(library, name)
