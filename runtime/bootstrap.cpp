#include "arfuse/runtime/bootstrap.hpp"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "arfuse/base/error.hpp"

namespace arfuse {
namespace {

void check_world(int rank, int world) {
  if (world < 1 || world > 1024) throw Error(fmt::format("bootstrap world size {} is not allowed: 1 to 1024", world));
  if (rank < 0 || rank >= world) throw Error(fmt::format("bootstrap rank {} is outside 0..{}", rank, world - 1));
}

// ---- in-process ---------------------------------------------------------------------------

class InProcessBootstrap final : public Bootstrap {
 public:
  InProcessBootstrap(InProcessRendezvous& r, int rank, int world) : rendezvous_(r), rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::vector<std::string> allgather(const std::string& mine) override { return rendezvous_.exchange(rank_, mine); }

 private:
  InProcessRendezvous& rendezvous_;
  int rank_, world_;
};

// ---- UNIX domain socket -------------------------------------------------------------------

// Every message: magic, round, sender rank, payload size, then the payload.
struct Frame {
  std::uint32_t magic;
  std::uint32_t round;
  std::int32_t rank;
  std::uint32_t size;
};
constexpr std::uint32_t kFrameMagic = 0x41524642;  // "ARFB"
constexpr std::uint32_t kMaxPayload = 64u << 20;

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? int(left) : 0;
}

// false on timeout or a closed peer.
bool read_exact(int fd, void* data, size_t size, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    pollfd pfd{fd, POLLIN, 0};
    int ready = ::poll(&pfd, 1, remaining_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n, size -= size_t(n);
  }
  return true;
}

bool write_exact(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n, size -= size_t(n);
  }
  return true;
}

bool send_frame(int fd, std::uint32_t round, int rank, const std::string& payload) {
  Frame f{kFrameMagic, round, rank, std::uint32_t(payload.size())};
  return write_exact(fd, &f, sizeof(f)) && write_exact(fd, payload.data(), payload.size());
}

// Reads one frame and checks it; `who` names the peer in errors.
std::string receive_frame(int fd, std::uint32_t round, int expected_rank, Clock::time_point deadline, const std::string& who,
                          int timeout_ms) {
  Frame f{};
  if (!read_exact(fd, &f, sizeof(f), deadline)) {
    throw Error(fmt::format("bootstrap: {} sent nothing within {} ms (dead, or not started)", who, timeout_ms));
  }
  if (f.magic != kFrameMagic || f.rank != expected_rank || f.round != round || f.size > kMaxPayload) {
    throw Error(fmt::format("bootstrap: garbage from {}: magic {:#x}, rank {}, round {} (expected rank {}, round {}), size {}",
                            who, f.magic, f.rank, f.round, expected_rank, round, f.size));
  }
  std::string payload(f.size, '\0');
  if (!read_exact(fd, payload.data(), payload.size(), deadline)) {
    throw Error(fmt::format("bootstrap: {} stopped in the middle of a message", who));
  }
  return payload;
}

sockaddr_un socket_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    throw Error(fmt::format("bootstrap socket path {} is too long ({} bytes, at most {})", path, path.size(), sizeof(addr.sun_path) - 1));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

class SocketBootstrap final : public Bootstrap {
 public:
  SocketBootstrap(std::string path, int rank, int world, std::chrono::milliseconds timeout)
      : path_(std::move(path)), rank_(rank), world_(world), timeout_(timeout) {
    if (rank == 0) listen_and_accept();
    else connect_to_root();
  }
  ~SocketBootstrap() override {
    for (int fd : peers_) if (fd >= 0) ::close(fd);
    if (root_ >= 0) ::close(root_);
    if (rank_ == 0) ::unlink(path_.c_str());
  }
  int rank() const override { return rank_; }
  int world() const override { return world_; }

