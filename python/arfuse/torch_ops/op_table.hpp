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

inline constexpr std::uint32_t kOpTableVersion = 3;

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

// An epilogue_mode argument as the ops need it: the mode, out's row in its own units, the scales'
// shape, and what the messages name (static text).
struct ModeInfo {
  EpilogueMode mode;
  const char* name;  // the quant mode's
  int out_row;
  ScaleShape scales;
  bool packs_fp4;
  bool pads_out;
  bool group_quant;          // group_quant takes the mode (without the mirror)
  const char* scale_name;    // null: the mode reads no scale; else "scale" or "global scale"
  bool global_scale;         // the scale is the global_scale argument (else static_scale)
  const char* padded_modes;  // "none, fp8, fp8_static": the modes that take padded rows
  const char* scale_modes;   // the modes that read a scale
  const char* group_quant_modes;
};

struct OpTable {
  std::uint32_t version;
  std::uint32_t size;
  const Failure* (*communicator)(std::int64_t handle, CommunicatorInfo* info);
  const Failure* (*allreduce_rmsnorm)(const CommunicatorInfo* comm, const AllreduceRmsnormArgs* args, void* stream);
  const Failure* (*allreduce)(const CommunicatorInfo* comm, const AllreduceArgs* args, void* stream);
  const Failure* (*rmsnorm_quant)(int device, const RmsnormQuantArgs* args, void* stream);
  const Failure* (*group_quant)(int device, const GroupQuantArgs* args, void* stream);
  // The mode an epilogue_mode argument names, checked for `hidden` (EpilogueMode::validate), with
  // what the outputs' shapes need: before any output is allocated.
  const Failure* (*describe_mode)(std::int64_t code, int hidden, ModeInfo* info);
  // The format `device` writes; -1 when the caller cannot know the device (tracing): device 0's
  // where a driver is present, e4m3fn otherwise.
  const Failure* (*fp8_dtype)(int device, Fp8Dtype* dtype);
};

}  // namespace arfuse::torch_ops
