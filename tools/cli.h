// Small shared pieces of the `kiln` command-line tool: argument scanning
// and the subcommand table.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/dsl/reference.h"

namespace kiln::cli {

struct Args {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> options;  // --name[=value]
  bool has(const std::string& name) const;
  std::optional<std::string> get(const std::string& name) const;
  std::vector<std::string> all(const std::string& name) const;
};

// Parses argv after the subcommand. Options taking a value accept both
// "--name=value" and "--name value"; `takesValue` lists those.
Args parseArgs(int argc, char** argv, int first, const std::vector<std::string>& takesValue);

// Parses a subcommand that takes exactly one FILE. Returns nullopt when the
// command is done already: --help printed (rc 0) or usage printed (rc 2).
std::optional<Args> parseFileCommand(int argc, char** argv, const char* help,
                                     const std::vector<std::string>& takesValue, int& rc);

// "--dim N=4096" values into bindings (kiln::Error on a malformed one).
DimBindings parseDims(const std::vector<std::string>& specs, const std::string& flag = "dim");

struct Command {
  std::string name;
  std::string summary;
  std::string help;
  std::function<int(int, char**)> run;  // argv[0] is the subcommand name
};

int runCheck(int argc, char** argv);
int runEval(int argc, char** argv);
int runCompile(int argc, char** argv);
int runSamples(int argc, char** argv);
int runCache(int argc, char** argv);
int runAot(int argc, char** argv);
extern const char* kCacheHelp;
extern const char* kAotHelp;
extern const char* kSamplesHelp;
extern const char* kCompileHelp;
extern const char* kCheckHelp;
extern const char* kEvalHelp;

}  // namespace kiln::cli
