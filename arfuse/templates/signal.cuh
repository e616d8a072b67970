// The signal block each rank owns, shared by device code and the host runtime (plain C++,
// no vendor code). Peers write into it, so its layout is part of the protocol between ranks
// of possibly different builds: change it and you MUST bump kSignalLayoutVersion (the group
// handshake compares it).
#pragma once

#include "codes.cuh"
#include "host_device.cuh"
#include "limits.cuh"

namespace arfuse {

inline constexpr unsigned int kSignalLayoutVersion = 2;

// A barrier flag carries two things in one 64-bit word, so that one release store publishes
// both and one acquire load reads both: the barrier epoch, in bits 0-12, and the sender's call
// (call_descriptor), in bits 13-63. Thirteen bits of epoch are plenty: a peer's flag is never
// more than one barrier away from ours, and epochs compare by wrapped difference.
inline constexpr int kEpochBits = 13;
inline constexpr unsigned long long kEpochMask = (1ull << kEpochBits) - 1;

struct Signal {
  // flag[b][r]: what block b of rank r last announced to this rank (epoch and call, above).
  unsigned long long flag[kMaxBlocks][kMaxWorld];
  // epoch[b]: this rank's barrier counter for block slot b; advanced by the kernel itself, so
  // graph replays need no host update.
  unsigned int epoch[kMaxBlocks];
  // 0, or the first barrier timeout or call mismatch seen by this rank (signal_error_* below).
  unsigned int error;
  unsigned int reserved[31];
  // With a kCallMismatch error: this rank's call and the differing peer's (call_descriptor).
  unsigned long long mismatch_mine;
  unsigned long long mismatch_theirs;
};

// Whether a flag shows `epoch` (or the barrier after it): the sign of the 13-bit difference.
ARFUSE_HOST_DEVICE constexpr bool epoch_reached(unsigned long long flag, unsigned int epoch) {
  return int((unsigned int)(flag - epoch) << (32 - kEpochBits)) >= 0;
}

// Error word: bit 31 set, kind in bits 24-27, block in bits 8-23, the peer rank in 0-7: the
// one that did not arrive at a barrier, or whose call differs (kCallMismatch).
enum BarrierKind { kBarrierEntry = 1, kBarrierMiddle = 2, kBarrierExit = 3, kCallMismatch = 4 };
ARFUSE_HOST_DEVICE constexpr unsigned int signal_error_code(unsigned int kind, unsigned int block, unsigned int rank) {
  return 0x80000000u | (kind << 24) | ((block & 0xffffu) << 8) | (rank & 0xffu);
}
ARFUSE_HOST_DEVICE constexpr unsigned int signal_error_rank(unsigned int code) { return code & 0xffu; }
ARFUSE_HOST_DEVICE constexpr unsigned int signal_error_block(unsigned int code) { return (code >> 8) & 0xffffu; }
ARFUSE_HOST_DEVICE constexpr unsigned int signal_error_kind(unsigned int code) { return (code >> 24) & 0xfu; }

// What a rank's call is, as its peers compare it: its tokens, hidden, dtype, quant code, norm,
// stage and whether it runs the epilogue, with fp8_group's group size and scale format (NVFP4's
// scale layout in the format's field, 1 for swizzled), in the fields of codes.cuh. The world size
// is the group's, agreed at creation. Ranks whose calls differ would read rows nobody wrote, or
// (group size, scale format, layout) write different bytes on different ranks. A call has
// tokens >= 1 (0 launches nothing), so 0 can mean "not checked"; a group refuses max_tokens above
// kMaxCallTokens.
inline constexpr unsigned kMaxCallTokens = unsigned(codes::TokensBits::mask());
ARFUSE_HOST_DEVICE constexpr unsigned long long call_descriptor(unsigned tokens, unsigned hidden, bool bf16,
                                                                unsigned quant, unsigned norm, unsigned stage,
                                                                bool epilogue, unsigned group = 0,
                                                                unsigned scale_format = 0) {
  using namespace codes;
  return TokensBits::put(tokens) | GroupBits::put(group_code(group)) | ScaleFormatBits::put(scale_format) |
         HiddenBits::put(hidden_code(hidden)) | Bf16Bits::put(bf16) | QuantBits::put(quant) | NormBits::put(norm) |
         StageBits::put(stage - 1) | EpilogueBits::put(epilogue);
}
ARFUSE_HOST_DEVICE constexpr unsigned call_tokens(unsigned long long d) { return codes::TokensBits::get(d); }
ARFUSE_HOST_DEVICE constexpr unsigned call_group(unsigned long long d) {
  return codes::group_of_code(codes::GroupBits::get(d));
}
ARFUSE_HOST_DEVICE constexpr unsigned call_scale_format(unsigned long long d) { return codes::ScaleFormatBits::get(d); }
ARFUSE_HOST_DEVICE constexpr unsigned call_hidden(unsigned long long d) {
  return codes::hidden_of_code(codes::HiddenBits::get(d));
}
ARFUSE_HOST_DEVICE constexpr bool call_bf16(unsigned long long d) { return codes::Bf16Bits::get(d); }
ARFUSE_HOST_DEVICE constexpr unsigned call_quant(unsigned long long d) { return codes::QuantBits::get(d); }
ARFUSE_HOST_DEVICE constexpr unsigned call_norm(unsigned long long d) { return codes::NormBits::get(d); }
ARFUSE_HOST_DEVICE constexpr unsigned call_stage(unsigned long long d) { return codes::StageBits::get(d) + 1; }
ARFUSE_HOST_DEVICE constexpr bool call_epilogue(unsigned long long d) { return codes::EpilogueBits::get(d); }
static_assert(codes::kCallDescriptorBits + kEpochBits <= 64 &&
                  (call_descriptor(kMaxCallTokens, 32768, true, 15, 1, 2, true, 128, 3) >>
                   codes::kCallDescriptorBits) == 0,
              "a call descriptor must fit above the epoch bits of a flag");
static_assert(call_group(call_descriptor(1, 8, true, 3, 0, 1, true, 64)) == 64, "group code round trip");

// The pointers a kernel needs to reach every rank's buffers, passed by value.
struct PeerBuffers {
  void* staging[kMaxWorld];
  void* gather[kMaxWorld];
  Signal* signal[kMaxWorld];
};

// Where a captured call's kernel (the spec's graph_inputs) reads each rank's rows: one slot per
// call captured into a graph, in the rank's own signal allocation, right after its Signal.
// rows[r] is rank r's input in this rank's address space once the graph's inputs are registered
// (Group::register_graph_inputs), null before that and where rank r's input cannot be read where
// it lies: then rank r copies it into its staging buffer and every rank reads it there, as an
// eager call does. Local to its rank: no peer reads it, so it is no part of the protocol.
struct InputSlot {
  const void* rows[kMaxWorld];
};
inline constexpr int kMaxGraphCalls = 1 << 20;  // slots a rank may have (GroupOptions::graph_calls)

ARFUSE_HOST_DEVICE inline const InputSlot* input_slots(const Signal* signal) {
  return reinterpret_cast<const InputSlot*>(signal + 1);
}

// The one kernel parameter of fused_ar_kernel; the host fills it (runtime/launch.cpp).
struct FusedArgs {
  PeerBuffers peers;
  int rank;
  int tokens;
  const void* residual_in;
  void* residual_out;
  const void* weight;
  float eps;
  void* out;     // T, or fp8 bytes in the quant modes
  void* scales;  // per-token FP8 fp32 [tokens]; group FP8 fp32 or E8M0, MXFP4 E8M0, NVFP4 E4M3 (strides below)
  void* mirror;  // T [tokens, H], the _mirror modes
  unsigned long long timeout_ns;
  const void* input;       // this rank's contribution, copied into its staging buffer; null: already there
  int check_call;          // 1: publish and compare call descriptors at the entry barrier (every rank alike)
  int scale_row_stride;    // scales between rows (1 per-token; groups per row, or 1 column-major)
  int scale_group_stride;  // scales between a row's groups (1 row-major; tokens column-major; 0: NVFP4 swizzled)
  RowStrides strides;      // of the caller's tensors; the staging and gather buffers are contiguous
  unsigned input_slot;     // the graph_inputs kernels: the call's InputSlot in the rank's table
  // fp8_static: the scale (q = fp8(y * (1 / scale))); nvfp4: the global scale. Read by the kernel,
  // so a graph replays with whatever the pointer holds.
  const float* quant_scale;
};

// The kernels read these structs as laid out by the device compiler; pin the host's view (the
// host build checks, where offsetof needs no toolkit header).
#if !defined(ARFUSE_VENDOR_NVIDIA) && !defined(ARFUSE_VENDOR_AMD)
static_assert(__builtin_offsetof(Signal, epoch) == kMaxBlocks * kMaxWorld * 8, "Signal layout");
static_assert(__builtin_offsetof(Signal, error) == kMaxBlocks * kMaxWorld * 8 + kMaxBlocks * 4, "Signal layout");
static_assert(__builtin_offsetof(Signal, mismatch_mine) == __builtin_offsetof(Signal, error) + 32 * 4, "Signal layout");
static_assert(sizeof(Signal) == __builtin_offsetof(Signal, mismatch_mine) + 16, "Signal layout");
static_assert(sizeof(Signal::reserved) / 4 >= kMaxWorld, "the write test needs a reserved word per rank");
static_assert(sizeof(PeerBuffers) == 3 * kMaxWorld * 8, "PeerBuffers layout");
static_assert(__builtin_offsetof(FusedArgs, rank) == sizeof(PeerBuffers), "FusedArgs layout");
static_assert(__builtin_offsetof(FusedArgs, timeout_ns) == sizeof(PeerBuffers) + 64, "FusedArgs layout");
static_assert(__builtin_offsetof(FusedArgs, input) == sizeof(PeerBuffers) + 72, "FusedArgs layout");
static_assert(__builtin_offsetof(FusedArgs, check_call) == sizeof(PeerBuffers) + 80, "FusedArgs layout");
static_assert(__builtin_offsetof(FusedArgs, scale_group_stride) == sizeof(PeerBuffers) + 88, "FusedArgs layout");
static_assert(__builtin_offsetof(FusedArgs, strides) == sizeof(PeerBuffers) + 92, "FusedArgs layout");
static_assert(sizeof(RowStrides) == 24, "RowStrides layout");
// In what was padding before quant_scale: the other kernels' parameter is as it was.
static_assert(__builtin_offsetof(FusedArgs, input_slot) == sizeof(PeerBuffers) + 116, "FusedArgs layout");
static_assert(__builtin_offsetof(FusedArgs, quant_scale) == sizeof(PeerBuffers) + 120, "FusedArgs layout");
static_assert(sizeof(FusedArgs) == sizeof(PeerBuffers) + 128, "FusedArgs layout");
static_assert(sizeof(Signal) % alignof(InputSlot) == 0, "the slot table follows the Signal");
#endif

}  // namespace arfuse
