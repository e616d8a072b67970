// Access to the kernel templates: the embedded copies, or the files in ARFUSE_TEMPLATE_DIR
// when it is set (for development: edit a .cuh, rerun, no rebuild). The public headers the
// templates include (arfuse/quant_modes.hpp, the mode table) are always the embedded copies:
// the library's host code reads the same table, so a template folder cannot change it.
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

// `roots`, one after another, with every `#include "x.cuh"` expanded once (as #pragma once
// would), in order of first inclusion. The files read are returned in `included`, the first
// root first.
std::string expand_includes(const std::vector<std::string>& roots, std::vector<TemplateFile>& included);

}  // namespace arfuse::jit
