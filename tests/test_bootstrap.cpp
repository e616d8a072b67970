// [cpu] The bootstrap: threads and forked processes exchange bytes; a missing rank times out
// with its number; mismatched configuration is refused on every rank; garbage is an error.
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "arfuse/base/error.hpp"
#include "arfuse/runtime/bootstrap.hpp"
#include "support.hpp"

using namespace arfuse;
using Catch::Contains;
using std::chrono::milliseconds;

namespace {

std::string socket_path() {
  static int counter = 0;
  return "/tmp/arfuse-bootstrap-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + ".sock";
}

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
  REQUIRE_THROWS_WITH(local_socket_bootstrap(socket_path(), 1, 3, milliseconds(200)), Contains("found no rank 0 listening"));
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

TEST_CASE("socket bootstrap: garbage from a peer is an error, not a hang", "[cpu][bootstrap]") {
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
  REQUIRE_THROWS_WITH(local_socket_bootstrap(path, 0, 2, milliseconds(3000)), Contains("garbage"));
  int status = 0;
  waitpid(pid, &status, 0);
}

TEST_CASE("callback bootstrap: the engine's allgather is checked", "[cpu][bootstrap]") {
  auto good = callback_bootstrap(1, 2, [](const std::string& mine) { return std::vector<std::string>{"zero", mine}; });
  CHECK(good->allgather("one") == std::vector<std::string>{"zero", "one"});
  auto short_result = callback_bootstrap(1, 3, [](const std::string& mine) { return std::vector<std::string>{"zero", mine}; });
  REQUIRE_THROWS_WITH(short_result->allgather("one"), Contains("returned 2 entries for a world of 3"));
  auto wrong_slot = callback_bootstrap(0, 2, [](const std::string& mine) { return std::vector<std::string>{"other", mine}; });
  REQUIRE_THROWS_WITH(wrong_slot->allgather("mine"), Contains("own bytes"));
  REQUIRE_THROWS_WITH(callback_bootstrap(2, 2, nullptr), Contains("rank 2 is outside 0..1"));
}
