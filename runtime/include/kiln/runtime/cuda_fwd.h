// The CUDA driver's opaque handle types, declared exactly as cuda.h declares
// them (same struct tags), so kiln's public runtime headers can name
// CUcontext, CUmodule, CUfunction, CUstream and CUevent without pulling in
// cuda.h. Including cuda.h as well is fine: C++ allows the identical typedef
// twice.
#pragma once

typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
