// Access to the kernel templates: the embedded copies, or the files in ARFUSE_TEMPLATE_DIR
// when it is set (for development: edit a .cuh, rerun, no rebuild).
#pragma once

#include <string>
#include <vector>

#include "arfuse/error.hpp"

namespace arfuse::jit {

struct TemplateFile {
  std::string name;
  std::string text;
};

// Throws arfuse::Error when `name` is not a known template.
TemplateFile load_template(const std::string& name);
std::vector<std::string> template_names();

// `root` with every `#include "x.cuh"` expanded once (as #pragma once would), in order of
// first inclusion. The files read are returned in `included`, root first.
std::string expand_includes(const std::string& root, std::vector<TemplateFile>& included);

}  // namespace arfuse::jit