  std::vector<std::string> allgather(const std::string& mine) override {
    if (!broken_.empty()) throw Error(fmt::format("bootstrap: unusable after an earlier failure ({})", broken_));
    try {
      return exchange(mine);
    } catch (const Error& e) {
      // Close every connection, so that the other ranks fail now instead of at their timeout.
      broken_ = e.what();
      for (int& fd : peers_) if (fd >= 0) ::close(fd), fd = -1;
      if (root_ >= 0) ::close(root_), root_ = -1;
      throw;
    }
  }

 private:
  std::vector<std::string> exchange(const std::string& mine) {
    const std::uint32_t round = round_++;
    const auto deadline = Clock::now() + timeout_;
    std::vector<std::string> all(static_cast<size_t>(world_));
    if (rank_ != 0) {
      if (!send_frame(root_, round, rank_, mine)) throw Error(fmt::format("bootstrap: rank {} lost its connection to rank 0", rank_));
      for (int r = 0; r < world_; ++r) all[size_t(r)] = receive_frame(root_, round, r, deadline, "rank 0", int(timeout_.count()));
      return all;
    }
    all[0] = mine;
    for (int r = 1; r < world_; ++r) {
      all[size_t(r)] = receive_frame(peers_[size_t(r)], round, r, deadline, fmt::format("rank {}", r), int(timeout_.count()));
    }
    for (int r = 1; r < world_; ++r) {
      for (int s = 0; s < world_; ++s) {
        if (!send_frame(peers_[size_t(r)], round, s, all[size_t(s)])) throw Error(fmt::format("bootstrap: lost the connection to rank {}", r));
      }
    }
    return all;
  }

  void listen_and_accept() {
    peers_.assign(size_t(world_), -1);
    if (world_ == 1) return;
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr = socket_address(path_);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, world_) != 0) {
      const int saved = errno;
      if (fd >= 0) ::close(fd);
      throw Error(fmt::format("bootstrap: rank 0 cannot listen at {}: {}", path_, std::strerror(saved)));
    }
    const auto deadline = Clock::now() + timeout_;
    int joined = 0;
    try {
      while (joined < world_ - 1) {
        pollfd pfd{fd, POLLIN, 0};
        int ready = ::poll(&pfd, 1, remaining_ms(deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) break;
        int peer = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (peer < 0) continue;
        // The hello frame says who this is.
        Frame f{};
        if (!read_exact(peer, &f, sizeof(f), deadline) || f.magic != kFrameMagic || f.rank <= 0 || f.rank >= world_ ||
            f.size != 0 || peers_[size_t(f.rank)] >= 0) {
          ::close(peer);
          ::close(fd);
          throw Error(fmt::format("bootstrap: garbage from a process that connected to {}: not a rank of this {}-rank group, "
                                  "or a rank that joined twice", path_, world_));
        }
        peers_[size_t(f.rank)] = peer;
        ++joined;
      }
    } catch (...) {
      ::unlink(path_.c_str());
      throw;
    }
    ::close(fd);
    ::unlink(path_.c_str());
    if (joined < world_ - 1) {
      std::string missing;
      for (int r = 1; r < world_; ++r) if (peers_[size_t(r)] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      throw Error(fmt::format("bootstrap: rank(s) {} did not join at {} within {} ms", missing, path_, timeout_.count()));
    }
  }

  void connect_to_root() {
    const auto deadline = Clock::now() + timeout_;
    sockaddr_un addr = socket_address(path_);
    while (true) {
      int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
        root_ = fd;
        break;
      }
      if (fd >= 0) ::close(fd);
      if (Clock::now() >= deadline) {
        throw Error(fmt::format("bootstrap: rank {} found no rank 0 listening at {} within {} ms", rank_, path_, timeout_.count()));
      }
      ::usleep(2000);
    }
    if (!send_frame(root_, 0, rank_, std::string())) throw Error(fmt::format("bootstrap: rank {} could not greet rank 0", rank_));
  }

  std::string path_;
  int rank_, world_;
  std::chrono::milliseconds timeout_;
  std::vector<int> peers_;
  int root_ = -1;
  std::uint32_t round_ = 0;
  std::string broken_;
};

