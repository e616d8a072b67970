// Kernels that are not arfuse modules (the bench's copies, the PDL producer), built with NVRTC
// for a target and loaded on a device: one recipe for arfuse-bench and the tests. Header-only;
// never installed.
#pragma once

#include <cstddef>
#include <string>

#include "jit/compiler.hpp"
#include "runtime/device/device.hpp"

#include "pdl_producer.hpp"

namespace arfuse::testing {

// The NVRTC program for `text`, whose entry point is `extern "C"` `name`. The spec only names
// the target (a Source carries one); nothing is rendered from it.
inline jit::Source helper_kernel_source(const Target& target, const std::string& name, const std::string& text) {
  jit::Source src;
  src.spec = jit::KernelSpec::parse("token_quant/h8/bf16/" + target.name());
  src.program_name = name + ".cu";
  src.text = text;
  src.name_expression = name;
  src.options = {"--gpu-architecture=" + target.name()};
  return src;
}

// Compiled and loaded on `device`; the Kernel keeps its module loaded.
inline Kernel load_helper_kernel(const Device& device, const std::string& name, const std::string& text,
                                 int threads = 512) {
  const auto code = jit::nvrtc_compiler()->compile(helper_kernel_source(device.target(), name, text));
  return LoadedModule::load(device, code.payload)->kernel(code.lowered_name, threads);
}

inline Kernel load_producer(const Device& device) {
  return load_helper_kernel(device, kProducerName, kProducerSource, kProducerThreads);
}

// The producer copying `bytes` (a multiple of 16) from `from` to `to` on `stream`.
inline void launch_producer(const Kernel& producer, const void* from, void* to, std::size_t bytes,
                            const Stream& stream) {
  long long n = (long long)(bytes / 16);
  void* params[] = {&from, &to, &n};
  producer.launch(producer_blocks(bytes), stream, params);
}

}  // namespace arfuse::testing
