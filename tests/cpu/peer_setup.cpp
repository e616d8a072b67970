// [cpu] The multi-process group handshake without a GPU: rank identities survive the trip
// through a bootstrap and garbage is refused by rank; node and device accounting; failures
// reach every rank; mismatched group options are refused on every rank before any rank
// touches a device; NCCL's absence is reported, not fatal.
#include "runtime/setup/peer_setup.hpp"

#include <cstdlib>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"
#include "arfuse/group.hpp"

#include "runtime/setup/nccl.hpp"

#include "support.hpp"

using namespace arfuse;
using namespace arfuse::detail;
using Catch::Contains;
using std::chrono::milliseconds;

namespace {

RankIdentity sample_identity() {
  RankIdentity r;
  r.host = "node-a", r.boot_id = "boot-1", r.process = "123-abc", r.pci_bus_id = "0000:19:00.0", r.ordinal = 3;
  r.signal = 0x7f0000001000ull, r.staging = 0x7f0000200000ull, r.gather = 0x7f0000400000ull;
  r.signal_handle = std::string(64, '\x01');
  r.staging_handle = std::string("\x00\xff", 2) + std::string(62, 'x');
  r.gather_handle = "";
  r.nonce = 0xdeadbeef;
  return r;
}

// Runs body(rank, bootstrap) on `world` threads meeting in one rendezvous; returns each
// rank's exception message ("" when it returned normally).
std::vector<std::string> on_threads(int world, const std::function<void(Bootstrap&)>& body) {
  InProcessRendezvous rendezvous(world, milliseconds(5000));
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto b = rendezvous.join(r);
      try {
        body(*b);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace

TEST_CASE("rank identities round-trip, and garbage names the rank that sent it", "[cpu][group][handshake]") {
  const RankIdentity a = sample_identity();
  const RankIdentity b = RankIdentity::parse(a.serialise(), 2);
  CHECK(b.host == a.host);
  CHECK(b.boot_id == a.boot_id);
  CHECK(b.process == a.process);
  CHECK(b.pci_bus_id == a.pci_bus_id);
  CHECK(b.ordinal == a.ordinal);
  CHECK(b.signal == a.signal);
  CHECK(b.staging == a.staging);
  CHECK(b.gather == a.gather);
  CHECK(b.signal_handle == a.signal_handle);
  CHECK(b.staging_handle == a.staging_handle);
  CHECK(b.gather_handle.empty());
  CHECK(b.nonce == a.nonce);
  REQUIRE_THROWS_WITH(RankIdentity::parse("not json", 3), Contains("rank 3") && Contains("same arfuse"));
  REQUIRE_THROWS_WITH(RankIdentity::parse(R"({"format":"other"})", 1), Contains("rank 1"));
  std::string truncated = a.serialise();
  truncated.resize(truncated.size() / 2);
  REQUIRE_THROWS_WITH(RankIdentity::parse(truncated, 5), Contains("rank 5"));
  // A handle that is not hex (upper-case digits included: the sender writes lower case).
  for (const char* bad : {"0g", "0A", "+1", " 1"}) {
    auto j = nlohmann::json::parse(a.serialise());
    j["signal_handle"] = bad;
    REQUIRE_THROWS_WITH(RankIdentity::parse(j.dump(), 6), Contains("rank 6") && Contains("is not a hex digit"));
  }
}

TEST_CASE("nodes, processes and GPUs are told apart from the identities", "[cpu][group][handshake]") {
  RankIdentity a = sample_identity(), b = sample_identity(), c = sample_identity();
  CHECK(nodes_differ({a, b, c}).empty());
  CHECK(max_ranks_per_device({a, b, c}) == 3);
  b.pci_bus_id = "0000:2a:00.0";
  CHECK(max_ranks_per_device({a, b, c}) == 2);
  c.pci_bus_id = "0000:3b:00.0";
  CHECK(max_ranks_per_device({a, b, c}) == 1);
  CHECK(same_process(a, b));
  b.process = "456-def";
  CHECK_FALSE(same_process(a, b));
  c.host = "node-b";
  CHECK_THAT(nodes_differ({a, b, c}), Contains("spans nodes") && Contains("rank 2 runs on node-b"));
  c.host = a.host, c.boot_id = "boot-2";  // same name, another machine (or a reboot)
  CHECK_FALSE(nodes_differ({a, b, c}).empty());
  // The same GPU bus id on two nodes is two GPUs.
  c.pci_bus_id = a.pci_bus_id;
  CHECK(max_ranks_per_device({a, c}) == 1);
}

TEST_CASE("probe values are distinct per writer and reader and never zero", "[cpu][group][handshake]") {
  std::set<std::uint32_t> seen;
  for (int w = 0; w < 8; ++w) {
    for (int r = 0; r < 8; ++r) {
      const auto v = probe_value(0x12345678u, w, r);
      CHECK(v != 0u);
      seen.insert(v);
    }
  }
  CHECK(seen.size() == 64);
  CHECK(probe_value(1, 0, 1) != probe_value(2, 0, 1));  // a stale value from an earlier group does not pass
}

TEST_CASE("one rank's failure reaches every rank, naming it", "[cpu][group][handshake]") {
  std::vector<std::string> seen(3);
  const auto errors = on_threads(3, [&](Bootstrap& b) {
    seen[size_t(b.rank())] = gather_failures(b, b.rank() == 1 ? "cannot open rank 2's buffers" : "");
  });
  for (const auto& e : errors) CHECK(e.empty());
  for (const auto& s : seen) CHECK(s == "rank 1: cannot open rank 2's buffers");
  const auto quiet = on_threads(2, [&](Bootstrap& b) { CHECK(gather_failures(b, "").empty()); });
  for (const auto& e : quiet) CHECK(e.empty());
}

TEST_CASE("ranks that disagree on the group's options are refused on every rank, before any device work",
          "[cpu][group][handshake]") {
  struct Mismatch {
    const char* what;
    std::function<void(GroupOptions&)> change;
  };
  const std::vector<Mismatch> mismatches = {
      {"max_tokens", [](GroupOptions& o) { o.max_tokens = 1024; }},
      {"max_hidden", [](GroupOptions& o) { o.max_hidden = 6144; }},
      {"the dtype", [](GroupOptions& o) { o.dtype = DType::f16; }},
      {"the transport", [](GroupOptions& o) { o.transport = Transport::custom; }},
      {"the timeout", [](GroupOptions& o) { o.timeout = milliseconds(100); }},
  };
  for (const auto& m : mismatches) {
    INFO(m.what);
    const auto errors = on_threads(3, [&](Bootstrap& b) {
      std::shared_ptr<Bootstrap> shared(&b, [](Bootstrap*) {});
      GroupOptions o;
      o.devices = {0}, o.bootstrap = shared, o.max_tokens = 512, o.max_hidden = 8192, o.dtype = DType::bf16;
      if (b.rank() == 2) m.change(o);
      Group group(o);
    });
    for (int r = 0; r < 3; ++r) {
      INFO("rank " << r);
      CHECK_THAT(errors[size_t(r)], Contains("disagree on " + std::string(m.what)) && Contains("rank 2 has"));
    }
  }
}

TEST_CASE("a missing NCCL is reported with the library it looked for", "[cpu][group][nccl]") {
  const char* saved = std::getenv("ARFUSE_NCCL_LIBRARY");
  const std::string restore = saved ? saved : "";
  setenv("ARFUSE_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  // Loading is attempted once per process; only a process that never loaded NCCL sees this path.
  const std::string why = nccl_unavailable_reason();
  if (!why.empty()) CHECK_THAT(why, Contains("NCCL") && Contains("/nonexistent/libnccl.so.2"));
  if (saved)
    setenv("ARFUSE_NCCL_LIBRARY", restore.c_str(), 1);
  else
    unsetenv("ARFUSE_NCCL_LIBRARY");
}
