// The UNIX-socket bootstrap: rank 0 listens at a path, the other ranks connect. Only the job's
// own processes get in, since the peers' CUDA IPC handles travel over this socket and whoever
// holds them can map the ranks' staging buffers (read and write activations):
//   - the socket is 0600 inside a folder of this user that nobody else can write (0700 when
//     created here); an existing path is never followed, and removed only when it is a dead
//     socket of this user;
//   - each side checks the other's uid with SO_PEERCRED: rank 0 on every accepted peer, every
//     rank on the listener;
//   - every peer proves the job secret (ARFUSE_BOOTSTRAP_SECRET, or the argument) to rank 0 and
//     rank 0 proves it back (HMAC-SHA256 over fresh nonces) before anything else is sent. With
//     no secret the proof uses the empty key, so a secret on one side only is refused too;
//   - rank 0 admits connections one at a time, each with its own short handshake deadline: a
//     stray, silent or refused connection is dropped (and named if the job then fails) while rank
//     0 keeps accepting until the job's deadline;
//   - one allgather round carries at most kMaxRoundBytes from all ranks together.
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <utility>

#include "arfuse/bootstrap.hpp"
#include "arfuse/error.hpp"
#include "arfuse/settings.hpp"

#include "base/sha256.hpp"
#include "base/system.hpp"
#include "base/trusted_folder.hpp"

namespace arfuse {
namespace {

// Every message: magic, round, sender rank, payload size, then the payload.
struct Frame {
  std::uint32_t magic;
  std::uint32_t round;
  std::int32_t rank;
  std::uint32_t size;
};
constexpr std::uint32_t kFrameMagic = 0x41524642;      // "ARFB": an allgather message
constexpr std::uint32_t kHelloMagic = 0x41524648;      // "ARFH": a rank's hello and its nonce
constexpr std::uint32_t kChallengeMagic = 0x41524643;  // "ARFC": rank 0's nonce and proof
constexpr std::uint32_t kProofMagic = 0x41524650;      // "ARFP": a rank's proof
constexpr std::uint32_t kAcceptMagic = 0x41524641;     // "ARFA": rank 0 lets the rank in
constexpr std::uint32_t kRefuseMagic = 0x41524652;     // "ARFR": refused; the payload says why
// What one allgather round may carry from all ranks together (IPC handles and configuration
// strings: kilobytes), so that no peer can make a rank allocate more.
constexpr std::uint64_t kMaxRoundBytes = 64u << 20;
constexpr std::size_t kNonceBytes = 32;
// How long rank 0 gives one connection to prove itself; a rank sends its hello as soon as it is
// connected, so only a stray or stalled connection takes this long.
constexpr std::chrono::milliseconds kHandshakeTimeout{2000};
// Refusals kept to explain a rank that did not join.
constexpr std::size_t kRefusalsKept = 8;

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

bool send_frame(int fd, std::uint32_t magic, std::uint32_t round, int rank, const std::string& payload) {
  Frame f{magic, round, rank, std::uint32_t(payload.size())};
  return write_exact(fd, &f, sizeof(f)) && write_exact(fd, payload.data(), payload.size());
}

// Reads one allgather frame and checks it; `who` names the peer in errors. `round_budget` is
// what the round may still carry; the frame's size is taken from it.
std::string receive_frame(int fd, std::uint32_t round, int expected_rank, Clock::time_point deadline,
                          const std::string& who, int timeout_ms, std::uint64_t& round_budget) {
  Frame f{};
  if (!read_exact(fd, &f, sizeof(f), deadline)) {
    throw Error(fmt::format("bootstrap: {} sent nothing within {} ms (dead, or not started)", who, timeout_ms));
  }
  if (f.magic != kFrameMagic || f.rank != expected_rank || f.round != round) {
    throw Error(
        fmt::format("bootstrap: garbage from {}: magic {:#x}, rank {}, round {} (expected rank {}, round {}), size {}",
                    who, f.magic, f.rank, f.round, expected_rank, round, f.size));
  }
  if (f.size > round_budget) {
    throw Error(
        fmt::format("bootstrap: {} sent {} bytes in round {}, more than the {} bytes one round may carry "
                    "from all ranks together",
                    who, f.size, round, kMaxRoundBytes));
  }
  round_budget -= f.size;
  std::string payload(f.size, '\0');
  if (!read_exact(fd, payload.data(), payload.size(), deadline)) {
    throw Error(fmt::format("bootstrap: {} stopped in the middle of a message", who));
  }
  return payload;
}

// One handshake message of a known magic and exact size; a refusal becomes an Error quoting it.
std::string receive_handshake(int fd, std::uint32_t magic, std::size_t size, Clock::time_point deadline,
                              const std::string& who) {
  Frame f{};
  if (!read_exact(fd, &f, sizeof(f), deadline))
    throw Error(fmt::format("bootstrap: {} closed the connection or timed out", who));
  if (f.magic == kRefuseMagic && f.size <= 4096) {
    std::string why(f.size, '\0');
    read_exact(fd, why.data(), why.size(), deadline);
    throw Error(fmt::format("bootstrap: refused by {}: {}", who, why));
  }
  if (f.magic != magic || f.size != size) {
    throw Error(fmt::format("bootstrap: garbage from {}: magic {:#x}, size {} (expected {:#x}, size {})", who, f.magic,
                            f.size, magic, size));
  }
  std::string payload(size, '\0');
  if (!read_exact(fd, payload.data(), payload.size(), deadline))
    throw Error(fmt::format("bootstrap: {} stopped mid-message", who));
  return payload;
}

std::string fresh_nonce() {
  std::random_device device;  // the kernel's entropy source
  std::string nonce(kNonceBytes, '\0');
  for (auto& c : nonce) c = char(device());
  return nonce;
}

std::string proof(const std::string& secret, const char* who, const std::string& nonce, int rank) {
  const Digest d = hmac_sha256(secret, fmt::format("arfuse bootstrap {} {} ", who, rank) + nonce);
  return std::string(d.begin(), d.end());
}

bool same_proof(const std::string& a, const std::string& b) {
  Digest x{}, y{};
  if (a.size() != x.size() || b.size() != y.size()) return false;
  std::memcpy(x.data(), a.data(), x.size());
  std::memcpy(y.data(), b.data(), y.size());
  return equal_in_constant_time(x, y);
}

ucred peer_credentials(int fd) {
  ucred cred{};
  socklen_t size = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &size) != 0) {
    throw Error(fmt::format("bootstrap: cannot read the peer's credentials: {}", std::strerror(errno)));
  }
  return cred;
}

