// A kernel of an AMD target run on the CPU: the program the JIT renders for the spec
// (render(spec).text, the text hiprtc and the clang back end compile) is compiled with the host's
// C++ compiler over tests/emulated/emulated_prelude.hpp, which implements the HIP names the templates use
// with one fiber per GPU thread, and loaded. So the AMD code path's arithmetic, reductions and
// indexing run, bit for bit, where there is no AMD GPU. What an AMD GPU adds, and this does not
// check: its instruction selection (v_cvt, ds_bpermute...), its memory model and its speed.
#pragma once

#include <memory>
#include <string>

#include "base/dynamic_library.hpp"
#include "jit/render.hpp"

namespace arfuse::test {

class EmulatedKernel {
 public:
  // Compiles render(spec) for the host; throws Error with the compiler's output when it fails.
  explicit EmulatedKernel(const jit::KernelSpec& spec);

  // Runs `grid` blocks of the spec's block shape with the kernel's parameters (as a launch's
  // void* array); blocks_wait_for_each_other runs every block at once (the fused kernel's barriers).
  // Throws Error when the emulation finds a deadlock or a thread throws.
  void launch(unsigned grid, void** params, bool blocks_wait_for_each_other = false) const;

  const jit::Source& source() const { return source_; }

 private:
  using Entry = int(unsigned grid, unsigned threads, unsigned warp_size, unsigned at_once, void** params, char* error,
                    unsigned long error_size);
  jit::Source source_;
  std::string folder_;
  std::unique_ptr<DynamicLibrary> library_;
  Entry* entry_ = nullptr;
};

}  // namespace arfuse::test
