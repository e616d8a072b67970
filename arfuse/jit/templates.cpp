#include "jit/templates.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>

#include "arfuse/error.hpp"
#include "arfuse/settings.hpp"

#include "base/trusted_folder.hpp"
#include "jit/embedded_templates.hpp"

namespace arfuse::jit {
namespace {

// Far more than any template; a larger file is not one.
constexpr std::size_t kMaxTemplateBytes = 4 << 20;

// A template from ARFUSE_TEMPLATE_DIR: compiled into kernels, so held to the rule for code
// (base/trusted_folder.hpp) and read through the descriptor that was checked. The folder itself
// was checked when the setting was read (settings.cpp, a "folder"); the walk to the file checks
// it again as a parent.
std::string read_template(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  FileDescriptor fd;
  std::string why, text;
  if (!open_trusted(path, Trusted::file, fd, why)) {
    throw ConfigError(fmt::format("ARFUSE_TEMPLATE_DIR={}: {} is not used: {}", dir, path, why));
  }
  if (!read_bounded(fd.get(), kMaxTemplateBytes, text, why)) {
    throw ConfigError(fmt::format("ARFUSE_TEMPLATE_DIR={}: {} cannot be read: {}", dir, path, why));
  }
  return text;
}

// The name in `#include "name"`, or empty when the line is no such include.
std::string quoted_include(const std::string& line) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos || line.compare(i, 8, "#include") != 0) return {};
  size_t open = line.find('"', i + 8);
  size_t close = open == std::string::npos ? open : line.find('"', open + 1);
  if (close == std::string::npos) return {};
  return line.substr(open + 1, close - open - 1);
}

void expand(const std::string& name, std::vector<TemplateFile>& included, std::string& out) {
  for (const auto& f : included) {
    if (f.name == name) return;
  }
  included.push_back(load_template(name));
  std::istringstream lines(included.back().text);
  out += fmt::format("#line 1 \"{}\"\n", name);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    std::string child = quoted_include(line);
    if (child.empty()) {
      out += line == "#pragma once" ? "" : line;
      out += '\n';
      continue;
    }
    expand(child, included, out);
    out += fmt::format("#line {} \"{}\"\n", number + 1, name);
  }
}

}  // namespace

std::vector<std::string> template_names() {
  std::vector<std::string> names;
  for (const auto& t : embedded_templates()) names.push_back(t.name);
  return names;
}

TemplateFile load_template(const std::string& name) {
  for (const auto& t : embedded_templates()) {
    if (name != t.name) continue;
    const bool public_header = name.rfind("arfuse/", 0) == 0;
    if (const auto dir = settings::text("ARFUSE_TEMPLATE_DIR"); dir && !public_header) {
      return TemplateFile{name, read_template(*dir, name)};
    }
    return TemplateFile{name, std::string(t.text, t.size)};
  }
  std::string known;
  for (const auto& n : template_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error(fmt::format("unknown template '{}': the templates are {}", name, known));
}

std::string expand_includes(const std::vector<std::string>& roots, std::vector<TemplateFile>& included) {
  included.clear();
  std::string out;
  for (const auto& root : roots) expand(root, included, out);
  return out;
}

}  // namespace arfuse::jit
