// The one file in templates/ that knows the vendor. Everything vendor-specific that the
// kernels need lives here: integer types, warp size and shuffles, fences and scoped atomics,
// the clock, 16-byte loads that bypass L1, and f16/bf16/fp8 conversions.
//
// The JIT defines, from the target (jit/render.cpp):
//   ARFUSE_VENDOR_NVIDIA or ARFUSE_VENDOR_AMD
//   ARFUSE_WARP_SIZE      32 or 64
//   ARFUSE_FP8_FNUZ       1 for e4m3fnuz (max 240, gfx942), 0 for e4m3fn (max 448)
//   ARFUSE_HW_FP8         1 where the hardware converts f32 -> e4m3 (NVIDIA sm_89+)
//   ARFUSE_HW_PAIRED_F16  1 where the hardware rounds two f32 to bf16x2/f16x2 in one
//                         instruction and has a NaN-keeping max (NVIDIA sm_80+)
// No toolkit header is included, so a compile is fast and the same on every machine.
#pragma once

#if !defined(ARFUSE_VENDOR_NVIDIA) && !defined(ARFUSE_VENDOR_AMD)
#error "arfuse templates are compiled through arfuse::jit, which defines the vendor"
#endif

#include "host_device.cuh"  // the bit casts

namespace arfuse {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// Namespace-scope constants are inline (external linkage): an internal-linkage symbol gets a
// per-process name from the compiler, which would make compiled code differ run to run.
inline constexpr int kWarpSize = ARFUSE_WARP_SIZE;

// Storage types; the kernels never do arithmetic in them, only widen and round.
struct f16_t {
  u16 bits;
};
struct bf16_t {
  u16 bits;
};

// 16 bytes: 8 elements of f16/bf16, the unit every kernel loads and stores.
struct alignas(16) Vec16 {
  u32 w[4];
};
struct alignas(8) Vec8 {
  u32 w[2];
};

// __launch_bounds__ with a minimum of resident blocks per multiprocessor, which caps the
// registers a thread may use; 0 is no minimum (the same code as no second argument, where 1
// would lift the compiler's own register heuristics). AMD's second argument means something
// else (waves per EU), so there only the block size is given.
#if defined(ARFUSE_VENDOR_NVIDIA)
#define ARFUSE_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads, min_blocks)
#else
#define ARFUSE_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads)
#endif

// ---- programmatic dependent launch ------------------------------------------------------

// Every arfuse kernel begins with wait_for_previous_kernel, before its first global memory
// access: launched with programmatic dependency (NVIDIA sm_90+), it waits there until the
// kernel before it on the stream has finished and its writes are visible; launched without, it
// returns at once. let_next_kernel_start lets the kernel after it be scheduled once every block
// of this one has called it (that kernel then waits in its own prologue), which overlaps the
// next launch with this kernel's work. The fused kernels call it only after their entry barrier:
// before it, a next kernel's waiting blocks could take the slots that another rank's blocks on
// the same GPU still need to reach that barrier. Elsewhere (AMD, before sm_90) both are nothing.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(ARFUSE_VENDOR_NVIDIA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void let_next_kernel_start() {
#if defined(ARFUSE_VENDOR_NVIDIA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---- shuffles ---------------------------------------------------------------------------

__device__ __forceinline__ float shuffle_xor(float v, int lane_mask) {
#if defined(ARFUSE_VENDOR_NVIDIA)
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
#else
  return __shfl_xor(v, lane_mask, kWarpSize);
#endif
}

// The largest of the warp's 32-bit patterns read as unsigned integers, in every lane: one
// redux.sync where the hardware has it (NVIDIA sm_80+); kWarpReduxMax says whether it does.
#if defined(ARFUSE_VENDOR_NVIDIA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
inline constexpr bool kWarpReduxMax = true;
__device__ __forceinline__ u32 warp_max_unsigned(u32 v) {
  u32 m;
  asm("redux.sync.max.u32 %0, %1, 0xffffffff;" : "=r"(m) : "r"(v));
  return m;
}
#else
inline constexpr bool kWarpReduxMax = false;
__device__ __forceinline__ u32 warp_max_unsigned(u32 v) { return v; }  // not called there
#endif

// Arithmetic on bf16 pairs and unsigned 16-bit pairs in one instruction each (NVIDIA sm_90):
// microscaling.cuh's e2m1_pair_codes runs on it; kBf16PairOps says whether the target has it.
#if defined(ARFUSE_VENDOR_NVIDIA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
inline constexpr bool kBf16PairOps = true;
struct Bf16PairOps {
  __device__ static __forceinline__ u32 mul(u32 a, u32 b) {
    u32 r;
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
  }
  __device__ static __forceinline__ u32 fma(u32 a, u32 b, u32 c) {
    u32 r;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
  }
  __device__ static __forceinline__ u32 min(u32 a, u32 b) {
    u32 r;
    asm("min.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
  }
};
#else
inline constexpr bool kBf16PairOps = false;
struct Bf16PairOps {  // never called where kBf16PairOps is false; present so that callers compile
  __device__ static __forceinline__ u32 mul(u32, u32) { return 0; }
  __device__ static __forceinline__ u32 fma(u32, u32, u32) { return 0; }
  __device__ static __forceinline__ u32 min(u32, u32) { return 0; }
};
#endif

// ---- memory order -----------------------------------------------------------------------

// Store with release semantics at system scope: every write this block made before the
// preceding __syncthreads() is visible to a peer (another GPU or process) that acquires it.
__device__ __forceinline__ void store_release_system(u64* address, u64 value) {
#if defined(ARFUSE_VENDOR_NVIDIA)
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(address), "l"(value) : "memory");
#else
  __atomic_store_n(address, value, __ATOMIC_RELEASE);  // HIP's default scope is system
#endif
}

// Load with acquire semantics at system scope: after it (and the __syncthreads() that
// follows), this block sees every write the releasing peer made before its release.
__device__ __forceinline__ u64 load_acquire_system(const u64* address) {
  u64 value;
#if defined(ARFUSE_VENDOR_NVIDIA)
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(value) : "l"(address) : "memory");
#else
  value = __atomic_load_n(address, __ATOMIC_ACQUIRE);
#endif
  return value;
}

