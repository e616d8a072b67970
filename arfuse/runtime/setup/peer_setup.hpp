// The steps by which the ranks of a group that has a bootstrap (one rank per process, or per
// thread) find and test each other's buffers. Internal to runtime/group.cpp; declared here so
// that the CPU tests can drive the parts that need no GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arfuse/bootstrap.hpp"

#include "runtime/device/device.hpp"
#include "templates/signal.cuh"

namespace arfuse::detail {

// What a rank tells its peers about itself.
struct RankIdentity {
  std::string host, boot_id;                                 // one node: both equal
  std::string process;                                       // random per process: equal means one address space
  std::string pci_bus_id;                                    // the physical GPU
  int ordinal = 0;                                           // the device ordinal in its own process
  std::uint64_t signal = 0, staging = 0, gather = 0;         // pointers, usable within one process
  std::string signal_handle, staging_handle, gather_handle;  // IPC handles, for other processes
  std::uint32_t nonce = 0;                                   // rank 0's is the group's probe nonce

  std::string serialise() const;
  // Throws Error naming `rank` when the bytes are not an identity this release wrote.
  static RankIdentity parse(const std::string& bytes, int rank);
};

// Bytes (an IPC handle) as lower-case hex for the bootstrap's text, and back; from_hex throws
// Error for text that is not hex.
std::string to_hex(const std::string& bytes);
std::string from_hex(const std::string& hex);

// This machine, this process and `device`; buffers and handles are filled in by the caller.
RankIdentity local_identity(const Device& device);

std::vector<RankIdentity> exchange_identities(Bootstrap& bootstrap, const RankIdentity& mine);
// Empty when all ranks run on one node, else which ones differ.
std::string nodes_differ(const std::vector<RankIdentity>& ranks);
bool same_process(const RankIdentity& a, const RankIdentity& b);
// The most ranks on one physical GPU.
int max_ranks_per_device(const std::vector<RankIdentity>& ranks);

// Every rank passes "" (it succeeded) or what went wrong; every rank gets all failures joined,
// "rank 1: ...; rank 3: ...", or "" when none failed.
std::string gather_failures(Bootstrap& bootstrap, const std::string& mine);

// The write test: rank `me` writes a value made from `nonce` into its slot of every rank's
// Signal::reserved through the pointers in `peers`; after a barrier each rank reads its own
// slots back. verify_probes returns "" or which ranks' writes did not arrive.
void write_probes(const Device& device, const PeerBuffers& peers, int world, int me, std::uint32_t nonce);
std::string verify_probes(const DeviceBuffer& my_signal, int world, std::uint32_t nonce, int me);
std::uint32_t probe_value(std::uint32_t nonce, int writer, int reader);

}  // namespace arfuse::detail
