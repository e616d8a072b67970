// The template sources compiled into the library (generated from templates/ at build time).
#pragma once

#include <cstddef>
#include <vector>

namespace arfuse::jit {

struct EmbeddedTemplate {
  const char* name;  // file name, e.g. "epilogue.cuh"
  const char* text;
  std::size_t size;
};

const std::vector<EmbeddedTemplate>& embedded_templates();

}  // namespace arfuse::jit
