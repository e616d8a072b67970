// [gpu] tests: an epilogue's outputs read back from device buffers and compared with the
// reference by test::require_epilogue_bytes, the comparison the emulated tests make, so every
// test of an epilogue checks the same outputs the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/device/device.hpp"
#include "runtime/kernel_args.hpp"

#include "support.hpp"

namespace arfuse::test {

struct DeviceEpilogueBuffers {
  const DeviceBuffer& residual_out;
  const DeviceBuffer& out;
  const DeviceBuffer& scales;
  const DeviceBuffer& mirror;
};

// Reads back what the reference says the call wrote (out as T elements, FP8 or E2M1 bytes;
// scales as fp32 values or E8M0 bytes; the mirror with mode.mirror), rows `rows` apart (each
// row's gap checked by packed_rows: the padding zero, the rest untouched), and compares it.
inline void require_device_epilogue(const DeviceEpilogueBuffers& device, const reference::EpilogueOutputs& want,
                                    const reference::EpilogueConfig& config, int tokens, const RowStrides& rows,
                                    const std::string& who = "") {
  const int hidden = config.hidden;
  const std::size_t count = std::size_t(tokens);
  const bool mx = packs_fp4(config.mode.quant);
  const int unit = config.mode.quant == Quant::none ? 2 : 1;
  const int out_row_bytes = mx ? hidden / 2 : hidden * unit;
  const std::size_t scale_bytes = want.scale_bytes.empty() ? want.scales.size() * 4 : want.scale_bytes.size();
  const auto residual_out =
      packed_rows(device.residual_out.download<std::uint16_t>(count * std::size_t(rows.residual_out)), tokens, hidden,
                  rows.residual_out, hidden, who + " residual_out");
  const auto out =
      packed_rows(device.out.download<std::uint8_t>(count * std::size_t(rows.out) * std::size_t(unit)), tokens,
                  out_row_bytes, rows.out * unit, mx ? out_row_bytes : rows.out_width * unit, who + " out");
  const auto scales = scale_bytes > 0 ? device.scales.download<std::uint8_t>(scale_bytes) : std::vector<std::uint8_t>();
  const auto mirror = config.mode.mirror
                          ? packed_rows(device.mirror.download<std::uint16_t>(count * std::size_t(rows.mirror)), tokens,
                                        hidden, rows.mirror, hidden, who + " mirror")
                          : std::vector<std::uint16_t>();
  require_epilogue_bytes({residual_out, out, scales, mirror}, want, config, tokens, who);
}

// The same for contiguous tensors.
inline void require_device_epilogue(const DeviceEpilogueBuffers& device, const reference::EpilogueOutputs& want,
                                    const reference::EpilogueConfig& config, int tokens, const std::string& who = "") {
  RmsnormQuantArgs contiguous;
  contiguous.hidden = config.hidden, contiguous.mode = config.mode;
  require_device_epilogue(device, want, config, tokens, detail::row_strides(contiguous), who);
}

}  // namespace arfuse::test
