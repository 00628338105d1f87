// Internal: a schedule config overridden from JSON ({"threads": 256, ...}),
// what tuning and benchmarks use. One parser for every schedule: each
// schedule says which keys and values it takes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace kiln::compiler {

// Calls `set(key, value)` for every member of the JSON object `text` (empty:
// nothing). `set` returns false for a key or value the schedule does not
// take; that, a value that is not an integer, or text that is not a JSON
// object is a kiln::Error naming the schedule and what it takes (`accepted`).
void applyIntegerOverrides(const std::string& text, const std::string& schedule, const std::string& accepted,
                           const std::function<bool(const std::string& key, int64_t value)>& set);

}  // namespace kiln::compiler
