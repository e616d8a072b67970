// [gpu] tests: an epilogue's outputs read back from device buffers and compared with the
// reference by test::require_epilogue_bytes, the comparison the emulated tests make, so every
// test of an epilogue checks the same outputs the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arfuse/runtime/device/device.hpp"

#include "support.hpp"

namespace arfuse::test {

struct DeviceEpilogueBuffers {
  const DeviceBuffer& residual_out;
  const DeviceBuffer& out;
  const DeviceBuffer& scales;
  const DeviceBuffer& mirror;
};

// Reads back what the reference says the call wrote (out as T elements, FP8 or E2M1 bytes;
// scales as fp32 values or E8M0 bytes; the mirror in the _mirror modes) and compares it.
inline void require_device_epilogue(const DeviceEpilogueBuffers& device, const reference::EpilogueOutputs& want,
                                    const reference::EpilogueConfig& config, int tokens, const std::string& who = "") {
  const std::size_t n = std::size_t(tokens) * std::size_t(config.hidden);
  const std::size_t out_bytes = config.mode.quant == Quant::none ? n * 2 : is_mxfp4(config.mode.quant) ? n / 2 : n;
  const std::size_t scale_bytes = want.scale_bytes.empty() ? want.scales.size() * 4 : want.scale_bytes.size();
  const auto residual_out = device.residual_out.download<std::uint16_t>(n);
  const auto out = device.out.download<std::uint8_t>(out_bytes);
  const auto scales = scale_bytes > 0 ? device.scales.download<std::uint8_t>(scale_bytes) : std::vector<std::uint8_t>();
  const auto mirror =
      writes_mirror(config.mode.quant) ? device.mirror.download<std::uint16_t>(n) : std::vector<std::uint16_t>();
  require_epilogue_bytes({residual_out, out, scales, mirror}, want, config, tokens, who);
}

}  // namespace arfuse::test
