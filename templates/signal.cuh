// The signal block each rank owns, shared by device code and the host runtime (plain C++,
// no vendor code). Peers write into it, so its layout is part of the protocol between ranks
// of possibly different builds: change it and you MUST bump kSignalLayoutVersion (the group
// handshake compares it).
#pragma once

#include "host_device.cuh"

namespace arfuse {

inline constexpr int kMaxWorld = 8;
inline constexpr int kMaxBlocks = 1024;
inline constexpr unsigned int kSignalLayoutVersion = 1;

struct Signal {
  // flag[b][r]: the barrier epoch that block b of rank r last announced to this rank.
  unsigned int flag[kMaxBlocks][kMaxWorld];
  // epoch[b]: this rank's barrier counter for block slot b; advanced by the kernel itself, so
  // graph replays need no host update.
  unsigned int epoch[kMaxBlocks];
  // 0, or the first barrier timeout seen by this rank (see signal_error_* below).
  unsigned int error;
  unsigned int reserved[31];
};

// Error word: bit 31 set, barrier kind in bits 24-27, block in bits 8-23, missing rank in 0-7.
enum BarrierKind { kBarrierEntry = 1, kBarrierMiddle = 2, kBarrierExit = 3 };
ARFUSE_HOST_DEVICE constexpr unsigned int signal_error_code(unsigned int kind, unsigned int block, unsigned int rank) {
  return 0x80000000u | (kind << 24) | ((block & 0xffffu) << 8) | (rank & 0xffu);
}
ARFUSE_HOST_DEVICE constexpr unsigned int signal_error_rank(unsigned int code) { return code & 0xffu; }
ARFUSE_HOST_DEVICE constexpr unsigned int signal_error_block(unsigned int code) { return (code >> 8) & 0xffffu; }
ARFUSE_HOST_DEVICE constexpr unsigned int signal_error_kind(unsigned int code) { return (code >> 24) & 0xfu; }

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
};

}  // namespace arfuse