// Records the first error only, so the host sees the original cause, not its echoes; true
// when this one was first.
__device__ __forceinline__ bool record_error(u32* address, u32 code) { return atomicCAS(address, 0u, code) == 0u; }

// Nanoseconds from a clock that runs at a fixed rate, for barrier timeouts.
__device__ __forceinline__ u64 clock_ns() {
#if defined(ARFUSE_VENDOR_NVIDIA)
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
#if __has_builtin(__builtin_readsteadycounter)
  // The constant-rate REALTIME counter: s_memrealtime on gfx9/gfx10, s_sendmsg_rtn_b64
  // REALTIME on gfx11/gfx12 (LLVM's lowering of llvm.readsteadycounter; s_memrealtime itself
  // does not exist there). 100 MHz on gfx9 (MI200, MI300: hipDeviceAttributeWallClockRate
  // reads 100000 kHz) and gfx10/gfx11 (ROCm documents wall_clock64() at 100 MHz); gfx1250 is
  // assumed to keep it (no published figure says otherwise). Only the timeout uses it.
  return __builtin_readsteadycounter() * 10ull;
#else
  return __builtin_amdgcn_s_memrealtime() * 10ull;  // older clang (hiprtc 5.x): gfx9/gfx10 only
#endif
#endif
}

// 16-byte load of data another rank wrote in this kernel: served from L2 (coherent for all
// ranks), never from a stale L1 line.
__device__ __forceinline__ Vec16 load_shared_l2(const void* address) {
  Vec16 v;
#if defined(ARFUSE_VENDOR_NVIDIA)
  asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
               : "l"(address)
               : "memory");
#else
  // The acquire at system scope before this load invalidated the vector L0/L1 caches.
  const volatile u32* words = static_cast<const volatile u32*>(address);
#pragma unroll
  for (int i = 0; i < 4; ++i) v.w[i] = words[i];
#endif
  return v;
}

__device__ __forceinline__ Vec16 load16(const void* address) { return *static_cast<const Vec16*>(address); }
__device__ __forceinline__ void store16(void* address, const Vec16& v) { *static_cast<Vec16*>(address) = v; }
__device__ __forceinline__ void store8(void* address, const Vec8& v) { *static_cast<Vec8*>(address) = v; }

