// Helpers that both the device code and the host build compile (signal layout, the FP8
// divider): device code sees them as host+device functions, the host build as plain C++.
#pragma once

#if defined(ARFUSE_VENDOR_NVIDIA) || defined(ARFUSE_VENDOR_AMD)
#define ARFUSE_HOST_DEVICE __host__ __device__
#else
#define ARFUSE_HOST_DEVICE
#endif
