// The graph's text form: line-oriented, versioned, canonical. Equal graphs
// print equal text whatever the order their unrelated nodes were built in;
// parse(print(g)) prints the same text again. Tools read it and cache keys
// hash it.
//
//   kiln.graph v1
//   %0 = input "x" : bf16[N, 4096]
//   %1 = input "b" : bf16[4096]
//   %2 = scalar "alpha" : f32 weak
//   %3 = add %0, %1 : bf16[N, 4096]
//   %4 = const 0.5 : f32 weak
//   %5 = mul %3, %4 : bf16[N, 4096]
//   %6 = sum %5 {axes = [1], keepdim = true} : f32[N, 1]
//   output "y" = %5
//
// Grammar (one statement a line; '#' starts a comment; blank lines ignored):
//   header    := 'kiln.graph' 'v1'
//   node      := '%'INT '=' opname operands? attrs? ':' type ('weak')?
//   operands  := '%'INT (',' '%'INT)*
//   attrs     := '{' key '=' value (',' key '=' value)* '}'
//   type      := dtype ('[' dim (',' dim)* ']')?      (no brackets: 0-dim)
//   dim       := INT | IDENT
//   output    := 'output' STRING '=' '%'INT
// input/scalar take a STRING name before the ':'; const takes a number
// (decimal, 'inf', '-inf', 'nan'); attributes are the op's (axes, keepdim,
// correction, axis, transA, transB, perm, start, end, step). Node numbers
// must be 0, 1, 2... in order; operands must refer to earlier nodes.
#pragma once

#include <string>
#include <string_view>

#include "kiln/dsl/graph.h"

namespace kiln {

inline constexpr std::string_view kGraphTextHeader = "kiln.graph v1";

std::string printGraph(const Graph& g);
// Parses and validates (every node goes through the same checks as the DSL).
// Errors are kiln::Error "<source>:<line>:<col>: expected ..., found ...".
Graph parseGraph(std::string_view text, std::string_view sourceName = "<text>");
Graph parseGraphFile(const std::string& path);

}  // namespace kiln
