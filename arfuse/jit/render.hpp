// render(spec): the second stage of the pipeline. Gives the complete program text (templates
// expanded, so the compilers need no include paths), the name expression that instantiates
// the kernel, and the ordered compiler options. Everything that can change the compiled code
// is in these three, which is what the cache key hashes.
#pragma once

#include <string>
#include <vector>

#include "arfuse/error.hpp"

#include "jit/block_shape.hpp"
#include "jit/kernel_spec.hpp"
#include "jit/templates.hpp"
#include "jit/tuning.hpp"

namespace arfuse::jit {

struct Source {
  KernelSpec spec;
  std::string program_name;  // e.g. "rmsnorm_quant.cu", for compiler messages
  std::string text;
  std::string name_expression;
  std::vector<std::string> options;
  std::vector<TemplateFile> templates;  // every template the program includes, root first
  BlockShape block;
};

Source render(const KernelSpec& spec);

}  // namespace arfuse::jit
