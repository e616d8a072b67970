// KernelSpec: one specialisation of one module, the first stage of the JIT pipeline
//   KernelSpec -> Source -> CompiledCode -> CacheEntry -> LoadedModule -> Kernel.
// Fields a module does not use are held at their defaults, so two specs are equal exactly
// when they build the same kernel. Canonical text form (also the JSON form's "spec" field):
//   rmsnorm_quant/h6144/bf16/fp8/rms/sm_90
//   token_quant/h6144/bf16/sm_90
//   fused_ar/h6144/bf16/fp8/mirror/gemma/w4/s2/sm_90            (the mirror after the quant mode)
//   fused_ar/h7168/bf16/fp8_group/g128/ue8m0_f32/rms/w8/s1/sm_90   (group size, scale format)
//   rmsnorm_quant/h2880/bf16/mxfp4/rms/sm_90
//   group_quant/h7168/bf16/fp8_group/g128/e8m0/sm_90
//   allreduce/h6144/bf16/w4/s1/sm_90
//   rmsnorm_quant/h6144/bf16/fp8/rms/views/sm_90    (strided or padded tensors)
//   fused_ar/h6144/bf16/fp8/rms/w4/s1/graph/sm_90   (a call captured in a graph; after views)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "arfuse/error.hpp"
#include "arfuse/modes.hpp"
#include "arfuse/target.hpp"

#include "templates/limits.cuh"

namespace arfuse::jit {

// group_quant: a block-scaled or static step alone on y (the modes group_quant_takes()), as token_quant is
// step 7 alone.
enum class Module { rmsnorm_quant, token_quant, fused_ar, allreduce, group_quant };

struct KernelSpec {
  Module module = Module::rmsnorm_quant;
  int hidden = 0;
  DType dtype = DType::bf16;
  // quant, norm, and for the fp8_group modes group size and scale format; the scale layout is no
  // part of a kernel (it is the scales' strides, passed at launch) and canonical() resets it.
  EpilogueMode mode;
  int world = 1;  // fused_ar, allreduce
  int stage = 1;  // fused_ar, allreduce
  // The kernel reads the tensors' row strides and pads out; false: contiguous rows, the widths
  // compile-time constants (the kernels contiguous calls take).
  bool views = false;
  // fused_ar, allreduce: the kernel of a call captured in a graph, which reads each rank's rows
  // where the call's input slot says (templates/signal.cuh, InputSlot).
  bool graph_inputs = false;
  Target target = Target::parse("sm_90");

  // Throws arfuse::Error naming the bad field, its value and what is allowed.
  void validate() const;
  // This spec with the fields its module does not use reset to their defaults.
  KernelSpec canonical() const;
  std::string text() const;
  // The canonical fields other than the target in one number (the fields of templates/codes.cuh):
  // equal for two specs of one target exactly when they build the same kernel (a key that costs
  // no string). unpacked(packed(), target) is canonical().
  std::uint64_t packed() const;
  static KernelSpec unpacked(std::uint64_t code, const Target& target);
  // The kernel's quant code (templates/quant_table.cuh, quant_code): the mode and its mirror in one number.
  int quant_code() const;
  static KernelSpec parse(std::string_view text);
  nlohmann::json json() const;
  static KernelSpec from_json(const nlohmann::json& json);

  bool operator==(const KernelSpec& other) const { return text() == other.text(); }
  bool operator!=(const KernelSpec& other) const { return !(*this == other); }
};

// An EpilogueMode as one number, in the fields a spec's packed() and a call descriptor use (the
// PyTorch ops' epilogue_mode): quant code (mode and mirror), norm, group size, scale format and
// scale layout. A group size no kernel takes encodes as none (validate() then refuses it for
// fp8_group). mode_of_code is empty for a number mode_code does not make.
std::int64_t mode_code(const EpilogueMode& mode);
std::optional<EpilogueMode> mode_of_code(std::int64_t code);

bool uses_quant(Module module);
// Whether `module` has a kernel for `quant`: group_quant for the modes group_quant_takes(); every
// other module for every mode.
bool takes_quant(Module module, Quant quant);
bool uses_norm(Module module);
// Whether `module` writes y in T beside its quantised output: the epilogue kernels, not group_quant.
bool takes_mirror(Module module);
bool uses_world(Module module);

const char* to_string(Module value);
Module parse_module(std::string_view text);
const std::vector<Module>& all_modules();

}  // namespace arfuse::jit
