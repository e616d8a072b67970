#include "arfuse/jit/compiler.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "arfuse/base/error.hpp"

namespace arfuse::jit {

bool Compiler::supports(const Target& target) const {
  if (target.vendor() != vendor()) return false;
  // sm_90a / sm_100f build with the base architecture's compiler support.
  std::string name = target.name();
  if (target.vendor() == Vendor::nvidia && (name.back() == 'a' || name.back() == 'f')) name.pop_back();
  auto targets = supported_targets();
  return std::find(targets.begin(), targets.end(), name) != targets.end();
}

void require_target(const Compiler& compiler, const Target& target) {
  if (compiler.supports(target)) return;
  std::string list;
  for (const auto& t : compiler.supported_targets()) list += (list.empty() ? "" : " ") + t;
  throw UnsupportedTarget(fmt::format("target {} is not supported by {}; it supports: {}",
                                      target.name(), compiler.identity(), list));
}

std::shared_ptr<const Compiler> compiler_for(Vendor vendor) {
  return vendor == Vendor::nvidia ? nvrtc_compiler() : hiprtc_compiler();
}

}  // namespace arfuse::jit
