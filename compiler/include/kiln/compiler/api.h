// KILN_COMPILER_API marks what libkiln_compiler.so exports. The library is
// built with -fvisibility=hidden and -Wl,--exclude-libs,ALL (LLVM and MLIR
// live inside it, hidden), so anything a caller uses across the library
// boundary needs this mark.
#pragma once

#if defined(KILN_COMPILER_BUILDING)
#define KILN_COMPILER_API __attribute__((visibility("default")))
#else
#define KILN_COMPILER_API
#endif

// kiln::Error is thrown out of the library and caught by callers: give its
// type info default visibility, whatever visibility the including file uses.
#pragma GCC visibility push(default)
#include "kiln/error.h"
#pragma GCC visibility pop
