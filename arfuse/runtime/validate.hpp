// Argument checks of every launch entry point, made once per call before anything is planned
// or launched; each throws arfuse::Error whose message names the argument, what was wrong and
// what is allowed. The public validate_args (arfuse/allreduce.hpp, arfuse/epilogue.hpp) are these.
#pragma once

#include <string>

#include "arfuse/allreduce.hpp"
#include "arfuse/epilogue_args.hpp"

namespace arfuse {

namespace detail {

void require_pointer(const void* p, const char* name, const std::string& why_needed);
void require_aligned(const void* p, const char* name);
void require_tokens(int tokens, int capacity = -1);
void require_eps(float eps);

}  // namespace detail
}  // namespace arfuse
