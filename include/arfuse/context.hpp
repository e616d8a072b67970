// Context: one device and its kernel cache; the standalone epilogue calls (arfuse/epilogue.hpp)
// run on one. Kernels are compiled (or read from the cache) on first use and kept loaded, so a
// repeated call is a lookup. Thread-safe.
//
//   arfuse::Context ctx;                 // device 0, the default cache folder
//   arfuse::rmsnorm_quant(ctx, args, stream);
#pragma once

#include <memory>

#include "arfuse/cache.hpp"
#include "arfuse/device.hpp"
#include "arfuse/error.hpp"

namespace arfuse {

struct ARFUSE_API ContextOptions {
  int device = 0;
  CacheOptions cache;
};

struct ContextState;

class ARFUSE_API Context {
 public:
  // Throws Unavailable when there is no driver or no GPU, Error for a bad ordinal.
  explicit Context(ContextOptions options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  const Device& device() const;

 private:
  friend struct ContextAccess;  // the runtime's own functions (runtime/context.hpp)
  std::unique_ptr<ContextState> state_;
};

}  // namespace arfuse
