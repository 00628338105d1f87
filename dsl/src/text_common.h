// Internal: the helpers that both halves of the graph text form need, the
// printer (text_print.cpp) and the parser (text_parse.cpp, for its messages).
#pragma once

#include <string>
#include <string_view>

#include "kiln/dsl/graph.h"

namespace kiln::detail {

// s in double quotes, with every '"' and backslash escaped by a backslash.
std::string quoted(std::string_view s);
// "dtype[d0, d1, ...]" (no brackets when 0-dim), plus " weak" when weak.
std::string typeText(DType dtype, const Shape& shape, bool weak);

}  // namespace kiln::detail
