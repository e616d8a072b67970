#include "runtime/graph_inputs.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"

#include "base/bounded_json.hpp"
#include "runtime/setup/peer_setup.hpp"
#include "templates/codes.cuh"

namespace arfuse {

std::uint64_t captured_call(const jit::KernelSpec& spec, int tokens) {
  return spec.packed() | codes::TokensBits::put(unsigned(tokens));
}

namespace {

std::string call_text(std::uint64_t call) {
  const jit::KernelSpec spec = jit::KernelSpec::unpacked(call & ~codes::TokensBits::put(~0u), Target::parse("sm_90"));
  const std::string text = spec.text();
  return fmt::format("{} rows of {}", codes::TokensBits::get(call), text.substr(0, text.rfind('/')));
}

}  // namespace

std::vector<std::vector<bool>> readable_inputs(const std::vector<RecordedCalls>& ranks) {
  if (ranks.empty()) return {};
  const RecordedCalls& first = ranks[0];
  for (std::size_t r = 1; r < ranks.size(); ++r) {
    const RecordedCalls& other = ranks[r];
    if (other.calls.size() != first.calls.size())
      throw Error(
          fmt::format("rank 0 captured {} calls since the inputs were last registered, rank {} {}: every rank "
                      "must capture the same calls",
                      first.calls.size(), r, other.calls.size()));
    for (std::size_t k = 0; k < first.calls.size(); ++k) {
      if (other.calls[k] != first.calls[k])
        throw Error(
            fmt::format("captured call {} differs between rank 0 ({}) and rank {} ({}): every rank must "
                        "capture the same calls in the same order",
                        k, call_text(first.calls[k]), r, call_text(other.calls[k])));
    }
  }
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].offered.size() != ranks[r].calls.size())
      throw Error(fmt::format("rank {} offered {} inputs for {} captured calls", r, ranks[r].offered.size(),
                              ranks[r].calls.size()));
  }
  std::vector<std::vector<bool>> readable(first.calls.size(), std::vector<bool>(ranks.size()));
  for (std::size_t k = 0; k < readable.size(); ++k) {
    for (std::size_t r = 0; r < ranks.size(); ++r) readable[k][r] = ranks[r].offered[k];
  }
  return readable;
}

std::string encode_recorded(const std::vector<std::uint64_t>& calls, const std::vector<OfferedInput>& inputs) {
  nlohmann::json offered = nlohmann::json::array();
  for (const OfferedInput& in : inputs) {
    offered.push_back(in.handle.empty() ? nlohmann::json(nullptr)
                                        : nlohmann::json{{"handle", detail::to_hex(in.handle)}, {"offset", in.offset}});
  }
  return nlohmann::json{{"calls", calls}, {"inputs", offered}}.dump();
}

void decode_recorded(const std::string& text, int rank, std::vector<std::uint64_t>& calls,
                     std::vector<OfferedInput>& inputs) {
  try {
    nlohmann::json j;
    std::string why;
    if (!parse_json(text, j, why)) throw Error(why);
    const nlohmann::json& listed = j.at("calls");
    if (!listed.is_array()) throw Error("\"calls\" must be a list");
    calls.clear();
    for (const auto& c : listed) {
      if (!c.is_number_unsigned()) throw Error(fmt::format("a call is {}, not a call descriptor", c.dump()));
      calls.push_back(c.get<std::uint64_t>());
    }
    const nlohmann::json& offered = j.at("inputs");
    if (!offered.is_array() || offered.size() != calls.size())
      throw Error("\"inputs\" must be a list with one entry per call");
    inputs.assign(calls.size(), OfferedInput{});
    for (std::size_t k = 0; k < calls.size(); ++k) {
      if (offered[k].is_null()) continue;
      inputs[k].handle = detail::from_hex(offered[k].at("handle").get<std::string>());
      const nlohmann::json& offset = offered[k].at("offset");
      if (!offset.is_number_unsigned()) throw Error(fmt::format("an offset is {}", offset.dump()));
      inputs[k].offset = offset.get<std::uint64_t>();
      if (inputs[k].handle.empty()) throw Error("an offered input has an empty handle");
    }
  } catch (const std::exception& e) {
    throw Error(fmt::format("rank {} sent a list of captured calls this release cannot read ({})", rank, e.what()));
  }
}

std::string encode_unopened(const std::vector<UnopenedInput>& unopened) {
  nlohmann::json pairs = nlohmann::json::array();
  for (const UnopenedInput& u : unopened) pairs.push_back({u.call, u.rank});
  return pairs.dump();
}

std::vector<UnopenedInput> decode_unopened(const std::string& text, int from, std::size_t calls, int world) {
  try {
    nlohmann::json pairs;
    std::string why;
    if (!parse_json(text, pairs, why)) throw Error(why);
    if (!pairs.is_array()) throw Error("not a list");
    std::vector<UnopenedInput> out;
    for (const auto& pair : pairs) {
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_unsigned() || !pair[1].is_number_unsigned())
        throw Error(fmt::format("{} is not a [call, rank] pair", pair.dump()));
      const auto call = pair[0].get<std::uint64_t>(), rank = pair[1].get<std::uint64_t>();
      if (call >= calls || rank >= std::uint64_t(world))
        throw Error(
            fmt::format("[{}, {}] names no captured call of the group's {} and {} ranks", call, rank, calls, world));
      out.push_back(UnopenedInput{std::size_t(call), int(rank)});
    }
    return out;
  } catch (const std::exception& e) {
    throw Error(fmt::format("rank {} sent a list of unopened inputs this release cannot read ({})", from, e.what()));
  }
}

}  // namespace arfuse
