#include "cli.h"

#include <algorithm>
#include <cstdio>

namespace kiln::cli {

bool Args::has(const std::string& name) const {
  return std::any_of(options.begin(), options.end(), [&](const auto& o) { return o.first == name; });
}

std::optional<std::string> Args::get(const std::string& name) const {
  std::optional<std::string> v;
  for (const auto& o : options)
    if (o.first == name) v = o.second;
  return v;
}

std::vector<std::string> Args::all(const std::string& name) const {
  std::vector<std::string> v;
  for (const auto& o : options)
    if (o.first == name) v.push_back(o.second);
  return v;
}

Args parseArgs(int argc, char** argv, int first, const std::vector<std::string>& takesValue) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) == 0 && s.size() > 2) {
      std::string body = s.substr(2), name = body, value;
      size_t eq = body.find('=');
      if (eq != std::string::npos) {
        name = body.substr(0, eq);
        value = body.substr(eq + 1);
      } else if (std::find(takesValue.begin(), takesValue.end(), name) != takesValue.end()) {
        if (i + 1 >= argc) throw Error("kiln: option --" + name + " needs a value");
        value = argv[++i];
      }
      a.options.push_back({name, value});
    } else if (s == "-o") {
      if (i + 1 >= argc) throw Error("kiln: option -o needs a file name");
      a.options.push_back({"o", argv[++i]});
    } else if (s == "-h") {
      a.options.push_back({"help", ""});
    } else {
      a.positional.push_back(s);
    }
  }
  return a;
}

std::optional<Args> parseFileCommand(int argc, char** argv, const char* help,
                                     const std::vector<std::string>& takesValue, int& rc) {
  Args a = parseArgs(argc, argv, 1, takesValue);
  if (a.has("help")) {
    std::fputs(help, stdout);
    rc = 0;
    return std::nullopt;
  }
  if (a.positional.size() != 1) {
    std::fputs(help, stderr);
    rc = 2;
    return std::nullopt;
  }
  return a;
}

DimBindings parseDims(const std::vector<std::string>& specs, const std::string& flag) {
  DimBindings dims;
  for (const std::string& spec : specs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("kiln: --" + flag + " '" + spec + "': expected NAME=VALUE, e.g. --" + flag + " N=4096");
    std::string name = spec.substr(0, eq);
    try {
      size_t used = 0;
      long long v = std::stoll(spec.substr(eq + 1), &used);
      if (used != spec.size() - eq - 1 || v < 0) throw std::invalid_argument("");
      dims[name] = v;
    } catch (const std::logic_error&) {
      throw Error("kiln: --" + flag + " '" + spec + "': the value must be a non-negative integer");
    }
  }
  return dims;
}

}  // namespace kiln::cli
