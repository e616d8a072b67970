// The standalone epilogue kernels, for a tensor that was all-reduced elsewhere:
//   rmsnorm_quant: residual add + RMSNorm/Gemma + optional per-token FP8, per-token-group FP8,
//                  MXFP4, static per-tensor FP8 or NVFP4 (contract steps 2-7e);
//   token_quant:   per-token FP8 of a tensor that already is y (step 7);
//   group_quant:   per-token-group FP8, MXFP4, static FP8 or NVFP4 of a tensor that already is y
//                  (steps 7b-7e alone): for the fused kernels' mirror output, their bytes.
// Their arguments and checks are arfuse/epilogue_args.hpp's.
#pragma once

#include "arfuse/context.hpp"
#include "arfuse/device.hpp"
#include "arfuse/epilogue_args.hpp"

namespace arfuse {

// Validate (arfuse::Error naming the argument), get the kernel, launch on `stream`.
ARFUSE_API void rmsnorm_quant(Context& ctx, const RmsnormQuantArgs& args, const Stream& stream);
ARFUSE_API void token_quant(Context& ctx, const TokenQuantArgs& args, const Stream& stream);
ARFUSE_API void group_quant(Context& ctx, const GroupQuantArgs& args, const Stream& stream);

}  // namespace arfuse
