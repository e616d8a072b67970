// Sets of specs for cache warmup: the embedded default set, and the JSON config form
//   {"specs": [{"module": "rmsnorm_quant", "hidden": [6144, 8192], "dtype": ["bf16"],
//               "quant": ["none", "fp8"], "norm": ["rms", "gemma"]}],
//    "targets": ["sm_90"]}
// Every list is expanded as a cartesian product; an omitted field takes all its values (the
// default hidden sizes for "hidden"; "group" 128 and "scale" "f32" for the fp8_group modes,
// and without "quant" a block-scaled mode skips hidden sizes its group does not divide; for
// fused_ar and allreduce "graph_inputs" both the eager kernel and the one of captured calls); a
// single value may stand for a list of one.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "arfuse/error.hpp"

#include "jit/kernel_spec.hpp"

namespace arfuse::jit {

const std::vector<int>& default_hidden_sizes();  // 2048, 2880, 4096, 5120, 6144, 7168, 8192
const std::vector<int>& default_world_sizes();   // 2, 4, 8

struct SpecSet {
  std::vector<KernelSpec> specs;
  std::vector<std::string> targets;  // from the config's "targets", if any
};

// Every quant mode (fp8_group: group 128, fp32 scales).
const std::vector<Quant>& default_quants();

// Every module over its default product (default_quants, and per-token FP8's mirror; fused_ar and
// allreduce eager and captured), for each target.
std::vector<KernelSpec> default_specs(const std::vector<Target>& targets);

// Throws arfuse::Error naming the JSON path, the value and what is allowed.
SpecSet parse_spec_set(const nlohmann::json& config, const std::vector<Target>& targets);

}  // namespace arfuse::jit