// A 16-byte copy from global to shared memory that holds no register while in flight
// (cp.async, NVIDIA sm_80+), completed by wait_async_copies in the same thread. Where there is
// none (kAsyncCopy false) it is an ordinary load and store, defined so that every target
// compiles the callers; the kernels test kAsyncCopy and do not call it there.
#if defined(ARFUSE_VENDOR_NVIDIA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
inline constexpr bool kAsyncCopy = true;
#else
inline constexpr bool kAsyncCopy = false;
#endif
__device__ __forceinline__ void copy_async16(Vec16* shared, const void* global) {
#if defined(ARFUSE_VENDOR_NVIDIA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  u64 address;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(address) : "l"(shared));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"l"(address), "l"(global) : "memory");
#else
  *shared = load16(global);
#endif
}
__device__ __forceinline__ void wait_async_copies() {
#if defined(ARFUSE_VENDOR_NVIDIA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// ---- f16 / bf16 -------------------------------------------------------------------------

__device__ __forceinline__ float widen(bf16_t x) { return bits_to_float(u32(x.bits) << 16); }

__device__ __forceinline__ float widen(f16_t x) {
#if defined(ARFUSE_VENDOR_NVIDIA)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
#else
  return float(__builtin_bit_cast(_Float16, x.bits));
#endif
}

// Round to nearest even; every NaN becomes the canonical 0x7fff, so results do not depend on
// how the hardware propagates NaN payloads.
__device__ __forceinline__ bf16_t round_bf16(float f) {
  u32 b = float_to_bits(f);
  if (f != f) return bf16_t{u16(0x7fff)};
  b += 0x7fffu + ((b >> 16) & 1u);
  return bf16_t{u16(b >> 16)};
}

__device__ __forceinline__ f16_t round_f16(float f) {
  if (f != f) return f16_t{u16(0x7fff)};
#if defined(ARFUSE_VENDOR_NVIDIA)
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return f16_t{h};
#else
  return f16_t{__builtin_bit_cast(u16, static_cast<_Float16>(f))};
#endif
}

// The 8 elements of a Vec16, widened.
template <typename T>
__device__ __forceinline__ void unpack8(const Vec16& v, float (&out)[8]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = widen(T{u16(v.w[i] & 0xffffu)});
    out[2 * i + 1] = widen(T{u16(v.w[i] >> 16)});
  }
}

template <typename T>
inline constexpr bool kIsBf16 = false;
template <>
inline constexpr bool kIsBf16<bf16_t> = true;

// The software rounding to T.
template <typename T>
__device__ __forceinline__ T round_to(float f) {
  if constexpr (kIsBf16<T>)
    return round_bf16(f);
  else
    return round_f16(f);
}

// Two roundings to T packed as (second << 16) | first. The pair instructions round to nearest
// even like the software path and turn every NaN into the canonical 0x7fff (on sm_90 for all
// 2^24 f32 NaN patterns, measured 2026-12-03); tests/gpu/epilogue.cpp checks both, NaN
// payloads of both signs included, on every device it runs on.
template <typename T>
__device__ __forceinline__ u32 round_pair(float first, float second) {
#if ARFUSE_HW_PAIRED_F16
  u32 packed;
  if constexpr (kIsBf16<T>) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(second), "f"(first));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(second), "f"(first));
  }
  return packed;
#else
  return u32(round_to<T>(first).bits) | (u32(round_to<T>(second).bits) << 16);
#endif
}

// Rounds 8 floats to T and packs them.
template <typename T>
__device__ __forceinline__ Vec16 pack8(const float (&in)[8]) {
  Vec16 v;
#pragma unroll
  for (int i = 0; i < 4; ++i) v.w[i] = round_pair<T>(in[2 * i], in[2 * i + 1]);
  return v;
}

// T(a + b) for two pairs of T in one instruction, where kPairAdd says the target has one (NVIDIA
// sm_90: add.rn.bf16x2, add.rn.f16x2). The same bits as the f32 sum rounded to T (the contract's
// step 2): the f32 sum of two T values is either exact or far from a rounding boundary of T, since
// f32 keeps more than 2p + 1 bits for T's p (double rounding is innocuous for addition). That the
// hardware also rounds to nearest even, keeps subnormals and gives the canonical NaN 0x7fff, as
// T(v) must, tests/gpu/epilogue.cpp checks with every pair of values of both types.
#if defined(ARFUSE_VENDOR_NVIDIA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
inline constexpr bool kPairAdd = true;
template <typename T>
__device__ __forceinline__ u32 add_pair(u32 a, u32 b) {
  u32 sum;
  if constexpr (kIsBf16<T>) {
    asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(sum) : "r"(a), "r"(b));
  } else {
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(sum) : "r"(a), "r"(b));
  }
  return sum;
}
#else
inline constexpr bool kPairAdd = false;
template <typename T>
__device__ __forceinline__ u32 add_pair(u32, u32) {  // never called where kPairAdd is false
  return 0;
}
#endif

// Where the kernels add in pairs: bf16 only. With f16 the compiler gave fp8_group at h5120-8192
// more registers and fewer resident blocks per SM, so f16 keeps the f32 add until a measurement
// says otherwise.
template <typename T>
inline constexpr bool kPairAddFor = (kPairAdd && kIsBf16<T>);

