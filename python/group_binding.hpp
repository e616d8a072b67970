// Binds the runtime's Group and standalone epilogue into arfuse._arfuse (group_binding.cpp).
#pragma once

#include <nanobind/nanobind.h>

namespace arfuse::python {

// peer_timeout and call_mismatch: the exception types module.cpp registered, which the
// translator added here fills with .rank (and .peer).
void bind_group(nanobind::module_& m, nanobind::handle peer_timeout, nanobind::handle call_mismatch);

}  // namespace arfuse::python
