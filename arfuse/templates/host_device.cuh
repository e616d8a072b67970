// Helpers that both the device code and the host build compile (signal layout, the FP8
// divider, the block-scaled steps, the bit casts): device code sees them as host+device
// functions, the host build as plain C++.
#pragma once

#if defined(ARFUSE_VENDOR_NVIDIA) || defined(ARFUSE_VENDOR_AMD)
#define ARFUSE_HOST_DEVICE __host__ __device__
#else
#define ARFUSE_HOST_DEVICE
#endif

namespace arfuse {

// The fp32 bit casts every template uses (the device intrinsics; memcpy in the host build).
ARFUSE_HOST_DEVICE inline unsigned float_to_bits(float x) {
#if defined(ARFUSE_VENDOR_NVIDIA) || defined(ARFUSE_VENDOR_AMD)
  return __float_as_uint(x);
#else
  unsigned u;
  __builtin_memcpy(&u, &x, sizeof u);
  return u;
#endif
}

ARFUSE_HOST_DEVICE inline float bits_to_float(unsigned u) {
#if defined(ARFUSE_VENDOR_NVIDIA) || defined(ARFUSE_VENDOR_AMD)
  return __uint_as_float(u);
#else
  float x;
  __builtin_memcpy(&x, &u, sizeof x);
  return x;
#endif
}

}  // namespace arfuse
