// The calls arfuse's PyTorch ops make into arfuse._arfuse: a table of C functions that the
// extension module fills and the torch extension (ops.cpp) receives once, when arfuse.torch
// loads it. Communicators, their ranks and the per-device contexts live in one place (the
// extension module), and the torch extension links no arfuse library. Both sides are built
// from this header; `version` and `size` refuse a table from another build.
#pragma once

#include <cstdint>

#include "arfuse/epilogue.hpp"
#include "arfuse/group.hpp"
#include "arfuse/modes.hpp"

namespace arfuse::torch_ops {

inline constexpr std::uint32_t kOpTableVersion = 2;

// The FP8 formats a kernel writes, as the ops pass them.
enum class Fp8Dtype : int { e4m3fn = 0, e4m3fnuz = 1 };

// What the ops need to know of a communicator handle: looked up once per call, then passed to
// the call entry.
struct CommunicatorInfo {
  std::int64_t handle = 0;
  Rank* rank = nullptr;  // null for a handle registered for tracing only
  Fp8Dtype fp8 = Fp8Dtype::e4m3fn;
};

// What an entry that failed returns (null on success), valid until the calling thread's next
// entry; the extension module also keeps the exception itself (its class, its ranks) for the
// Python API to raise.
struct Failure {
  const char* message;
  bool bad_argument;  // arfuse::Error or ConfigError: the call's arguments, not the machine
};

struct OpTable {
  std::uint32_t version;
  std::uint32_t size;
  const Failure* (*communicator)(std::int64_t handle, CommunicatorInfo* info);
  const Failure* (*allreduce_rmsnorm)(const CommunicatorInfo* comm, const AllreduceRmsnormArgs* args, void* stream);
  const Failure* (*allreduce)(const CommunicatorInfo* comm, const AllreduceArgs* args, void* stream);
  const Failure* (*rmsnorm_quant)(int device, const RmsnormQuantArgs* args, void* stream);
  const Failure* (*group_quant)(int device, const GroupQuantArgs* args, void* stream);
  // EpilogueMode::validate, before any output is allocated.
  const Failure* (*validate_mode)(const EpilogueMode* mode, int hidden);
  // The format `device` writes; -1 when the caller cannot know the device (tracing): device 0's
  // where a driver is present, e4m3fn otherwise.
  const Failure* (*fp8_dtype)(int device, Fp8Dtype* dtype);
  // arfuse::to_string(Quant), for messages.
  const char* (*quant_name)(Quant quant);
};

// An EpilogueMode as the one int the ops take: quant in bits 0-7, norm 8-11, scale format
// 12-15, scale layout 16-19, group size from bit 32.
inline std::int64_t mode_code(const EpilogueMode& mode) {
  return std::int64_t(mode.quant) | std::int64_t(mode.norm) << 8 | std::int64_t(mode.scale_format) << 12 |
         std::int64_t(mode.scale_layout) << 16 | std::int64_t(mode.group_size) << 32;
}

// False for a code no mode_code makes (a field outside its enum, bits 20-31 set).
inline bool mode_from_code(std::int64_t code, EpilogueMode* mode) {
  const auto field = [code](int shift, int bits) { return int((std::uint64_t(code) >> shift) & ((1u << bits) - 1)); };
  const int quant = field(0, 8), norm = field(8, 4), format = field(12, 4), layout = field(16, 4);
  if (quant > int(Quant::nvfp4_mirror) || norm > int(Norm::gemma) || format > int(ScaleFormat::e8m0) ||
      layout > int(ScaleLayout::swizzled_128x4) || field(20, 12) != 0)
    return false;
  mode->quant = Quant(quant);
  mode->norm = Norm(norm);
  mode->scale_format = ScaleFormat(format);
  mode->scale_layout = ScaleLayout(layout);
  mode->group_size = int(code >> 32);
  return true;
}

}  // namespace arfuse::torch_ops
