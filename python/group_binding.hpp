// Binds the runtime's Group and standalone epilogue into arfuse._arfuse (group_binding.cpp), and
// the handles and call table of arfuse's PyTorch ops (op_table.cpp).
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>

#include "arfuse/context.hpp"
#include "arfuse/group.hpp"

#include "torch_ops/op_table.hpp"

namespace arfuse::python {

// peer_timeout and call_mismatch: the exception types module.cpp registered, which the
// translator added here fills with .rank (and .peer).
void bind_group(nanobind::module_& m, nanobind::handle peer_timeout, nanobind::handle call_mismatch);

// The standalone epilogue's Context of `device`, made on first use and kept.
Context& context_for(int device);
torch_ops::Fp8Dtype fp8_dtype_of(const Device& device);

// Communicator handles: `owner` is the group binding that releases them when it closes (null
// for a handle registered for tracing only, whose rank is null).
std::int64_t register_handle(const void* owner, Rank* rank, torch_ops::Fp8Dtype fp8);
void release_handles(const void* owner);
bool release_handle(std::int64_t handle);
bool handle_open(std::int64_t handle);
const torch_ops::OpTable& op_table();
// Throws the exception behind the calling thread's last failed table entry when `message`
// carries that entry's message (the torch extension turned it into a torch error); else returns.
void rethrow_op_failure(const std::string& message);

}  // namespace arfuse::python