// The folder and the name of a socket path.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// The socket's folder, opened and checked (created 0700 with any missing parents when `create`).
TrustedFolder trusted_socket_folder(const std::string& socket_path, bool create) {
  const auto [dir, name] = split_path(socket_path);
  if (name.empty() || name == "." || name == "..") {
    throw Error(fmt::format("bootstrap: the socket path {} names no file", socket_path));
  }
  TrustedFolder folder;
  std::string why;
  if (!open_trusted_folder(dir, create, folder, why)) {
    throw Error(
        fmt::format("bootstrap: the socket folder cannot be used: {}; use a folder of uid {} that nobody else "
                    "can write, e.g. a new one that arfuse creates with mode 0700",
                    why, ::geteuid()));
  }
  return folder;
}

// The address of `name` in the open folder `dir`, reached through its descriptor.
sockaddr_un socket_address(int dir, const std::string& name, const std::string& shown) {
  const std::string path = path_through_descriptor(dir, name);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    throw Error(fmt::format("bootstrap socket name in {} is too long ({} bytes, at most {})", shown, name.size(),
                            sizeof(addr.sun_path) - 1 - (path.size() - name.size())));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

bool someone_listens(int dir, const std::string& name, const std::string& shown) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr = socket_address(dir, name, shown);
  const bool listening = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  if (fd >= 0) ::close(fd);
  return listening;
}

