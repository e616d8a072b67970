// The signal block each rank owns, shared by device code and the host runtime (plain C++,
// no vendor code). Peers write into it, so its layout is part of the protocol between ranks
// of possibly different builds: change it and you MUST bump kSignalLayoutVersion (the group
// handshake compares it).
#pragma once

#include "host_device.cuh"

namespace arfuse {

inline constexpr int kMaxWorld = 8;
inline constexpr int kMaxBlocks = 1024;
inline constexpr unsigned int kSignalLayoutVersion = 2;

struct Signal {
  // flag[b][r]: the barrier epoch that block b of rank r last announced to this rank.
  unsigned int flag[kMaxBlocks][kMaxWorld];
  // epoch[b]: this rank's barrier counter for block slot b; advanced by the kernel itself, so
  // graph replays need no host update.
  unsigned int epoch[kMaxBlocks];
  // 0, or the first barrier timeout or call mismatch seen by this rank (signal_error_* below).
  unsigned int error;
  unsigned int reserved[31];
  // call[b][r]: the call descriptor block b of rank r published with its entry-barrier
  // arrival (call_descriptor below), compared before any row of rank r is read.
  unsigned long long call[kMaxBlocks][kMaxWorld];
  // With a kCallMismatch error: this rank's descriptor and the differing peer's.
  unsigned long long mismatch_mine;
  unsigned long long mismatch_theirs;
};

// Error word: bit 31 set, kind in bits 24-27, block in bits 8-23, the peer rank in 0-7: the
// one that did not arrive at a barrier, or whose call differs (kCallMismatch).
enum BarrierKind { kBarrierEntry = 1, kBarrierMiddle = 2, kBarrierExit = 3, kCallMismatch = 4 };
ARFUSE_HOST_DEVICE constexpr unsigned int signal_error_code(unsigned int kind, unsigned int block, unsigned int rank) {
  return 0x80000000u | (kind << 24) | ((block & 0xffffu) << 8) | (rank & 0xffu);
}
ARFUSE_HOST_DEVICE constexpr unsigned int signal_error_rank(unsigned int code) { return code & 0xffu; }
ARFUSE_HOST_DEVICE constexpr unsigned int signal_error_block(unsigned int code) { return (code >> 8) & 0xffffu; }
ARFUSE_HOST_DEVICE constexpr unsigned int signal_error_kind(unsigned int code) { return (code >> 24) & 0xfu; }

// What a rank's call is, as its peers compare it: tokens (bits 0-31), hidden / 8 (32-47),
// bf16 (48), quant mode (49-51), norm mode (52), stage - 1 (53), epilogue (54), world (55-58),
// bit 63 set so that no descriptor is 0. Ranks whose calls differ would read rows nobody wrote.
ARFUSE_HOST_DEVICE constexpr unsigned long long call_descriptor(unsigned tokens, unsigned hidden, bool bf16, unsigned quant,
                                                                unsigned norm, unsigned stage, bool epilogue, unsigned world) {
  return (1ull << 63) | tokens | (((unsigned long long)(hidden / 8) & 0xffffu) << 32) | ((unsigned long long)bf16 << 48) |
         ((unsigned long long)(quant & 7u) << 49) | ((unsigned long long)(norm & 1u) << 52) |
         ((unsigned long long)((stage - 1) & 1u) << 53) | ((unsigned long long)epilogue << 54) |
         ((unsigned long long)(world & 15u) << 55);
}
ARFUSE_HOST_DEVICE constexpr unsigned call_tokens(unsigned long long d) { return unsigned(d & 0xffffffffu); }
ARFUSE_HOST_DEVICE constexpr unsigned call_hidden(unsigned long long d) { return unsigned((d >> 32) & 0xffffu) * 8; }
ARFUSE_HOST_DEVICE constexpr bool call_bf16(unsigned long long d) { return (d >> 48) & 1u; }
ARFUSE_HOST_DEVICE constexpr unsigned call_quant(unsigned long long d) { return unsigned((d >> 49) & 7u); }
ARFUSE_HOST_DEVICE constexpr unsigned call_norm(unsigned long long d) { return unsigned((d >> 52) & 1u); }
ARFUSE_HOST_DEVICE constexpr unsigned call_stage(unsigned long long d) { return unsigned((d >> 53) & 1u) + 1; }
ARFUSE_HOST_DEVICE constexpr bool call_epilogue(unsigned long long d) { return (d >> 54) & 1u; }
ARFUSE_HOST_DEVICE constexpr unsigned call_world(unsigned long long d) { return unsigned((d >> 55) & 15u); }

// The pointers a kernel needs to reach every rank's buffers, passed by value.
struct PeerBuffers {
  void* staging[kMaxWorld];
  void* gather[kMaxWorld];
  Signal* signal[kMaxWorld];
};

// The one kernel parameter of fused_ar_kernel; the host fills it (runtime/group.cpp).
struct FusedArgs {
  PeerBuffers peers;
  int rank;
  int tokens;
  const void* residual_in;
  void* residual_out;
  const void* weight;
  float eps;
  void* out;      // T, or fp8 bytes in the quant modes
  float* scales;  // [tokens], quant modes
  void* mirror;   // T [tokens, H], kQuantFp8Mirror
  unsigned long long timeout_ns;
  const void* input;  // this rank's contribution, copied into its staging buffer; null: already there
  int check_call;     // 1: publish and compare call descriptors at the entry barrier (every rank alike)
};

}  // namespace arfuse
