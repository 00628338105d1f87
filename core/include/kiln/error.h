// kiln::Error: the one exception type kiln throws for user mistakes and for
// failures it can describe (bad shapes, bad launches, missing driver...).
// Every message names what failed and why; where a user call site is known it
// is part of the message ("at file.cpp:12").
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// "file.cpp:12" for a call site (the directory part is dropped).
std::string formatLocation(const std::source_location& loc);

}  // namespace kiln
