// A compile target: an NVIDIA SM architecture (sm_90) or an AMD ISA (gfx942). Everything the
// kernels need to know about it (vendor, warp size, FP8 format) is derived here.
#pragma once

#include <string>
#include <string_view>

#include "arfuse/error.hpp"

namespace arfuse {

enum class Vendor { nvidia, amd };
enum class Fp8Format { e4m3fn, e4m3fnuz };

class ARFUSE_API Target {
 public:
  // "sm_90", "sm_90a", "gfx90a", "gfx942", "gfx1250"; throws arfuse::Error otherwise.
  static Target parse(std::string_view name);

  const std::string& name() const { return name_; }
  Vendor vendor() const { return vendor_; }
  // NVIDIA: major * 10 + minor (90). AMD: the gfx family digits before the last two (9, 10, 12).
  int generation() const { return generation_; }
  int warp_size() const;
  Fp8Format fp8_format() const;
  float fp8_max() const { return fp8_format() == Fp8Format::e4m3fnuz ? 240.0f : 448.0f; }
  // True where the hardware converts f32 to e4m3 (NVIDIA sm_89 and later).
  bool hardware_fp8() const;
  // True where the hardware rounds two f32 to a bf16x2/f16x2 pair in one instruction and has
  // NaN-propagating max (NVIDIA sm_80 and later).
  bool hardware_paired_f16() const;
  // True where a kernel may be launched before the previous one on its stream ends and wait
  // for it itself (programmatic dependent launch: NVIDIA sm_90 and later).
  bool programmatic_dependent_launch() const;

  bool operator==(const Target& other) const { return name_ == other.name_; }
  bool operator!=(const Target& other) const { return !(*this == other); }
  bool operator<(const Target& other) const { return name_ < other.name_; }

 private:
  std::string name_;
  Vendor vendor_ = Vendor::nvidia;
  int generation_ = 0;
};

ARFUSE_API const char* to_string(Vendor vendor);
ARFUSE_API const char* to_string(Fp8Format format);

}  // namespace arfuse
