// Argument checks of every launch entry point, made once per call before anything is planned
// or launched; each throws arfuse::Error whose message names the argument, what was wrong and
// what is allowed. The public validate_args (arfuse/group.hpp, arfuse/epilogue.hpp) are these.
#pragma once

#include <string>

#include "arfuse/epilogue.hpp"
#include "arfuse/group.hpp"
#include "arfuse/runtime/plan/plan.hpp"

namespace arfuse {

// Throws Error when the group is closed or `dtype` is not the one it was created for.
void check_group_open(const Group& group, DType dtype);

// A rank's call checked against its group (open, dtype, capacity) and on its own; its shape.
CallShape validate_call(const Rank& rank, const AllreduceRmsnormArgs& args);
CallShape validate_call(const Rank& rank, const AllreduceArgs& args);

// Whether a validated call's tensors need the spec's views kernels: a row stride other than its
// row's width, or a padded out.
bool is_view(const RmsnormQuantArgs& args);
bool is_view(const AllreduceArgs& args);
bool is_view(const TokenQuantArgs& args);
bool is_view(const GroupQuantArgs& args);

namespace detail {

void require_pointer(const void* p, const char* name, const std::string& why_needed);
void require_aligned(const void* p, const char* name);
void require_tokens(int tokens, int capacity = -1);
void require_eps(float eps);

}  // namespace detail
}  // namespace arfuse
