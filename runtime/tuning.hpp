// When to use the two-stage kernel instead of the one-stage kernel: a message-size threshold
// per target and world size. Embedded defaults; ARFUSE_TUNING=FILE replaces them. Every rank
// evaluates the same table on the same (world, bytes), so all ranks pick the same stage.
//
//   {"version": 1,
//    "targets": {"sm_90": {"2": {"two_stage_min_bytes": 4194304}, "4": {...}, "8": {...}},
//                "sm_90:virtual": {...}},
//    "measured": "free text: machine and date"}
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace arfuse {

class TuningTable {
 public:
  // Throws arfuse::Error naming the JSON path, the value and what is allowed.
  static TuningTable parse(const std::string& json_text, const std::string& origin);
  static TuningTable embedded_default();
  // ARFUSE_TUNING when set (a file), else the embedded default.
  static TuningTable from_environment();

  // 1 or 2. Groups whose ranks share a GPU look up "<target>:virtual" first.
  int stage_for(const std::string& target, int world, std::uint64_t message_bytes, bool virtual_ranks = false) const;
  std::uint64_t two_stage_min_bytes(const std::string& target, int world, bool virtual_ranks = false) const;
  const std::string& origin() const { return origin_; }

 private:
  std::map<std::string, std::map<int, std::uint64_t>> thresholds_;
  std::string origin_;
};

}  // namespace arfuse
