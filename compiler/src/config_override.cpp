#include "config_override.h"

#include <nlohmann/json.hpp>

#include "kiln/error.h"

namespace kiln::compiler {

void applyIntegerOverrides(const std::string& text, const std::string& schedule, const std::string& accepted,
                           const std::function<bool(const std::string& key, int64_t value)>& set) {
  if (text.empty()) return;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw Error("kiln: compile: config override is not JSON: " + std::string(e.what()));
  }
  if (!j.is_object()) throw Error("kiln: compile: config override must be a JSON object, got " + text);
  for (const auto& [key, value] : j.items()) {
    if (!value.is_number_integer()) throw Error("kiln: compile: config override '" + key + "' must be an integer");
    int64_t v = value.get<int64_t>();
    if (!set(key, v))
      throw Error("kiln: compile: config override " + key + " = " + std::to_string(v) + " is not valid for the " +
                  schedule + " schedule (" + accepted + ")");
  }
}

}  // namespace kiln::compiler
