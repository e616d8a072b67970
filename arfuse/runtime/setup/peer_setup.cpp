#include "runtime/setup/peer_setup.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"

#include "base/bounded_json.hpp"

namespace arfuse::detail {
namespace {

constexpr const char* kIdentityFormat = "arfuse-rank-identity-1";

}  // namespace

std::string to_hex(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out;
}

std::string from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) throw Error("odd-length hex string");
  auto digit = [&](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw Error(fmt::format("'{}' in a hex string from a peer is not a hex digit", c));
  };
  std::string out;
  for (std::size_t i = 0; i < hex.size(); i += 2) out += char(digit(hex[i]) * 16 + digit(hex[i + 1]));
  return out;
}

namespace {

std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

const std::string& process_token() {
  static const std::string token = [] {
    std::random_device rd;
    return fmt::format("{}-{:08x}{:08x}", ::getpid(), rd(), rd());
  }();
  return token;
}

}  // namespace

std::string RankIdentity::serialise() const {
  nlohmann::json j = {{"format", kIdentityFormat},
                      {"host", host},
                      {"boot_id", boot_id},
                      {"process", process},
                      {"pci_bus_id", pci_bus_id},
                      {"ordinal", ordinal},
                      {"signal", signal},
                      {"staging", staging},
                      {"gather", gather},
                      {"signal_handle", to_hex(signal_handle)},
                      {"staging_handle", to_hex(staging_handle)},
                      {"gather_handle", to_hex(gather_handle)},
                      {"nonce", nonce}};
  return j.dump();
}

RankIdentity RankIdentity::parse(const std::string& bytes, int rank) {
  try {
    nlohmann::json j;
    std::string why;
    if (!parse_json(bytes, j, why)) throw Error(why);
    if (j.at("format") != kIdentityFormat) throw Error("unknown identity format");
    RankIdentity r;
    r.host = j.at("host"), r.boot_id = j.at("boot_id"), r.process = j.at("process");
    r.pci_bus_id = j.at("pci_bus_id"), r.ordinal = j.at("ordinal");
    r.signal = j.at("signal"), r.staging = j.at("staging"), r.gather = j.at("gather");
    r.signal_handle = from_hex(j.at("signal_handle")), r.staging_handle = from_hex(j.at("staging_handle"));
    r.gather_handle = from_hex(j.at("gather_handle")), r.nonce = j.at("nonce");
    return r;
  } catch (const std::exception& e) {
    throw Error(
        fmt::format("rank {} sent a group handshake this release cannot read ({}): is every rank running "
                    "the same arfuse, through the same bootstrap?",
                    rank, e.what()));
  }
}

RankIdentity local_identity(const Device& device) {
  RankIdentity r;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  r.host = host;
  r.boot_id = read_first_line("/proc/sys/kernel/random/boot_id");
  r.process = process_token();
  r.pci_bus_id = device.pci_bus_id();
  r.ordinal = device.ordinal();
  r.nonce = std::random_device{}();
  return r;
}

std::vector<RankIdentity> exchange_identities(Bootstrap& bootstrap, const RankIdentity& mine) {
  const auto all = bootstrap.allgather(mine.serialise());
  std::vector<RankIdentity> out;
  for (int r = 0; r < int(all.size()); ++r) out.push_back(RankIdentity::parse(all[size_t(r)], r));
  return out;
}

std::string nodes_differ(const std::vector<RankIdentity>& ranks) {
  std::string differ;
  for (std::size_t r = 1; r < ranks.size(); ++r) {
    if (ranks[r].host != ranks[0].host || ranks[r].boot_id != ranks[0].boot_id) {
      differ += fmt::format("{}rank {} runs on {}", differ.empty() ? "" : ", ", r, ranks[r].host);
    }
  }
  return differ.empty() ? differ : fmt::format("the group spans nodes: rank 0 runs on {}, {}", ranks[0].host, differ);
}

bool same_process(const RankIdentity& a, const RankIdentity& b) {
  return a.host == b.host && a.boot_id == b.boot_id && a.process == b.process;
}

int max_ranks_per_device(const std::vector<RankIdentity>& ranks) {
  std::map<std::string, int> count;
  int most = 0;
  for (const auto& r : ranks) most = std::max(most, ++count[r.host + "/" + r.boot_id + "/" + r.pci_bus_id]);
  return most;
}

std::string gather_failures(Bootstrap& bootstrap, const std::string& mine) {
  const auto all = bootstrap.allgather(mine);
  std::string joined;
  for (int r = 0; r < int(all.size()); ++r) {
    if (!all[size_t(r)].empty()) joined += fmt::format("{}rank {}: {}", joined.empty() ? "" : "; ", r, all[size_t(r)]);
  }
  return joined;
}

std::uint32_t probe_value(std::uint32_t nonce, int writer, int reader) {
  std::uint32_t h = nonce ^ 0x9e3779b9u;
  for (std::uint32_t v : {std::uint32_t(writer), std::uint32_t(reader)}) h = (h ^ v) * 0x01000193u + 0x7f4a7c15u;
  return h | 1u;  // never 0, the value a cleared signal holds
}

void write_probes(const Device& device, const PeerBuffers& peers, int world, int me, std::uint32_t nonce) {
  for (int p = 0; p < world; ++p) {
    const std::uint32_t value = probe_value(nonce, me, p);
    void* slot = reinterpret_cast<char*>(peers.signal[p]) + offsetof(Signal, reserved) + 4u * unsigned(me);
    try {
      device.copy_to_device(slot, &value, sizeof(value));
    } catch (const DeviceError& e) {
      throw DeviceError(fmt::format("the write test (rank {} writing to rank {}): {}", me, p, e.what()), e.code());
    }
  }
}

std::string verify_probes(const DeviceBuffer& my_signal, int world, std::uint32_t nonce, int me) {
  std::vector<std::uint32_t> got(size_t(world), 0);
  my_signal.download(got.data(), got.size() * 4, offsetof(Signal, reserved));
  std::string missing;
  for (int w = 0; w < world; ++w) {
    if (got[size_t(w)] != probe_value(nonce, w, me)) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", w);
  }
  return missing.empty() ? missing
                         : fmt::format("the write test found no data from rank(s) {} in this rank's memory", missing);
}

}  // namespace arfuse::detail
