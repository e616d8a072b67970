// [cpu] The bootstrap: threads and forked processes exchange bytes; a missing rank times out
// with its number; mismatched configuration is refused on every rank; garbage is an error.
#include "arfuse/bootstrap.hpp"

#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>

#include "arfuse/error.hpp"

#include "support.hpp"

using namespace arfuse;
using Catch::Contains;
using std::chrono::milliseconds;

namespace {

// A socket path in a new folder of this user (mode 0700): the bootstrap refuses shared folders.
std::string socket_path() { return test::fresh_dir("arfuse-bootstrap") + "/rendezvous.sock"; }

// Runs body(rank) in `world` forked processes; returns each child's exit status.
std::vector<int> in_processes(int world, const std::function<int(int)>& body) {
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = 99;
      try {
        code = body(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        code = 3;
      }
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 100);
  }
  return codes;
}

// What a forked process said: its exit code and the message of the Error it threw, if any.
struct ChildResult {
  int code = -1;
  std::string message;
};

// Runs body() in a forked process, as uid/gid 65534 (nobody) when `as_nobody`; the Error it
// throws comes back as the message, with exit code 3.
pid_t start_child(bool as_nobody, const std::function<void()>& body, int& message_fd) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    int code = 0;
    std::string message;
    try {
      if (as_nobody && (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
        throw Error("setuid failed");
      body();
    } catch (const std::exception& e) {
      message = e.what(), code = 3;
    }
    (void)!write(fds[1], message.data(), message.size());
    _exit(code);
  }
  ::close(fds[1]);
  message_fd = fds[0];
  return pid;
}

ChildResult finish_child(pid_t pid, int message_fd) {
  ChildResult r;
  char buffer[4096];
  for (ssize_t n; (n = read(message_fd, buffer, sizeof(buffer))) > 0;) r.message.append(buffer, size_t(n));
  ::close(message_fd);
  int status = 0;
  waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 100;
  return r;
}

ChildResult in_child(bool as_nobody, const std::function<void()>& body) {
  int fd = -1;
  const pid_t pid = start_child(as_nobody, body, fd);
  return finish_child(pid, fd);
}

bool wait_for_socket(const std::string& path) {
  for (int i = 0; i < 500; ++i) {
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) return true;
    usleep(10000);
  }
  return false;
}

}  // namespace

TEST_CASE("in-process bootstrap: threads allgather in rank order, many rounds", "[cpu][bootstrap]") {
  const int world = 4;
  InProcessRendezvous rendezvous(world, milliseconds(5000));
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto b = rendezvous.join(r);
      for (int round = 0; round < 200; ++round) {
        auto all = b->allgather(std::to_string(r * 1000 + round));
        for (int s = 0; s < world; ++s) bad += all[size_t(s)] != std::to_string(s * 1000 + round);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(bad == 0);
}

TEST_CASE("in-process bootstrap: a rank that never arrives times out by name", "[cpu][bootstrap]") {
  InProcessRendezvous rendezvous(3, milliseconds(200));
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        rendezvous.join(r)->barrier();
      } catch (const Error& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) CHECK_THAT(e, Contains("rank(s) 2 did not arrive"));
}

TEST_CASE("socket bootstrap: forked processes allgather and agree", "[cpu][bootstrap]") {
  const std::string path = socket_path();
  const int world = 4;
  auto codes = in_processes(world, [&](int r) {
    auto b = local_socket_bootstrap(path, r, world, milliseconds(10000));
    for (int round = 0; round < 50; ++round) {
      std::string mine(size_t(r * 100 + round), char('a' + r));
      auto all = b->allgather(mine);
      for (int s = 0; s < world; ++s) {
        if (all[size_t(s)] != std::string(size_t(s * 100 + round), char('a' + s))) return 1;
      }
    }
    require_agreement(*b, "world size", "4");
    return 0;
  });
  CHECK(codes == std::vector<int>(size_t(world), 0));
  CHECK(access(path.c_str(), F_OK) != 0);  // rank 0 removed the socket file
}

