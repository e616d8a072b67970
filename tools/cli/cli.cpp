#include "cli.hpp"

#include <errno.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "arfuse/error.hpp"
#include "arfuse/settings.hpp"

namespace arfuse::tools {

CommandLine::CommandLine(int argc, char** argv, const std::vector<std::string>& flags,
                         const std::vector<std::string>& options) {
  auto known = [](const std::vector<std::string>& list, const std::string& s) {
    return std::find(list.begin(), list.end(), s) != list.end();
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1), name = name.substr(0, eq), has_value = true;
    }
    if (known(flags, name)) {
      if (has_value) throw UsageError(fmt::format("--{} takes no value", name));
      values_[name].push_back("1");
    } else if (known(options, name)) {
      if (!has_value) {
        if (i + 1 >= argc) throw UsageError(fmt::format("--{} needs a value", name));
        value = argv[++i];
      }
      // An empty value is never meant (an unset shell variable, --cache-dir "$DIR"): every tool
      // refuses it alike instead of reading it as "no value" or "this folder".
      if (value.empty()) throw UsageError(fmt::format("--{} has an empty value; give one", name));
      values_[name].push_back(value);
    } else {
      throw UsageError(fmt::format("unknown option --{}", name));
    }
  }
}

std::string CommandLine::value(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second.back();
}

const std::vector<std::string>& CommandLine::values(const std::string& name) const {
  static const std::vector<std::string> none;
  auto it = values_.find(name);
  return it == values_.end() ? none : it->second;
}

void CommandLine::allow_only(const std::set<std::string>& allowed, const std::string& what) const {
  for (const auto& [name, given] : values_) {
    if (allowed.count(name)) continue;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "--" : ", --") + a;
    throw UsageError(fmt::format("--{} does not go with {}, which takes {}", name, what,
                                 list.empty() ? std::string("no options") : list));
  }
}

std::optional<long> parse_whole(const std::string& text, long min, long max) {
  long v = 0;
  const char* end = text.data() + text.size();
  if (text.empty() || text[0] < '0' || text[0] > '9') return std::nullopt;
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || v < min || v > max) return std::nullopt;
  return v;
}

long CommandLine::integer(const std::string& name, long fallback, long min, long max) const {
  if (!has(name)) return fallback;
  const std::string v = value(name);
  const std::optional<long> n = parse_whole(v, min, max);
  if (!n) throw UsageError(fmt::format("--{} must be a whole number from {} to {}, not '{}'", name, min, max, v));
  return *n;
}

void require_writable_file(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  if (path.empty()) throw UsageError(fmt::format("--{} needs a file name", option));
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (fs::exists(status)) {
    if (fs::is_directory(status)) throw UsageError(fmt::format("--{} {}: this is a folder, not a file", option, path));
    if (access(path.c_str(), W_OK) != 0) {
      throw UsageError(fmt::format("--{} {}: cannot be written ({})", option, path, std::strerror(errno)));
    }
    return;
  }
  const fs::path parent = fs::path(path).parent_path();
  const std::string folder = parent.empty() ? "." : parent.string();
  if (!fs::is_directory(folder, ec)) {
    const bool there = fs::exists(folder, ec);
    throw UsageError(fmt::format("--{} {}: {} {}", option, path, folder, there ? "is not a folder" : "does not exist"));
  }
  if (access(folder.c_str(), W_OK | X_OK) != 0) {
    throw UsageError(
        fmt::format("--{} {}: cannot create a file in {} ({})", option, path, folder, std::strerror(errno)));
  }
}

int run_tool(const char* name, const char* usage, int (*body)(int, char**), int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(usage, stdout);
      return 0;
    }
  }
  try {
    settings::check_all();  // a bad ARFUSE_* value is refused before any work, as a usage error is
    return body(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n(see %s --help)\n", name, e.what(), name);
    return 2;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "%s: configuration error: %s\n", name, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    return 1;
  }
}

std::string human_bytes(unsigned long long bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace arfuse::tools
