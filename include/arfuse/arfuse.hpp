// arfuse: fused all-reduce + residual add + RMSNorm + quantisation for the GPUs of one node,
// JIT-compiled per shape and mode into a persistent kernel cache. This header brings in the
// whole public API:
//   group.hpp      Group and Rank: the fused all-reduce and the plain one across the ranks
//   allreduce.hpp  their options and call arguments, checked without a GPU (validate_*)
//   bootstrap.hpp  how the ranks of one group meet (threads, a UNIX socket, the engine's allgather)
//   epilogue.hpp   the standalone epilogue calls on a Context, for a sum made elsewhere
//   modes.hpp      DType and EpilogueMode (quant, norm, group size, scale format and layout)
//   context.hpp    one device and its kernel cache;  device.hpp  Device, Stream, buffers
//   cache.hpp      where compiled kernels are kept;  settings.hpp  the ARFUSE_* variables
//   error.hpp      arfuse::Error and its kinds;      target.hpp, version.hpp
#pragma once

#include "arfuse/allreduce.hpp"
#include "arfuse/bootstrap.hpp"
#include "arfuse/cache.hpp"
#include "arfuse/context.hpp"
#include "arfuse/device.hpp"
#include "arfuse/epilogue.hpp"
#include "arfuse/epilogue_args.hpp"
#include "arfuse/error.hpp"
#include "arfuse/group.hpp"
#include "arfuse/modes.hpp"
#include "arfuse/quant_modes.hpp"
#include "arfuse/settings.hpp"
#include "arfuse/target.hpp"
#include "arfuse/version.hpp"