// ---- NaN-keeping maximum ----------------------------------------------------------------

// max that keeps NaN: the contract wants a NaN to reach the FP8 scale rule, not to vanish.
// Which NaN comes out does not matter (any NaN amax gives scale 1).
__device__ __forceinline__ float max_keep_nan(float a, float b) {
#if ARFUSE_HW_PAIRED_F16
  float m;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(m) : "f"(a), "f"(b));
  return m;
#else
  return (a != a || a > b) ? a : b;
#endif
}

// max |x| over the elements of packed pairs of T. Where the hardware has a NaN-keeping max on
// pairs, it runs on the packed values (abs is clearing the sign bits; max is exact), one
// instruction per pair instead of a widening and a max per element.
#if ARFUSE_HW_PAIRED_F16
template <typename T>
__device__ __forceinline__ u32 max_keep_nan_pair(u32 a, u32 b) {
  u32 m;
  if constexpr (kIsBf16<T>) {
    asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(m) : "r"(a), "r"(b));
  } else {
    asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(m) : "r"(a), "r"(b));
  }
  return m;
}
#endif

template <typename T>
struct AbsMax {
#if ARFUSE_HW_PAIRED_F16
  u32 packed = 0;
  __device__ __forceinline__ void add(u32 pair) { packed = max_keep_nan_pair<T>(packed, pair & 0x7fff7fffu); }
  __device__ __forceinline__ float value() const {
    return max_keep_nan(widen(T{u16(packed & 0xffffu)}), widen(T{u16(packed >> 16)}));
  }
#else
  float amax = 0.0f;
  __device__ __forceinline__ void add(u32 pair) {
    amax = max_keep_nan(amax, fabsf(widen(T{u16(pair & 0xffffu)})));
    amax = max_keep_nan(amax, fabsf(widen(T{u16(pair >> 16)})));
  }
  __device__ __forceinline__ float value() const { return amax; }
#endif
};

// ---- fp8 e4m3 ---------------------------------------------------------------------------

#if ARFUSE_FP8_FNUZ
inline constexpr float kFp8Max = 240.0f;
#else
inline constexpr float kFp8Max = 448.0f;
#endif

// f32 -> e4m3fn / e4m3fnuz, round to nearest even, saturating to +-max (Inf too); NaN -> the
// format's NaN. Integer and exact float operations only, so it is the same on every target.
__device__ __forceinline__ u32 fp8_software(float f) {
#if ARFUSE_FP8_FNUZ
  constexpr int kBias = 8;
  constexpr u32 kNaN = 0x80u, kMaxCode = 0x7fu;
#else
  constexpr int kBias = 7;
  constexpr u32 kNaN = 0x7fu, kMaxCode = 0x7eu;
#endif
  if (f != f) return kNaN;
  const u32 bits = float_to_bits(f);
  const u32 sign = (bits >> 24) & 0x80u;
  const float a = bits_to_float(bits & 0x7fffffffu);
  u32 code;
  if (a >= kFp8Max) {
    code = kMaxCode;
  } else if (a < bits_to_float(u32(127 + 1 - kBias) << 23)) {
    // Subnormal range: multiply by 2^(bias + 2) (exact), round to an integer by adding and
    // subtracting 2^23 (exact round-to-nearest-even under IEEE arithmetic).
    const float scaled = a * bits_to_float(u32(127 + kBias + 2) << 23);
    code = u32((scaled + 8388608.0f) - 8388608.0f);
  } else {
    // Normal range: keep 3 mantissa bits, rounding the 20 dropped bits to nearest even; a
    // carry moves into the exponent as it should.
    const u32 abs_bits = bits & 0x7fffffffu;
    const u32 rounded = (abs_bits + 0x7ffffu + ((abs_bits >> 20) & 1u)) >> 20;
    code = rounded - (u32(127 - kBias) << 3);
    if (code > kMaxCode) code = kMaxCode;
  }
#if ARFUSE_FP8_FNUZ
  if (code == 0) return 0;  // fnuz has no negative zero: 0x80 is its NaN
#endif
  return sign | code;
}

// Two conversions packed as (second << 8) | first.
__device__ __forceinline__ u32 fp8x2(float first, float second) {
#if ARFUSE_HW_FP8 && defined(ARFUSE_VENDOR_NVIDIA)
  u16 packed;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(packed) : "f"(second), "f"(first));
  return packed;
#else
  return fp8_software(first) | (fp8_software(second) << 8);
#endif
}

}  // namespace arfuse