TEST_CASE("socket bootstrap: mismatched configuration is refused on every rank", "[cpu][bootstrap]") {
  const std::string path = socket_path();
  auto codes = in_processes(3, [&](int r) {
    auto b = local_socket_bootstrap(path, r, 3, milliseconds(10000));
    try {
      require_agreement(*b, "capacity", r == 2 ? "max_tokens=4096" : "max_tokens=2048");
    } catch (const Error& e) {
      return std::string(e.what()).find("rank 2 has 'max_tokens=4096'") != std::string::npos ? 7 : 8;
    }
    return 0;
  });
  CHECK(codes == std::vector<int>{7, 7, 7});
}

TEST_CASE("socket bootstrap: a missing rank times out, on rank 0 and on the others", "[cpu][bootstrap]") {
  const std::string path = socket_path();
  std::string root_error;
  try {
    local_socket_bootstrap(path, 0, 3, milliseconds(300));
  } catch (const Error& e) {
    root_error = e.what();
  }
  CHECK_THAT(root_error, Contains("rank(s) 1, 2 did not join"));
  REQUIRE_THROWS_WITH(local_socket_bootstrap(socket_path(), 1, 3, milliseconds(200)),
                      Contains("found no rank 0 listening"));
  // A rank that joined but never takes part in an exchange.
  const std::string path2 = socket_path();
  auto codes = in_processes(2, [&](int r) {
    auto b = local_socket_bootstrap(path2, r, 2, milliseconds(2000));
    if (r == 1) return 0;  // leaves without exchanging
    try {
      b->barrier();
    } catch (const Error& e) {
      return std::string(e.what()).find("rank 1 sent nothing") != std::string::npos ? 5 : 6;
    }
    return 0;
  });
  CHECK(codes[0] == 5);
}

TEST_CASE("socket bootstrap: garbage from a connection is dropped, and named when the job fails; never a hang",
          "[cpu][bootstrap]") {
  const std::string path = socket_path();
  pid_t pid = fork();
  if (pid == 0) {
    usleep(100000);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path.c_str());
    for (int i = 0; i < 200 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0; ++i) usleep(10000);
    const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    (void)!write(fd, junk, sizeof(junk));
    usleep(200000);
    _exit(0);
  }
  REQUIRE_THROWS_WITH(local_socket_bootstrap(path, 0, 2, milliseconds(1500)),
                      Contains("rank(s) 1 did not join") && Contains("1 connection(s) refused") && Contains("garbage"));
  int status = 0;
  waitpid(pid, &status, 0);
}

TEST_CASE("callback bootstrap: the engine's allgather is checked", "[cpu][bootstrap]") {
  auto good = callback_bootstrap(1, 2, [](const std::string& mine) { return std::vector<std::string>{"zero", mine}; });
  CHECK(good->allgather("one") == std::vector<std::string>{"zero", "one"});
  auto short_result = callback_bootstrap(1, 3, [](const std::string& mine) {
    return std::vector<std::string>{"zero", mine};
  });
  REQUIRE_THROWS_WITH(short_result->allgather("one"), Contains("returned 2 entries for a world of 3"));
  auto wrong_slot = callback_bootstrap(0, 2, [](const std::string& mine) {
    return std::vector<std::string>{"other", mine};
  });
  REQUIRE_THROWS_WITH(wrong_slot->allgather("mine"), Contains("own bytes"));
  REQUIRE_THROWS_WITH(callback_bootstrap(2, 2, nullptr), Contains("rank 2 is outside 0..1"));
}