// ---- callback -----------------------------------------------------------------------------

class CallbackBootstrap final : public Bootstrap {
 public:
  CallbackBootstrap(int rank, int world, AllgatherFunction fn) : rank_(rank), world_(world), fn_(std::move(fn)) {
    if (!fn_) throw Error("callback_bootstrap needs an allgather function");
  }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::vector<std::string> allgather(const std::string& mine) override {
    auto all = fn_(mine);
    if (int(all.size()) != world_) {
      throw Error(fmt::format("bootstrap callback returned {} entries for a world of {}", all.size(), world_));
    }
    if (all[size_t(rank_)] != mine) throw Error(fmt::format("bootstrap callback did not return rank {}'s own bytes at index {}", rank_, rank_));
    return all;
  }

 private:
  int rank_, world_;
  AllgatherFunction fn_;
};

}  // namespace

InProcessRendezvous::InProcessRendezvous(int world, std::chrono::milliseconds timeout)
    : world_(world), timeout_(timeout), slots_(size_t(world)), filled_(size_t(world), false) {
  check_world(0, world);
}

std::unique_ptr<Bootstrap> InProcessRendezvous::join(int rank) {
  check_world(rank, world_);
  return std::make_unique<InProcessBootstrap>(*this, rank, world_);
}

std::vector<std::string> InProcessRendezvous::exchange(int rank, const std::string& mine) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto deadline = Clock::now() + timeout_;
  // Wait until the previous round has been collected by everyone.
  if (!changed_.wait_until(lock, deadline, [&] { return departed_ == 0 && !filled_[size_t(rank)]; })) {
    throw Error(fmt::format("bootstrap: rank {} timed out waiting for the previous exchange to finish", rank));
  }
  const auto round = round_;
  slots_[size_t(rank)] = mine;
  filled_[size_t(rank)] = true;
  if (++arrived_ == world_) {
    result_ = slots_;
    departed_ = world_;
    ++round_;
    changed_.notify_all();
  }
  if (!changed_.wait_until(lock, deadline, [&] { return round_ != round; })) {
    std::string missing;
    for (int r = 0; r < world_; ++r) if (!filled_[size_t(r)]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    // The rendezvous stays as it is: after a timeout the group is being torn down.
    throw Error(fmt::format("bootstrap: rank(s) {} did not arrive within {} ms", missing, timeout_.count()));
  }
  auto out = result_;
  if (--departed_ == 0) {
    arrived_ = 0;
    std::fill(filled_.begin(), filled_.end(), false);
    changed_.notify_all();
  }
  return out;
}

std::unique_ptr<Bootstrap> local_socket_bootstrap(const std::string& socket_path, int rank, int world,
                                                  std::chrono::milliseconds timeout) {
  check_world(rank, world);
  return std::make_unique<SocketBootstrap>(socket_path, rank, world, timeout);
}

std::unique_ptr<Bootstrap> callback_bootstrap(int rank, int world, AllgatherFunction allgather) {
  check_world(rank, world);
  return std::make_unique<CallbackBootstrap>(rank, world, std::move(allgather));
}

void require_agreement(Bootstrap& b, const std::string& what, const std::string& value) {
  const auto all = b.allgather(value);
  std::string differ;
  for (int r = 1; r < b.world(); ++r) {
    if (all[size_t(r)] != all[0]) differ += fmt::format("{}rank {} has '{}'", differ.empty() ? "" : ", ", r, all[size_t(r)]);
  }
  if (!differ.empty()) {
    throw Error(fmt::format("the ranks disagree on {}: rank 0 has '{}', {}; every rank must create the group alike", what, all[0], differ));
  }
}

}  // namespace arfuse
