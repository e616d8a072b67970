// Progress and results of a warmup run: a progress bar on a terminal, one line per spec
// otherwise, warnings from the workers once per run, what is stored on disk at the end, the
// summary table, and the JSON report.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "jit/kernel_spec.hpp"

namespace arfuse::tools {

class Progress {
 public:
  Progress(const std::vector<jit::KernelSpec>& specs, bool quiet);
  // One line from a worker: a spec's result, or {"warning": text}.
  void record(const nlohmann::json& line);
  // A spec that is not attempted (its target cannot be compiled); said once per target.
  void refuse(std::size_t index, const std::string& why);
  // `how`: describe_wait_status's words ("signal 25 (File size limit exceeded: ...)").
  void worker_died(pid_t pid, const std::string& how, int temporaries_removed);
  // Which compiled or cached specs are on disk (verified) at the end, and why the others are not.
  void check_stored(const std::string& dir, std::uint64_t max_bytes);
  void finish(unsigned long long cache_bytes, const std::string& dir, int jobs);
  void write_json(const std::string& path, const std::string& dir, int jobs) const;
  int failed() const;
  int stored() const { return stored_; }
  const std::vector<std::string>& not_stored_reasons() const { return not_stored_reasons_; }

 private:
  void draw_bar() const;
  int count(const char* status) const;
  const std::vector<jit::KernelSpec>& specs_;
  std::vector<nlohmann::json> results_;
  bool quiet_, terminal_;
  int done_ = 0;
  int stored_ = 0;
  bool checked_storage_ = false;
  std::set<std::string> warnings_;
  std::vector<std::string> not_stored_reasons_;
  std::chrono::steady_clock::time_point start_;
  double seconds_ = 0;
};

// Reads result lines from every worker pipe until all are closed.
void collect_results(const std::vector<int>& pipes, Progress& progress);

}  // namespace arfuse::tools
