#include "warmup_progress.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "cache/disk_cache.hpp"

#include "cli.hpp"

namespace arfuse::tools {

Progress::Progress(const std::vector<jit::KernelSpec>& specs, bool quiet)
    : specs_(specs),
      results_(specs.size()),
      quiet_(quiet),
      terminal_(isatty(STDOUT_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

void Progress::record(const nlohmann::json& line) {
  if (line.contains("warning")) {
    const std::string text = line.value("warning", ""), once = line.value("once", "");
    if (warnings_.insert(once.empty() ? text : once).second) {
      std::fprintf(stderr, "%sarfuse: warning: %s\n", terminal_ ? "\r\033[K" : "", text.c_str());
    }
    return;
  }
  const int i = line.value("index", -1);
  if (i < 0 || i >= int(results_.size())) return;
  results_[size_t(i)] = line;
  ++done_;
  const std::string status = line.value("status", "?");
  if (status == "failed") {
    std::fprintf(stderr, "%sFAILED %s: %s\n", terminal_ ? "\r\033[K" : "", specs_[size_t(i)].text().c_str(),
                 line.value("error", "").c_str());
  } else if (!quiet_ && !terminal_) {
    std::printf("[%d/%zu] %-8s %6.3f s  %s\n", done_, specs_.size(), status.c_str(), line.value("seconds", 0.0),
                specs_[size_t(i)].text().c_str());
  }
  if (!quiet_ && terminal_) draw_bar();
}

void Progress::refuse(std::size_t index, const std::string& why) {
  results_[index] = {{"index", index}, {"status", "failed"}, {"error", why}, {"seconds", 0.0}};
  ++done_;
}

void Progress::draw_bar() const {
  const int width = 40;
  const int filled = specs_.empty() ? width : int(double(done_) / double(specs_.size()) * width);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::printf("\r\033[K[%s%s] %d/%zu  %.1f s", std::string(size_t(filled), '#').c_str(),
              std::string(size_t(width - filled), '.').c_str(), done_, specs_.size(), elapsed);
  std::fflush(stdout);
}

void Progress::worker_died(pid_t pid, const std::string& how, int temporaries_removed) {
  std::fprintf(
      stderr, "warmup worker %d ended abnormally (%s); its specs not reported are failed%s\n", int(pid), how.c_str(),
      temporaries_removed > 0 ? fmt::format("; {} temporaries it left removed", temporaries_removed).c_str() : "");
}

int Progress::count(const char* status) const {
  int n = 0;
  for (const auto& r : results_) n += (!r.is_null() && r.value("status", "") == status) ? 1 : 0;
  return n;
}

int Progress::failed() const {
  int n = 0;
  for (const auto& r : results_) n += (r.is_null() || r.value("status", "") == "failed") ? 1 : 0;
  return n;
}

void Progress::check_stored(const std::string& dir, std::uint64_t max_bytes) {
  checked_storage_ = true;
  stored_ = 0;
  std::map<std::string, int> reasons;
  const cache::DiskCache disk(dir, max_bytes);
  for (auto& r : results_) {
    if (r.is_null() || r.value("status", "") == "failed") continue;
    const std::string file = r.value("file", "");
    const bool on_disk = !file.empty() && disk.check(file).ok();
    r["stored"] = on_disk;
    if (on_disk) {
      ++stored_;
      continue;
    }
    std::string why = r.value("store_problem", "");
    if (why.empty())
      why = fmt::format(
          "removed after it was written: the size cap is {} bytes (ARFUSE_CACHE_MAX_BYTES), "
          "or another process removed it",
          max_bytes);
    r["store_problem"] = why;
    ++reasons[why];
  }
  not_stored_reasons_.clear();
  for (const auto& [why, n] : reasons) not_stored_reasons_.push_back(fmt::format("{} specs not stored: {}", n, why));
}

void Progress::finish(unsigned long long cache_bytes, const std::string& dir, int jobs) {
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  for (size_t i = 0; i < results_.size(); ++i) {
    if (results_[i].is_null()) {
      results_[i] = {
          {"index", i}, {"status", "failed"}, {"error", "no result: its worker process died"}, {"seconds", 0.0}};
      std::fprintf(stderr, "FAILED %s: no result (worker died)\n", specs_[i].text().c_str());
    }
  }
  if (terminal_ && !quiet_) std::printf("\n");
  const std::string stored = checked_storage_ ? std::to_string(stored_) : "- (memory only)";
  std::printf("\n| specs | compiled | hits | stored | failed | time | jobs | cache size |\n");
  std::printf("|------:|---------:|-----:|-------:|-------:|-----:|-----:|-----------:|\n");
  std::printf("| %zu | %d | %d | %s | %d | %.2f s | %d | %s |\n", specs_.size(), count("compiled"), count("hit"),
              stored.c_str(), failed(), seconds_, jobs, human_bytes(cache_bytes).c_str());
  for (const auto& line : not_stored_reasons_) std::fprintf(stderr, "NOT STORED: %s\n", line.c_str());
  std::printf("cache: %s\n", checked_storage_ ? dir.c_str() : "(none: --memory-only)");
}

void Progress::write_json(const std::string& path, const std::string& dir, int jobs) const {
  nlohmann::json report{{"specs", specs_.size()}, {"failed", failed()},
                        {"seconds", seconds_},    {"jobs", jobs},
                        {"cache_dir", dir},       {"compiled", count("compiled")},
                        {"hits", count("hit")},   {"memory_only", !checked_storage_}};
  if (checked_storage_) report["stored"] = stored_, report["not_stored"] = not_stored_reasons_;
  nlohmann::json entries = nlohmann::json::array();
  for (size_t i = 0; i < results_.size(); ++i) {
    nlohmann::json e = results_[i];
    e.erase("index");
    e["spec"] = specs_[i].text();
    entries.push_back(e);
  }
  report["entries"] = entries;
  std::ofstream out(path);
  if (!out) throw std::runtime_error(fmt::format("cannot write the JSON report {}", path));
  out << report.dump(2) << "\n";
}

void collect_results(const std::vector<int>& pipes, Progress& progress) {
  std::vector<pollfd> fds;
  std::vector<std::string> pending(pipes.size());
  for (int fd : pipes) fds.push_back(pollfd{fd, POLLIN, 0});
  size_t open = pipes.size();
  while (open > 0) {
    if (poll(fds.data(), fds.size(), -1) < 0) continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[65536];
      ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1, --open;
        continue;
      }
      pending[i].append(buffer, size_t(n));
      for (size_t nl; (nl = pending[i].find('\n')) != std::string::npos;) {
        const std::string line = pending[i].substr(0, nl);
        pending[i].erase(0, nl + 1);
        try {
          progress.record(nlohmann::json::parse(line));
        } catch (const nlohmann::json::exception&) {
          std::fprintf(stderr, "warmup: ignoring a garbled worker line\n");
        }
      }
    }
  }
}

}  // namespace arfuse::tools
