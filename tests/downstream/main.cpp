#include <cstdio>

#include <arfuse/jit/render.hpp>

int main() {
  const auto source = arfuse::jit::render(arfuse::jit::KernelSpec::parse("rmsnorm_quant/h6144/bf16/fp8/rms/sm_90"));
  if (source.name_expression.find("rmsnorm_quant_kernel") == std::string::npos) return 1;
  std::printf("downstream: %s\n", source.name_expression.c_str());
  return 0;
}
