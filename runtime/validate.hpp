// Argument checks shared by the launch entry points; each throws arfuse::Error whose message
// names the argument, what was wrong and what is allowed.
#pragma once

#include <string>

namespace arfuse::detail {

void require_pointer(const void* p, const char* name, const std::string& why_needed);
void require_aligned(const void* p, const char* name);
void require_tokens(int tokens, int capacity = -1);
void require_eps(float eps);

}  // namespace arfuse::detail
