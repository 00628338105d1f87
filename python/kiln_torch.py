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

compile() instead compiles a graph at run time, in this process, through
libkiln_jit.so (kiln's facade with its compiler, LLVM hidden inside):

    softmax = kiln_torch.compile(open("softmax.kiln").read(), dims={"N": 4096},
                                 library="build/facade/libkiln_jit.so")
    y = softmax(x)
"""

import ctypes
import functools
import json
import os
import threading

import torch

__all__ = ["KilnError", "Function", "Kernel", "load", "compile"]

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
        lib = library if isinstance(library, ctypes.CDLL) else ctypes.CDLL(str(library))
        try:
            fn = getattr(lib, "kiln_" + name)
            sig_fn = getattr(lib, "kiln_" + name + "_signature")
        except AttributeError:
            raise KilnError(f"kiln: {lib._name} has no ahead-of-time function '{name}' "
                            f"(no symbol kiln_{name}; `kiln aot --name` sets it)") from None
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.POINTER(_Tensor), ctypes.c_int32, ctypes.POINTER(ctypes.c_double),
                       ctypes.c_int32, ctypes.c_void_p]
        sig_fn.restype = ctypes.c_char_p
        self._setup(lib, json.loads(sig_fn().decode()), fn, "ahead-of-time function")

    def _setup(self, lib, signature, invoke, what):
        """`invoke(tensors, num_tensors, scalars, num_scalars, stream)` is the C call."""
        self._lib = lib
        self._what = what
        self._fn = invoke
        lib.kiln_last_error.restype = ctypes.c_char_p
        self.signature = signature
        self.name = self.signature["name"]
        self.inputs = [t for t in self.signature["tensors"] if not t["output"]]
        self.outputs = [t for t in self.signature["tensors"] if t["output"]]
        self.scalars = self.signature["scalars"]
        # What a call needs, worked out once.
        self._tensors = self.signature["tensors"]
        self._n_in = len(self.inputs)
        self._ranks = [len(t["shape"]) for t in self.inputs]
        self._max_rank = max([len(t["shape"]) for t in self._tensors] + [1])
        self._scalar_order = [s["name"] for s in self.scalars]
        self._scalar_names = set(self._scalar_order)
        self._binders, seen = [], set()
        for i, t in enumerate(self.inputs):
            for axis, d in enumerate(t["shape"]):
                if isinstance(d, str) and d not in seen:
                    seen.add(d)
                    self._binders.append((i, axis, d))
        self._out_specs = [(t, tuple(t["shape"]), _TORCH_DTYPES[t["dtype"]]) for t in self.outputs]
        self._local = threading.local()

    def __repr__(self):
        def show(t):
            return f'{t["name"]}: {t["dtype"]}[{", ".join(str(d) for d in t["shape"])}]'
        args = [show(t) for t in self.inputs] + [f'{s["name"]}: {s["dtype"]}' for s in self.scalars]
        return f'kiln_torch.{type(self).__name__} {self.name}({", ".join(args)}) -> ({", ".join(show(t) for t in self.outputs)})'

    def _error(self, what):
        return KilnError(f"kiln: call of {self._what} '{self.name}': {what}")

    def _scratch(self):
        """This thread's argument block: kiln_tensor structs whose shape and
        stride pointers point into one int64 array, filled in place per call."""
        sc = getattr(self._local, "sc", None)
        if sc is None:
            n, r = len(self._tensors), self._max_rank
            args = (_Tensor * n)()
            ints = (ctypes.c_int64 * max(1, 2 * n * r))()
            base = ctypes.addressof(ints)
            for i in range(n):
                args[i].shape = ctypes.cast(base + 8 * (2 * i * r), ctypes.POINTER(ctypes.c_int64))
                args[i].strides = ctypes.cast(base + 8 * ((2 * i + 1) * r), ctypes.POINTER(ctypes.c_int64))
            values = (ctypes.c_double * max(1, len(self.scalars)))()
            sc = self._local.sc = (args, ints, values)
        return sc

    def __call__(self, *inputs, out=None, **scalars):
        if len(inputs) != self._n_in:
            raise self._error(f"{len(inputs)} inputs given, but it takes {len(self.inputs)} "
                              f"({', '.join(t['name'] for t in self.inputs)})")
        if scalars.keys() != self._scalar_names:
            missing = [n for n in self._scalar_order if n not in scalars]
            extra = [k for k in scalars if k not in self._scalar_names]
            raise self._error(("missing scalars " + ", ".join(missing) if missing else "") +
                              ("; " if missing and extra else "") +
                              ("unknown scalars " + ", ".join(extra) if extra else ""))
        for t, x, rank in zip(self.inputs, inputs, self._ranks):
            if not isinstance(x, torch.Tensor):
                raise self._error(f"input '{t['name']}' is a {type(x).__name__}, not a torch.Tensor")
            if x.dim() != rank:
                raise self._error(f"input '{t['name']}' has {x.dim()} dims, but it takes {rank} "
                                  f"({t['dtype']}[{', '.join(str(d) for d in t['shape'])}])")
        device = inputs[0].device if inputs else (out[0].device if out else torch.device("cuda"))
        if device.type != "cuda":
            raise self._error(f"its tensors must be on a CUDA device; input '{self.inputs[0]['name']}' is on {device}")

        if out is None:
            # Dynamic dims from the inputs' shapes (kiln checks them all again).
            dims = {name: inputs[i].shape[axis] for i, axis, name in self._binders}
            out = []
            for t, template, dtype in self._out_specs:
                shape = []
                for d in template:
                    if d.__class__ is str:
                        if d not in dims:
                            raise self._error(f"output '{t['name']}' has dim {d}, which no input binds: pass out=")
                        d = dims[d]
                    shape.append(d)
                out.append(inputs[0].new_empty(shape, dtype=dtype) if inputs else
                           torch.empty(shape, dtype=dtype, device=device))
        else:
            out = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(out) != len(self.outputs):
                raise self._error(f"{len(out)} outputs given, but it has {len(self.outputs)}")
            for t, y in zip(self.outputs, out):
                if not isinstance(y, torch.Tensor) or y.dim() != len(t["shape"]):
                    raise self._error(f"output '{t['name']}' must be a torch.Tensor of {len(t['shape'])} dims "
                                      f"({t['dtype']}[{', '.join(str(d) for d in t['shape'])}])")

        args, ints, values = self._scratch()
        r = self._max_rank
        for i, x in enumerate((*inputs, *out)):
            code = _CODE_OF.get(x.dtype)
            if code is None:
                t = self._tensors[i]
                raise self._error(f"tensor '{t['name']}' is {x.dtype}, a type kiln does not have "
                                  f"(it takes {t['dtype']})")
            nd = x.dim()  # every rank was checked above: at most r
            a = args[i]
            a.data = x.data_ptr()
            a.dtype = code  # a mismatch is kiln's to report
            a.ndim = nd
            o = 2 * i * r
            ints[o:o + nd] = x.shape
            ints[o + r:o + r + nd] = x.stride()
        for j, name in enumerate(self._scalar_order):
            values[j] = scalars[name]

        current = _current_device()
        index = device.index if device.index is not None else current
        if index == current:
            rc = self._fn(args, len(self._tensors), values, len(self._scalar_order), _current_stream(index))
        else:
            with torch.cuda.device(index):  # kiln launches in the current device's context
                rc = self._fn(args, len(self._tensors), values, len(self._scalar_order), _current_stream(index))
        if rc != 0:
            raise KilnError(self._lib.kiln_last_error().decode())
        return out[0] if len(out) == 1 else tuple(out)


def _current_stream(index):
    """PyTorch's current stream on device `index`, as a raw cudaStream_t."""
    return torch.cuda.current_stream(index).cuda_stream


_current_device = torch.cuda.current_device

if hasattr(torch._C, "_cuda_getCurrentRawStream"):  # what Triton's launcher uses: no Stream object
    _current_stream = torch._C._cuda_getCurrentRawStream  # noqa: F811
if hasattr(torch._C, "_cuda_getDevice"):  # torch.cuda.current_device without its Python layers
    _current_device = torch._C._cuda_getDevice  # noqa: F811


_CODES = {"bool": 0, "i32": 1, "i64": 2, "f16": 3, "bf16": 4, "f32": 5}  # kiln/runtime/c_api.h
_CODE_OF = {dt: _CODES[name] for name, dt in _TORCH_DTYPES.items()}


def load(library, name):
    """The ahead-of-time function `name` (kiln aot --name) in the shared library at `library`."""
    return Function(library, name)


class Kernel(Function):
    """A graph compiled at run time by compile(); called like a Function."""

    def __init__(self, lib, handle):
        self._handle = handle
        self._release = lib.kiln_jit_release
        self._setup(lib, json.loads(lib.kiln_jit_signature(handle).decode()),
                    functools.partial(lib.kiln_jit_launch, handle), "run-time kernel")
        self.explain = lib.kiln_jit_explain(handle).decode()

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            self._release(handle)


_JIT = {}


def _jit_library(library):
    path = str(library or os.environ.get("KILN_JIT_LIBRARY", ""))
    if not path:
        raise KilnError("kiln: compile() needs libkiln_jit.so (built as build/facade/libkiln_jit.so): pass "
                        "library= or set KILN_JIT_LIBRARY")
    lib = _JIT.get(path)
    if lib is None:
        lib = ctypes.CDLL(path)
        lib.kiln_jit_compile.restype = ctypes.c_void_p
        lib.kiln_jit_compile.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        for f in (lib.kiln_jit_signature, lib.kiln_jit_explain):
            f.restype = ctypes.c_char_p
            f.argtypes = [ctypes.c_void_p]
        lib.kiln_jit_launch.restype = ctypes.c_int
        lib.kiln_jit_launch.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Tensor), ctypes.c_int32,
                                        ctypes.POINTER(ctypes.c_double), ctypes.c_int32, ctypes.c_void_p]
        lib.kiln_jit_release.restype = None
        lib.kiln_jit_release.argtypes = [ctypes.c_void_p]
        lib.kiln_last_error.restype = ctypes.c_char_p
        _JIT[path] = lib
    return lib


def compile(graph, dims=None, library=None):  # noqa: A001 (kiln's name for it)
    """Compiles a graph at run time, in this process, and returns a callable Kernel.

    `graph` is kiln's text form (a str starting with "kiln.graph v1", or the
    path of a .kiln file; `printGraph` and `kiln check` write it). `dims`
    gives the values the dynamic dims will mostly take ({"N": 4096}): the
    heuristics configure the kernels for them, and other values still run
    (a far-off value builds a variant at its first call). An equal graph
    compiles once per process, and the disk cache keeps it across processes.
    `library` is libkiln_jit.so (else $KILN_JIT_LIBRARY).
    """
    lib = _jit_library(library)
    text = graph
    if isinstance(graph, os.PathLike) or (isinstance(graph, str) and not graph.lstrip().startswith("kiln.graph")):
        with open(graph) as f:
            text = f.read()
    handle = lib.kiln_jit_compile(text.encode(), json.dumps(dims).encode() if dims else None)
    if not handle:
        raise KilnError(lib.kiln_last_error().decode())
    return Kernel(lib, handle)
