#include "bench_compare.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <tuple>

#include "arfuse/error.hpp"

#include "cli.hpp"

namespace arfuse::tools {
namespace {

using RowKey = std::tuple<std::string, int, int, int, std::string>;  // kernel, world, tokens, hidden, out

RowKey key_of(const Row& r) { return {r.kind, r.world, r.shape.tokens, r.shape.hidden, r.out}; }

// One variant's runs of one row.
struct Measured {
  std::vector<double> medians;
  bool any_checked = false, all_exact = true;
  double mean() const {
    double sum = 0;
    for (double m : medians) sum += m;
    return sum / double(medians.size());
  }
};

}  // namespace

Variant load_variant(const std::string& argument) {
  const auto equals = argument.find('=');
  if (equals == std::string::npos || equals == 0 || equals + 1 == argument.size()) {
    throw UsageError(fmt::format("compare: '{}' is not LABEL=FILE[,FILE...]", argument));
  }
  Variant v{argument.substr(0, equals), {}};
  for (const std::string& file : split_commas(argument.substr(equals + 1))) {
    if (file.empty()) throw UsageError(fmt::format("compare: an empty file name in '{}'", argument));
    v.runs.push_back(read_report(file));
  }
  return v;
}

bool print_comparison(const std::vector<Variant>& variants) {
  std::vector<RowKey> order;
  std::map<RowKey, std::vector<Measured>> rows;
  for (std::size_t v = 0; v < variants.size(); ++v) {
    for (const Report& run : variants[v].runs) {
      for (const Row& r : run.rows) {
        auto [it, inserted] = rows.try_emplace(key_of(r), std::vector<Measured>(variants.size()));
        if (inserted) order.push_back(key_of(r));
        Measured& m = it->second[v];
        m.medians.push_back(r.t.median_us);
        if (r.measured_exactness) m.any_checked = true, m.all_exact = m.all_exact && r.exact;
      }
    }
  }
  std::string header = "| kernel | W | shape | out |", rule = "|---|---:|---|---|";
  for (std::size_t v = 0; v < variants.size(); ++v) {
    header += fmt::format(" {} µs |", variants[v].label);
    rule += "---:|";
    if (v > 0) header += fmt::format(" {} / {} |", variants[v].label, variants[0].label), rule += "---:|";
  }
  std::printf("%s exact |\n%s---|\n", header.c_str(), rule.c_str());
  bool all_exact = true;
  for (const RowKey& key : order) {
    const auto& [kernel, world, tokens, hidden, out] = key;
    const std::vector<Measured>& measured = rows.at(key);
    std::string line = fmt::format("| {} | {} | {}x{} | {} |", kernel, world, tokens, hidden, out);
    bool checked = false, exact = true;
    for (std::size_t v = 0; v < variants.size(); ++v) {
      const Measured& m = measured[v];
      std::string values;
      for (double median : m.medians) values += fmt::format("{}{:.2f}", values.empty() ? "" : " ", median);
      line += fmt::format(" {} |", m.medians.empty() ? "-" : values);
      if (v > 0) {
        const Measured& first = measured[0];
        const bool both = !m.medians.empty() && !first.medians.empty();
        line += both ? fmt::format(" {:+.1f} % |", 100.0 * (m.mean() / first.mean() - 1.0)) : " - |";
      }
      checked = checked || m.any_checked;
      exact = exact && m.all_exact;
    }
    line += checked ? (exact ? " bit-exact |" : " NO |") : " n/a |";
    std::printf("%s\n", line.c_str());
    all_exact = all_exact && exact;
  }
  return all_exact;
}

}  // namespace arfuse::tools
