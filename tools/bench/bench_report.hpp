// arfuse-bench output: the markdown table, JSON (which `arfuse-bench report` reads back), and an
// SVG chart of latency against token count, one panel per (hidden, output, world).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "bench_rows.hpp"

namespace arfuse::tools {

struct Report {
  std::string mode, device;
  double ceiling = 0;          // bytes/s of the fastest copy, same run
  std::string ceiling_source;  // which copy that was, and the others' figures
  double launch_floor_us = 0;  // an empty kernel per call, same run; 0 where not measured
  // How the calls' buffers were used: "rotating" (inputs and outputs through more than the L2)
  // or "fixed inputs" (one set, as kernel peers are often timed: what fits stays in the L2).
  std::string buffers = "rotating";
  std::vector<Row> rows;
};

void print_markdown(const Report& report);
nlohmann::json to_json(const Report& report);
// Throws Error naming what is missing when `json` is not a report this tool wrote.
Report report_from_json(const nlohmann::json& json, const std::string& origin);
// The JSON in the file at `path`; Error, its message starting with `what`, when it cannot be read
// or parsed.
nlohmann::json read_json(const std::string& path, const std::string& what);
// The report a run wrote with --json to `path`; Error when it cannot be read or is not one.
Report read_report(const std::string& path);
// Rows measured elsewhere (tools/bench/torch_bench.py --json) to show side by side.
std::vector<Row> peer_rows_from_json(const nlohmann::json& json, const std::string& origin);
void write_svg(const Report& report, const std::string& path);

}  // namespace arfuse::tools
