// The modes of arfuse-bench, one function each (tools/bench/bench.cpp dispatches).
#pragma once

#include <vector>

#include "bench_rows.hpp"
#include "cli.hpp"

namespace arfuse::tools {

std::vector<Row> bench_epilogue(Context& ctx, const CommandLine& cl);
// The Group's fused all-reduce + epilogue against the unfused path, interleaved.
std::vector<Row> bench_fused(const CommandLine& cl);
// The plain all-reduce, one-stage against two-stage, interleaved.
std::vector<Row> bench_allreduce(const CommandLine& cl);
// Sweeps the one-/two-stage crossover per world size; writes the tuning JSON to --tune FILE.
void bench_tune(const CommandLine& cl);
void bench_compile(const CommandLine& cl);

}  // namespace arfuse::tools
