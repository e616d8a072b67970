// The PDL producer (testing/pdl_producer.hpp) compiled and launched for the [gpu] tests: a copy
// that writes a kernel's input and lets that kernel start before the copy ends.
#pragma once

#include <cstddef>

#include "arfuse/jit/compiler.hpp"
#include "arfuse/jit/render.hpp"
#include "arfuse/runtime/device/device.hpp"

#include "pdl_producer.hpp"

namespace arfuse::test {

inline Kernel compile_producer(const Device& device) {
  jit::Source src;
  src.spec = jit::KernelSpec::parse("token_quant/h8/bf16/" + device.target().name());
  src.program_name = "produce.cu";
  src.text = testing::kProducerSource;
  src.name_expression = testing::kProducerName;
  src.options = {"--gpu-architecture=" + device.target().name()};
  auto code = jit::nvrtc_compiler()->compile(src);
  return LoadedModule::load(device, code.payload)->kernel(code.lowered_name, testing::kProducerThreads);
}

inline void launch_producer(const Kernel& producer, const void* from, void* to, std::size_t bytes,
                            const Stream& stream) {
  long long n = (long long)(bytes / 16);
  void* params[] = {&from, &to, &n};
  producer.launch(testing::producer_blocks(bytes), stream, params);
}

}  // namespace arfuse::test
