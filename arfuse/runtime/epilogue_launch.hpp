// The standalone epilogue's launch without its argument checks, for a caller that made them (the
// group's NCCL path runs it on the sum NCCL wrote).
#pragma once

#include "arfuse/context.hpp"
#include "arfuse/epilogue.hpp"
#include "arfuse/error.hpp"

namespace arfuse {

ARFUSE_API void launch_rmsnorm_quant(Context& ctx, const RmsnormQuantArgs& args, const Stream& stream);

}  // namespace arfuse