TEST_CASE("socket bootstrap: a peer of another uid is refused with a clear error on both sides",
          "[cpu][bootstrap][security][root]") {
  const std::string dir = test::fresh_dir("arfuse-bootstrap"), path = dir + "/rendezvous.sock";
  REQUIRE(chmod(dir.c_str(), 0755) == 0);  // others may look in, not write: still a trusted folder
  int root_fd = -1;
  const pid_t root = start_child(
      false, [&] { local_socket_bootstrap(path, 0, 2, milliseconds(3000)); }, root_fd);
  REQUIRE(wait_for_socket(path));
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(chmod(path.c_str(), 0666) == 0);  // as if the mode were wrong: the uid check still stands
  // Through the library, the stranger refuses the folder before it connects.
  const ChildResult stranger = in_child(true, [&] { local_socket_bootstrap(path, 1, 2, milliseconds(3000)); });
  CHECK(stranger.code == 3);
  CHECK_THAT(stranger.message, Contains("is owned by uid 0, not by this user (uid 65534)"));
  // Connecting by hand, it is refused by rank 0, which goes on waiting for the real rank 1.
  const ChildResult by_hand = in_child(true, [&] {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path.c_str());
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) throw Error("cannot connect");
    char refusal[256];
    if (read(fd, refusal, sizeof(refusal)) <= 0) throw Error("no refusal");
    ::close(fd);
  });
  CHECK(by_hand.code == 0);
  const ChildResult rank0 = finish_child(root, root_fd);
  CHECK(rank0.code == 3);
  CHECK_THAT(rank0.message, Contains("rank(s) 1 did not join") && Contains("refused a process") &&
                                Contains("uid 65534 is not this job's uid 0"));
}

TEST_CASE("socket bootstrap: a squatting listener of another uid is refused and left alone",
          "[cpu][bootstrap][security][root]") {
  const std::string squat = test::fresh_dir("arfuse-squat");
  REQUIRE(chown(squat.c_str(), 65534, 65534) == 0);
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  int squatter_fd = -1;
  const pid_t squatter = start_child(
      true,
      [&] {
        const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strcpy(addr.sun_path, (squat + "/s").c_str());
        if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 8) != 0)
          throw Error("squatter cannot listen");
        (void)!write(ready[1], "x", 1);
        for (int i = 0; i < 300; ++i) {  // accepts and holds connections for up to 3 s
          pollfd p{fd, POLLIN, 0};
          if (poll(&p, 1, 10) > 0) (void)accept(fd, nullptr, nullptr);
        }
      },
      squatter_fd);
  char c = 0;
  REQUIRE(read(ready[0], &c, 1) == 1);
  // The squatter's socket now sits where the job expects rank 0 (a bound socket keeps working
  // when renamed).
  const std::string dir = test::fresh_dir("arfuse-bootstrap"), path = dir + "/rendezvous.sock";
  REQUIRE(rename((squat + "/s").c_str(), path.c_str()) == 0);
  SECTION("a rank refuses the listener and sends it nothing") {
    REQUIRE_THROWS_WITH(local_socket_bootstrap(path, 1, 2, milliseconds(2000)),
                        Contains("runs as uid 65534, not as this job's uid 0"));
  }
  SECTION("rank 0 neither follows nor removes it") {
    REQUIRE_THROWS_WITH(local_socket_bootstrap(path, 0, 2, milliseconds(2000)),
                        Contains("is not a socket of this user"));
    CHECK(access(path.c_str(), F_OK) == 0);
  }
  kill(squatter, SIGKILL);
  finish_child(squatter, squatter_fd);
  ::close(ready[0]), ::close(ready[1]);
}

