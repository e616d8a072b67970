// NCCL, loaded with dlopen (libnccl.so.2; ARFUSE_NCCL_LIBRARY names another file), for the
// path the custom kernels cannot take: ranks on several nodes, messages above the staging
// capacity, peers that cannot reach each other. Its all-reduce sums in its own order, so
// results on this path are not bit-identical to the custom kernels (docs/numeric-contract.md).
#pragma once

#include <memory>
#include <string>

#include "arfuse/bootstrap.hpp"

#include "jit/kernel_spec.hpp"
#include "runtime/device/device.hpp"

namespace arfuse {

// Empty when NCCL loads in this process, else why not (for a collective decision: every
// rank reports before any rank enters NCCL's initialisation, which has no timeout).
std::string nccl_unavailable_reason();
// "NCCL 2.27.3 (/path/libnccl.so.2)"; throws Unavailable when it does not load.
std::string nccl_description();

// One rank's communicator. Collective: every rank of `bootstrap` constructs one, with this
// rank's device; rank 0's unique id travels through the bootstrap.
class NcclCommunicator {
 public:
  NcclCommunicator(Bootstrap& bootstrap, const Device& device);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Sum of every rank's `count` elements of `dtype`, into `recv` (may equal `send`), on `stream`.
  void allreduce(const void* send, void* recv, std::size_t count, DType dtype, const Stream& stream);
  // For a group that lost a peer: frees the communicator without waiting for the others.
  void abort();

 private:
  struct Comm;
  const Device* device_;
  Comm* comm_ = nullptr;
};

}  // namespace arfuse
