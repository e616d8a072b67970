// Bootstrap: how the ranks of a group exchange bytes before any GPU memory is shared (IPC
// handles, configuration checks). Three ways to reach the other ranks:
//   InProcessRendezvous  ranks are threads of one process;
//   local_socket_bootstrap  ranks are processes of one node, meeting at a UNIX domain socket
//                        (no network service: the path is a file in a folder they share);
//   callback_bootstrap   the engine's own allgather (torch.distributed, MPI) does the work.
// Every exchange is bounded by a timeout and checked: a rank that never arrives or sends
// garbage is an arfuse::Error naming it, never a hang.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "arfuse/error.hpp"

namespace arfuse {

class ARFUSE_API Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // Every rank's `mine`, in rank order. Every rank must call it the same number of times.
  virtual std::vector<std::string> allgather(const std::string& mine) = 0;
  void barrier() { allgather(std::string()); }
};

// Throws arfuse::Error on every rank, naming the ranks whose `what` differs from rank 0's,
// when the ranks do not all pass the same `value` (world size, capacity, dtype, version...).
ARFUSE_API void require_agreement(Bootstrap& bootstrap, const std::string& what, const std::string& value);

class ARFUSE_API InProcessRendezvous {
 public:
  InProcessRendezvous(int world, std::chrono::milliseconds timeout);
  // The bootstrap for one rank; each rank joins once, from its own thread. After a timeout
  // the rendezvous is not reusable: make a new one.
  std::unique_ptr<Bootstrap> join(int rank);
  // One allgather round for `rank` (what its Bootstrap calls).
  std::vector<std::string> exchange(int rank, const std::string& mine);

 private:
  int world_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> slots_;
  std::vector<bool> filled_;
  std::vector<std::string> result_;
  int arrived_ = 0, departed_ = 0;
  unsigned long long round_ = 0;
};

// Rank 0 listens at `socket_path`, the others connect to it (the socket rendezvous).
// The socket's folder is created with mode 0700 if missing, and must be this user's and
// writable by nobody else; a path that exists is left alone unless it is a dead socket of this
// user. Only processes of this uid that prove `secret` get in (nullopt: ARFUSE_BOOTSTRAP_SECRET,
// or none when that is unset; every rank must use the same).
ARFUSE_API std::unique_ptr<Bootstrap> local_socket_bootstrap(const std::string& socket_path, int rank, int world,
                                                             std::chrono::milliseconds timeout,
                                                             std::optional<std::string> secret = std::nullopt);

// Throws Error unless 1 <= world <= 1024 and 0 <= rank < world.
ARFUSE_API void check_bootstrap_world(int rank, int world);

using AllgatherFunction = std::function<std::vector<std::string>(const std::string& mine)>;
ARFUSE_API std::unique_ptr<Bootstrap> callback_bootstrap(int rank, int world, AllgatherFunction allgather);

}  // namespace arfuse
