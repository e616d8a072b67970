// Progress and results of a warmup run: a progress bar on a terminal, one line per spec
// otherwise, the summary table, and the JSON report.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arfuse/jit/kernel_spec.hpp"

namespace arfuse::tools {

class Progress {
 public:
  Progress(const std::vector<jit::KernelSpec>& specs, bool quiet);
  void record(const nlohmann::json& line);
  void worker_died(pid_t pid, int status);
  void finish(unsigned long long cache_bytes, const std::string& dir, int jobs);
  void write_json(const std::string& path, const std::string& dir, int jobs) const;
  int failed() const;

 private:
  void draw_bar() const;
  const std::vector<jit::KernelSpec>& specs_;
  std::vector<nlohmann::json> results_;
  bool quiet_, terminal_;
  int done_ = 0;
  std::chrono::steady_clock::time_point start_;
  double seconds_ = 0;
};

// Reads result lines from every worker pipe until all are closed.
void collect_results(const std::vector<int>& pipes, Progress& progress);

}  // namespace arfuse::tools
