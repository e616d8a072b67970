// A small command-line parser shared by the tools: --flag, --option VALUE (or --option=VALUE),
// repeatable options, positional arguments, --help. Usage errors throw UsageError (exit 2).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace arfuse::tools {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CommandLine {
 public:
  // `flags` take no value; `options` take one (and may repeat).
  CommandLine(int argc, char** argv, const std::vector<std::string>& flags, const std::vector<std::string>& options);
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string value(const std::string& name, const std::string& fallback = "") const;
  const std::vector<std::string>& values(const std::string& name) const;
  long integer(const std::string& name, long fallback, long min, long max) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // Throws UsageError for a given option not in `allowed`: `what` (e.g. "the fused mode") would
  // ignore it.
  void allow_only(const std::set<std::string>& allowed, const std::string& what) const;

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

// Checks every ARFUSE_* variable, then runs `body`, printing usage and configuration errors
// (exit 2) and other errors (exit 1) to stderr.
int run_tool(const char* name, const char* usage, int (*body)(int, char**), int argc, char** argv);

// A whole number from min to max in decimal digits only (no sign, space or suffix).
std::optional<long> parse_whole(const std::string& text, long min, long max);

// Throws UsageError unless `path` (the value of --`option`) can be written: an existing file this
// user may write, or a new name in an existing folder this user may write. Tools check their output
// files before a long run, whose results would otherwise be lost at its end.
void require_writable_file(const std::string& path, const std::string& option);

std::string human_bytes(unsigned long long bytes);

}  // namespace arfuse::tools
