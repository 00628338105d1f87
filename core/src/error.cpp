#include "kiln/error.h"

#include <cstring>

namespace kiln {

std::string formatLocation(const std::source_location& loc) {
  const char* file = loc.file_name();
  const char* slash = std::strrchr(file, '/');
  std::string out = slash ? slash + 1 : file;
  out += ':';
  out += std::to_string(loc.line());
  return out;
}

}  // namespace kiln
