// The block shape for a row of H elements. It depends only on H and the warp size, never on
// the token count, world size, stage or grid, because the RMSNorm reduction tree follows it
// (numeric contract, step 3). The CPU reference model uses the same function.
#pragma once

#include "arfuse/error.hpp"

namespace arfuse::jit {

struct BlockShape {
  int threads;             // a multiple of the warp size, at most 512
  int vectors_per_thread;  // 16-byte vectors (8 elements) per thread
};

constexpr int kElementsPerVector = 8;
constexpr int kMaxThreadsPerBlock = 512;

constexpr BlockShape block_shape(int hidden, int warp_size) {
  const int vectors = hidden / kElementsPerVector;
  const int per_thread = (vectors + kMaxThreadsPerBlock - 1) / kMaxThreadsPerBlock;
  const int needed = (vectors + per_thread - 1) / per_thread;
  const int threads = (needed + warp_size - 1) / warp_size * warp_size;
  return BlockShape{threads, per_thread};
}

}  // namespace arfuse::jit
