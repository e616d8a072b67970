#include "arfuse/target.hpp"

#include <fmt/format.h>

#include <cctype>

#include "arfuse/error.hpp"

namespace arfuse {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool all_alnum_lower(std::string_view s) {
  for (char c : s) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

[[noreturn]] void bad_target(std::string_view name) {
  throw Error(
      fmt::format("unknown target '{}': expected an NVIDIA architecture such as sm_90 "
                  "or sm_90a, or an AMD ISA such as gfx90a, gfx942 or gfx1250",
                  name));
}

}  // namespace

Target Target::parse(std::string_view name) {
  Target t;
  t.name_ = std::string(name);
  if (name.substr(0, 3) == "sm_") {
    std::string_view digits = name.substr(3);
    if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) digits.remove_suffix(1);
    if (!all_digits(digits) || digits.size() < 2 || digits.size() > 3) bad_target(name);
    t.vendor_ = Vendor::nvidia;
    t.generation_ = std::stoi(std::string(digits));
    if (t.generation_ < 70) {
      throw Error(
          fmt::format("target '{}' is too old: arfuse needs sm_70 or later "
                      "(system-scope acquire/release)",
                      name));
    }
    return t;
  }
  if (name.substr(0, 3) == "gfx") {
    std::string_view isa = name.substr(3);
    if (isa.size() < 3 || isa.size() > 4 || !all_alnum_lower(isa) ||
        !std::isdigit(static_cast<unsigned char>(isa[0]))) {
      bad_target(name);
    }
    t.vendor_ = Vendor::amd;
    t.generation_ = std::stoi(std::string(isa.substr(0, isa.size() - 2)));
    return t;
  }
  bad_target(name);
}

int Target::warp_size() const {
  if (vendor_ == Vendor::nvidia) return 32;
  return generation_ >= 10 ? 32 : 64;  // gfx9 (CDNA, GCN) is wave64; gfx10 and later wave32
}

Fp8Format Target::fp8_format() const {
  // gfx940/941/942 (MI300) use the fnuz encoding; gfx950, gfx12 and NVIDIA use OCP e4m3fn.
  if (vendor_ == Vendor::amd && (name_ == "gfx940" || name_ == "gfx941" || name_ == "gfx942")) {
    return Fp8Format::e4m3fnuz;
  }
  return Fp8Format::e4m3fn;
}

bool Target::hardware_fp8() const { return vendor_ == Vendor::nvidia && generation_ >= 89; }
bool Target::hardware_paired_f16() const { return vendor_ == Vendor::nvidia && generation_ >= 80; }
bool Target::programmatic_dependent_launch() const { return vendor_ == Vendor::nvidia && generation_ >= 90; }

const char* to_string(Vendor vendor) { return vendor == Vendor::nvidia ? "nvidia" : "amd"; }
const char* to_string(Fp8Format format) { return format == Fp8Format::e4m3fn ? "e4m3fn" : "e4m3fnuz"; }

}  // namespace arfuse