// Whatever is at the name already: a dead socket of ours is removed; anything else is left.
void clear_socket_name(int dir, const std::string& name, const std::string& shown) {
  struct stat st {};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (!S_ISSOCK(st.st_mode) || st.st_uid != ::geteuid()) {
    throw Error(
        fmt::format("bootstrap: {} already exists and is not a socket of this user (mode {:o}, uid {}); it is left "
                    "alone: choose another path",
                    shown, st.st_mode, st.st_uid));
  }
  if (someone_listens(dir, name, shown)) {
    throw Error(fmt::format("bootstrap: another process of this user already listens at {} (another job?)", shown));
  }
  ::unlinkat(dir, name.c_str(), 0);  // the socket of a job that ended without removing it
}

// bind() under a 0177 umask: the socket is 0600 from its first moment, not the umask's mode.
// (umask is per process; another thread creating a file at this moment gets no wider mode.)
int bind_private(int fd, const sockaddr_un& addr) {
  const mode_t saved = ::umask(0177);
  const int result = system_calls().bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int error = errno;
  ::umask(saved);
  errno = error;
  return result;
}

class SocketBootstrap final : public Bootstrap {
 public:
  SocketBootstrap(std::string path, int rank, int world, std::chrono::milliseconds timeout, std::string secret)
      : path_(std::move(path)),
        name_(split_path(path_).second),
        rank_(rank),
        world_(world),
        timeout_(timeout),
        secret_(std::move(secret)) {
    if (rank == 0)
      listen_and_accept();
    else
      connect_to_root();
  }
  ~SocketBootstrap() override {
    for (int fd : peers_)
      if (fd >= 0) ::close(fd);
    if (root_ >= 0) ::close(root_);
    remove_own_socket();
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
      for (int& fd : peers_)
        if (fd >= 0) ::close(fd), fd = -1;
      if (root_ >= 0) ::close(root_), root_ = -1;
      throw;
    }
  }

 private:
  std::vector<std::string> exchange(const std::string& mine) {
    const std::uint32_t round = round_++;
    const auto deadline = Clock::now() + timeout_;
    if (mine.size() > kMaxRoundBytes) {
      throw Error(fmt::format("bootstrap: rank {} has {} bytes to send, more than the {} bytes one round may carry",
                              rank_, mine.size(), kMaxRoundBytes));
    }
    std::vector<std::string> all(static_cast<size_t>(world_));
    std::uint64_t budget = kMaxRoundBytes;
    if (rank_ != 0) {
      if (!send_frame(root_, kFrameMagic, round, rank_, mine)) {
        throw Error(fmt::format("bootstrap: rank {} lost its connection to rank 0", rank_));
      }
      for (int r = 0; r < world_; ++r)
        all[size_t(r)] = receive_frame(root_, round, r, deadline, "rank 0", int(timeout_.count()), budget);
      return all;
    }
    all[0] = mine;
    budget -= mine.size();
    for (int r = 1; r < world_; ++r) {
      all[size_t(r)] = receive_frame(peers_[size_t(r)], round, r, deadline, fmt::format("rank {}", r),
                                     int(timeout_.count()), budget);
    }
    for (int r = 1; r < world_; ++r) {
      for (int s = 0; s < world_; ++s) {
        if (!send_frame(peers_[size_t(r)], kFrameMagic, round, s, all[size_t(s)])) {
          throw Error(fmt::format("bootstrap: lost the connection to rank {}", r));
        }
      }
    }
    return all;
  }

  // Only while the name is still the socket this rank bound (not one a later job put there).
  void remove_own_socket() {
    struct stat st {};
    if (bound_ && ::fstatat(folder_.fd.get(), name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        st.st_dev == bound_dev_ && st.st_ino == bound_ino_)
      ::unlinkat(folder_.fd.get(), name_.c_str(), 0);
    bound_ = false;
  }

  int bind_listener() {
    folder_ = trusted_socket_folder(path_, true);
    const int dir = folder_.fd.get();
    clear_socket_name(dir, name_, path_);
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_un addr = socket_address(dir, name_, path_);
    if (fd < 0 || bind_private(fd, addr) != 0) {
      const int saved = errno;
      if (fd >= 0) ::close(fd);
      throw Error(fmt::format("bootstrap: rank 0 cannot listen at {}: {}", path_, std::strerror(saved)));
    }
    struct stat st {};
    ::fstatat(dir, name_.c_str(), &st, AT_SYMLINK_NOFOLLOW);
    bound_ = true, bound_dev_ = st.st_dev, bound_ino_ = st.st_ino;
    // Room in the backlog for the ranks and a few strays, so no rank waits behind them to connect.
    if (!S_ISSOCK(st.st_mode) || ::fchmodat(dir, name_.c_str(), 0600, 0) != 0 || ::listen(fd, world_ + 16) != 0) {
      const int saved = S_ISSOCK(st.st_mode) ? errno : EEXIST;
      ::close(fd);
      remove_own_socket();
      throw Error(fmt::format("bootstrap: rank 0 cannot listen at {}: {}", path_, std::strerror(saved)));
    }
    return fd;
  }

  // Rank 0's side of one connection's handshake; throws (after telling the peer why) when it is
  // refused, which drops only this connection.
  void admit(int peer, Clock::time_point deadline) {
    const ucred cred = peer_credentials(peer);
    if (cred.uid != ::geteuid()) {
      const std::string why = fmt::format("uid {} is not this job's uid {}", cred.uid, ::geteuid());
      send_frame(peer, kRefuseMagic, 0, 0, why);
      throw Error(
          fmt::format("refused a process (pid {}, uid {}) that connected to {}: {}", cred.pid, cred.uid, path_, why));
    }
    Frame f{};
    if (!read_exact(peer, &f, sizeof(f), deadline)) {
      throw Error(fmt::format("a process (pid {}) connected to {} and sent no hello within {} ms", cred.pid, path_,
                              kHandshakeTimeout.count()));
    }
    if (f.magic != kHelloMagic || f.rank <= 0 || f.rank >= world_ || f.size != kNonceBytes ||
        peers_[size_t(f.rank)] >= 0) {
      throw Error(
          fmt::format("garbage from a process (pid {}) that connected to {}: not a rank of this {}-rank group, or a "
                      "rank that joined twice",
                      cred.pid, path_, world_));
    }
    const int rank = f.rank;
    std::string their_nonce(kNonceBytes, '\0');
    if (!read_exact(peer, their_nonce.data(), their_nonce.size(), deadline)) {
      throw Error(fmt::format("rank {} (pid {}) stopped in the middle of its hello", rank, cred.pid));
    }
    const std::string my_nonce = fresh_nonce();
    send_frame(peer, kChallengeMagic, 0, 0, my_nonce + proof(secret_, "root", their_nonce, rank));
    const std::string their_proof =
        receive_handshake(peer, kProofMagic, 32, deadline, fmt::format("rank {} (pid {})", rank, cred.pid));
    if (!same_proof(their_proof, proof(secret_, "rank", my_nonce, rank))) {
      send_frame(peer, kRefuseMagic, 0, 0, "wrong job secret (ARFUSE_BOOTSTRAP_SECRET)");
      throw Error(
          fmt::format("refused rank {} (pid {}): it did not prove the job secret (ARFUSE_BOOTSTRAP_SECRET differs)",
                      rank, cred.pid));
    }
    send_frame(peer, kAcceptMagic, 0, 0, std::string());
    peers_[size_t(rank)] = peer;
  }

  void listen_and_accept() {
    peers_.assign(size_t(world_), -1);
    if (world_ == 1) return;
    const int fd = bind_listener();
    const auto deadline = Clock::now() + timeout_;
    int joined = 0;
    std::vector<std::string> refused;
    int refused_count = 0;
    while (joined < world_ - 1) {
      pollfd pfd{fd, POLLIN, 0};
      int ready = ::poll(&pfd, 1, remaining_ms(deadline));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) break;
      int peer = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (peer < 0) continue;
      try {
        admit(peer, std::min(deadline, Clock::now() + kHandshakeTimeout));
        ++joined;
      } catch (const Error& e) {
        ::close(peer);
        ++refused_count;
        if (refused.size() < kRefusalsKept) refused.emplace_back(e.what());
      }
    }
    ::close(fd);
    remove_own_socket();
    if (joined < world_ - 1) {
      std::string missing;
      for (int r = 1; r < world_; ++r)
        if (peers_[size_t(r)] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      std::string why =
          fmt::format("bootstrap: rank(s) {} did not join at {} within {} ms", missing, path_, timeout_.count());
      if (refused_count > 0) why += fmt::format("; {} connection(s) refused meanwhile:", refused_count);
      for (const auto& r : refused) why += " [" + r + "]";
      throw Error(why);
    }
  }

  // A rank's side of the handshake: the listener must be this user's and prove the secret
  // before this rank proves it.
  void join(Clock::time_point deadline) {
    const ucred cred = peer_credentials(root_);
    if (cred.uid != ::geteuid()) {
      throw Error(
          fmt::format("bootstrap: the process listening at {} (pid {}) runs as uid {}, not as this job's uid {}: "
                      "refused, nothing was sent to it",
                      path_, cred.pid, cred.uid, ::geteuid()));
    }
    const std::string my_nonce = fresh_nonce();
    if (!send_frame(root_, kHelloMagic, 0, rank_, my_nonce))
      throw Error(fmt::format("bootstrap: rank {} could not greet rank 0", rank_));
    const std::string challenge = receive_handshake(root_, kChallengeMagic, kNonceBytes + 32, deadline, "rank 0");
    if (!same_proof(challenge.substr(kNonceBytes), proof(secret_, "root", my_nonce, rank_))) {
      send_frame(root_, kRefuseMagic, 0, rank_, fmt::format("rank {}: rank 0 did not prove the job secret", rank_));
      throw Error(
          fmt::format("bootstrap: the process listening at {} (pid {}) did not prove the job secret "
                      "(ARFUSE_BOOTSTRAP_SECRET differs): refused, nothing was sent to it",
                      path_, cred.pid));
    }
    send_frame(root_, kProofMagic, 0, rank_, proof(secret_, "rank", challenge.substr(0, kNonceBytes), rank_));
    receive_handshake(root_, kAcceptMagic, 0, deadline, "rank 0");
  }

  // The folder may not exist until rank 0 creates it; any other reason to distrust it is final.
  bool open_folder_when_there() {
    const std::string dir = split_path(path_).first;
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 && errno == ENOENT) return false;
    folder_ = trusted_socket_folder(path_, false);
    return true;
  }

  void connect_to_root() {
    const auto deadline = Clock::now() + timeout_;
    while (true) {
      if (folder_.fd.valid() || open_folder_when_there()) {
        const sockaddr_un addr = socket_address(folder_.fd.get(), name_, path_);
        int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
          root_ = fd;
          break;
        }
        if (fd >= 0) ::close(fd);
      }
      if (Clock::now() >= deadline) {
        throw Error(fmt::format("bootstrap: rank {} found no rank 0 listening at {} within {} ms", rank_, path_,
                                timeout_.count()));
      }
      ::usleep(2000);
    }
    try {
      join(deadline);
    } catch (...) {
      ::close(root_), root_ = -1;
      throw;
    }
  }

  std::string path_;  // for messages; the socket is reached through folder_ and name_
  std::string name_;
  TrustedFolder folder_;
  int rank_, world_;
  std::chrono::milliseconds timeout_;
  std::string secret_;
  std::vector<int> peers_;
  int root_ = -1;
  bool bound_ = false;
  dev_t bound_dev_ = 0;
  ino_t bound_ino_ = 0;
  std::uint32_t round_ = 0;
  std::string broken_;
};

}  // namespace

std::unique_ptr<Bootstrap> local_socket_bootstrap(const std::string& socket_path, int rank, int world,
                                                  std::chrono::milliseconds timeout,
                                                  std::optional<std::string> secret) {
  check_bootstrap_world(rank, world);
  if (!secret) secret = settings::text("ARFUSE_BOOTSTRAP_SECRET").value_or("");
  return std::make_unique<SocketBootstrap>(socket_path, rank, world, timeout, std::move(*secret));
}

}  // namespace arfuse