TEST_CASE("socket bootstrap: the job secret is proven both ways; a wrong or missing one is refused on both sides",
          "[cpu][bootstrap][security]") {
  const std::string path = socket_path();
  const std::string secret0 = GENERATE(as<std::string>{}, "alpha", "alpha", "");
  const std::string secret1 = GENERATE(as<std::string>{}, "alpha", "beta", "alpha");
  CAPTURE(secret0, secret1);
  int fd = -1;
  const pid_t root = start_child(
      false,
      [&] {
        auto b = local_socket_bootstrap(path, 0, 2, milliseconds(secret0 == secret1 ? 5000 : 2000), secret0);
        if (b->allgather("zero")[1] != "one") throw Error("wrong exchange");
      },
      fd);
  // Rank 1 takes its secret from the environment, as a job would pass it.
  const ChildResult rank1 = in_child(false, [&] {
    setenv("ARFUSE_BOOTSTRAP_SECRET", secret1.c_str(), 1);
    auto b = local_socket_bootstrap(path, 1, 2, milliseconds(5000));
    if (b->allgather("one")[0] != "zero") throw Error("wrong exchange");
  });
  const ChildResult rank0 = finish_child(root, fd);
  if (secret0 == secret1) {
    CHECK(rank0.code == 0);
    CHECK(rank1.code == 0);
  } else {
    CHECK(rank1.code == 3);
    CHECK_THAT(rank1.message, Contains("did not prove the job secret") && Contains("nothing was sent"));
    CHECK(rank0.code == 3);
    CHECK_THAT(rank0.message, Contains("refused by rank 1") && Contains("rank 0 did not prove the job secret"));
  }
}

TEST_CASE("socket bootstrap: the socket folder is created 0700, must be ours and not shared; old paths are left alone",
          "[cpu][bootstrap][security]") {
  const std::string base = test::fresh_dir("arfuse-bootstrap");
  SECTION("a missing folder is created 0700 and the socket is 0600") {
    const std::string path = base + "/job/42/rendezvous.sock";
    int fd = -1;
    const pid_t root = start_child(
        false, [&] { local_socket_bootstrap(path, 0, 2, milliseconds(5000))->barrier(); }, fd);
    REQUIRE(wait_for_socket(path));
    struct stat folder {
    }, file{};
    REQUIRE(stat((base + "/job/42").c_str(), &folder) == 0);
    REQUIRE(stat(path.c_str(), &file) == 0);
    CHECK((folder.st_mode & 0777) == 0700);
    CHECK((file.st_mode & 0777) == 0600);
    local_socket_bootstrap(path, 1, 2, milliseconds(5000))->barrier();
    CHECK(finish_child(root, fd).code == 0);
    CHECK(access(path.c_str(), F_OK) != 0);  // removed by rank 0 once everyone joined
  }
  SECTION("a folder writable by group or others is refused, by rank 0 and the other ranks") {
    REQUIRE(chmod(base.c_str(), 0775) == 0);
    REQUIRE_THROWS_WITH(local_socket_bootstrap(base + "/r.sock", 0, 2, milliseconds(500)),
                        Contains("is writable by group or others"));
  }
  SECTION("a file at the path is left alone; a dead socket of this user is replaced") {
    const std::string path = base + "/r.sock";
    { std::ofstream(path) << "keep me"; }
    REQUIRE_THROWS_WITH(local_socket_bootstrap(path, 0, 2, milliseconds(500)), Contains("left alone"));
    CHECK(access(path.c_str(), F_OK) == 0);
    REQUIRE(unlink(path.c_str()) == 0);
    const int dead = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path.c_str());
    REQUIRE(bind(dead, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    ::close(dead);  // bound, never listened, closed: what a killed job leaves
    REQUIRE_THROWS_WITH(local_socket_bootstrap(path, 0, 2, milliseconds(300)), Contains("rank(s) 1 did not join"));
  }
}

TEST_CASE("socket bootstrap: a socket folder of another user is refused", "[cpu][bootstrap][security][root]") {
  const std::string base = test::fresh_dir("arfuse-bootstrap");
  REQUIRE(chown(base.c_str(), 65534, 65534) == 0);
  REQUIRE_THROWS_WITH(local_socket_bootstrap(base + "/r.sock", 0, 2, milliseconds(500)),
                      Contains("is owned by uid 65534, not by this user"));
}
