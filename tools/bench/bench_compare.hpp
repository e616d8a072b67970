// arfuse-bench compare: the same rows measured under several builds or template folders
// (ARFUSE_TEMPLATE_DIR), each in one or more runs saved with --json, side by side.
#pragma once

#include <string>
#include <vector>

#include "bench_report.hpp"

namespace arfuse::tools {

struct Variant {
  std::string label;         // "main", "pairs"
  std::vector<Report> runs;  // one report per --json file, in the order given
};

// "LABEL=FILE[,FILE...]": reads every file. UsageError for a malformed argument, Error for a
// file that cannot be read or is not a report this tool wrote.
Variant load_variant(const std::string& argument);

// One line per row (kernel, world, shape, output) found in any run: each variant's medians, run
// by run, and the change of their mean against the first variant's. False when a row that was
// checked was not bit-exact in some run.
bool print_comparison(const std::vector<Variant>& variants);

}  // namespace arfuse::tools
