#include "jit/compiler.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "arfuse/error.hpp"

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
  throw UnsupportedTarget(
      fmt::format("target {} is not supported by {}; it supports: {}", target.name(), compiler.identity(), list));
}

std::shared_ptr<const Compiler> compiler_for(const Target& target) {
  std::shared_ptr<const Compiler> chosen;
  if (target.vendor() == Vendor::nvidia) {
    chosen = nvrtc_compiler();
  } else {
    std::string hiprtc_refusal;
    try {
      auto hiprtc = hiprtc_compiler();
      if (hiprtc->supports(target)) return hiprtc;
      hiprtc_refusal = fmt::format("{} does not know {}", hiprtc->identity(), target.name());
    } catch (const Unavailable& e) {
      hiprtc_refusal = e.what();
    }
    try {
      chosen = amd_clang_compiler();
    } catch (const Unavailable& e) {
      throw UnsupportedTarget(fmt::format("no compiler for {}: {}; and {}", target.name(), hiprtc_refusal, e.what()));
    }
  }
  require_target(*chosen, target);
  return chosen;
}

}  // namespace arfuse::jit
