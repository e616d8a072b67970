// HIP's device vocabulary, as far as arfuse's templates use it, on the CPU: the program the JIT
// renders for an AMD target (render(spec).text, untouched) compiles with the host's C++ compiler
// and runs, so the tests can execute the AMD code path's kernels, bit for bit, on a machine with
// no AMD GPU (tests/emulated/emulated_kernel.hpp builds and loads it).
//
// Every GPU thread is a fiber (ucontext) with a stack of its own. A block's fibers run on one OS
// thread, which switches between them only where a GPU's threads exchange data: __syncthreads()
// and the warp shuffles. Each block runs on an OS thread of its own, so blocks that wait for one
// another (the fused kernel's barriers between ranks) make progress. __shared__ variables are
// thread_local: one copy per block.
//
// Stricter than the hardware: a shuffle waits for every lane of its warp (the templates only use
// whole-warp shuffles), and a block whose threads can no longer all reach the same barrier (one
// returned, or they wait at different barriers) is reported as a deadlock instead of hanging.
// Not modelled: caches, the order in which other agents see stores, speed.
#pragma once

#include <sys/mman.h>
#include <ucontext.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __shared__ static thread_local
#define __forceinline__ inline
#define __launch_bounds__(...)

namespace arfuse_emulated {

struct Dim3 {
  unsigned x, y, z;
};

class Block;
inline thread_local Block* current_block = nullptr;

class Block {
 public:
  static constexpr std::size_t kStackBytes = 128 * 1024;

  Block(unsigned index, unsigned grid, unsigned threads, unsigned warp_size, std::function<void()> body)
      : index_(index),
        grid_(grid),
        threads_(threads),
        warp_size_(warp_size),
        body_(std::move(body)),
        fibers_(threads),
        warps_(threads / warp_size),
        slots_(2 * std::size_t(threads)) {}

  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  ~Block() {
    for (auto& f : fibers_)
      if (f.stack != nullptr) ::munmap(f.stack, kStackBytes);
  }

  // Runs every thread to its end. Returns an empty string, or what went wrong.
  std::string run() {
    if (threads_ == 0 || threads_ % warp_size_ != 0)
      return "a block of " + std::to_string(threads_) + " threads is not whole warps of " + std::to_string(warp_size_);
    current_block = this;
    for (unsigned t = 0; t < threads_; ++t) {
      std::string problem = start_fiber(t);
      if (!problem.empty()) return problem;
    }
    unsigned alive = threads_;
    while (alive > 0) {
      bool progressed = false;
      for (unsigned t = 0; t < threads_; ++t) {
        Fiber& f = fibers_[t];
        if (f.finished || (f.waiting != nullptr && *f.waiting == f.waiting_generation)) continue;
        f.waiting = nullptr;
        running_ = t;
        ::swapcontext(&scheduler_, &f.context);
        progressed = true;
        if (f.finished) --alive;
        if (!failure_.empty()) return failure_;
      }
      if (!progressed) return deadlock_report(alive);
    }
    current_block = nullptr;
    return {};
  }

  Dim3 thread_index() const { return {running_, 0, 0}; }
  Dim3 block_index() const { return {index_, 0, 0}; }
  Dim3 block_dim() const { return {threads_, 0, 0}; }
  Dim3 grid_dim() const { return {grid_, 0, 0}; }

  void syncthreads() { wait_for_all(block_barrier_, threads_); }

  // HIP's __shfl_xor: lane self ^ lane_mask within groups of `width` lanes; a lane whose partner
  // lies outside its group reads its own value. Slots alternate between two sets, so a lane that
  // runs ahead to its next shuffle never overwrites a value another lane has yet to read.
  float shuffle_xor(float v, int lane_mask, int width) {
    Fiber& self = fibers_[running_];
    const unsigned lane = running_ % warp_size_, first = running_ - lane;
    float* slots = &slots_[std::size_t(self.shuffles++ % 2) * threads_];
    slots[running_] = v;
    wait_for_all(warps_[running_ / warp_size_], warp_size_);
    const unsigned w = unsigned(width);
    unsigned source = lane ^ unsigned(lane_mask);
    if (source >= ((lane + w) & ~(w - 1))) source = lane;
    return slots[first + source];
  }

 private:
  struct Barrier {
    unsigned arrived = 0;
    unsigned long generation = 0;
  };
  struct Fiber {
    ucontext_t context{};
    void* stack = nullptr;
    bool finished = false;
    const unsigned long* waiting = nullptr;  // the generation counter this fiber waits on
    unsigned long waiting_generation = 0;
    const char* waiting_at = "";
    unsigned long shuffles = 0;
  };

  std::string start_fiber(unsigned t) {
    Fiber& f = fibers_[t];
    f.stack = ::mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (f.stack == MAP_FAILED) {
      f.stack = nullptr;
      return "cannot map a stack for an emulated thread";
    }
    ::mprotect(f.stack, 4096, PROT_NONE);  // an overflow faults instead of corrupting a neighbour
    ::getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = &scheduler_;
    ::makecontext(&f.context, &Block::fiber_main, 0);
    return {};
  }

  static void fiber_main() {
    Block* block = current_block;
    try {
      block->body_();
    } catch (const std::exception& e) {
      block->failure_ = std::string("an emulated thread threw: ") + e.what();
    } catch (...) {
      block->failure_ = "an emulated thread threw";
    }
    block->fibers_[block->running_].finished = true;
  }  // returns to uc_link: the scheduler

  void wait_for_all(Barrier& barrier, unsigned count) {
    Fiber& self = fibers_[running_];
    if (++barrier.arrived == count) {
      barrier.arrived = 0;
      ++barrier.generation;
      return;
    }
    self.waiting = &barrier.generation;
    self.waiting_generation = barrier.generation;
    self.waiting_at = &barrier == &block_barrier_ ? "__syncthreads" : "a warp shuffle";
    ::swapcontext(&self.context, &scheduler_);
  }

  std::string deadlock_report(unsigned alive) const {
    std::string where;
    unsigned first_waiting = threads_;
    for (unsigned t = 0; t < threads_; ++t) {
      if (!fibers_[t].finished && first_waiting == threads_) first_waiting = t;
    }
    if (first_waiting < threads_) where = fibers_[first_waiting].waiting_at;
    return "deadlock in block " + std::to_string(index_) + ": " + std::to_string(alive) + " of " +
           std::to_string(threads_) + " threads wait (thread " + std::to_string(first_waiting) + " at " + where +
           ") for threads that finished or wait elsewhere";
  }

  unsigned index_, grid_, threads_, warp_size_;
  std::function<void()> body_;
  std::vector<Fiber> fibers_;
  Barrier block_barrier_;
  std::vector<Barrier> warps_;
  std::vector<float> slots_;
  unsigned running_ = 0;
  ucontext_t scheduler_{};
  std::string failure_;
};

inline Block& block() { return *current_block; }

template <typename... Params, std::size_t... I>
void call(void (*kernel)(Params...), void** params, std::index_sequence<I...>) {
  kernel(*static_cast<std::remove_reference_t<Params>*>(params[I])...);
}

// Runs the grid on `at_once` OS threads (0: one for every block, for blocks that wait for each
// other), each taking the next block when its last one ends. Returns 0, or 1 with the first
// problem in `error`.
template <typename... Params>
int run_grid(void (*kernel)(Params...), unsigned grid, unsigned threads, unsigned warp_size, unsigned at_once,
             void** params, char* error, std::size_t error_size) {
  std::vector<std::string> problems(grid);
  std::atomic<unsigned> next{0};
  const unsigned workers_wanted = at_once == 0 || at_once > grid ? grid : at_once;
  std::vector<std::thread> workers;
  workers.reserve(workers_wanted);
  for (unsigned w = 0; w < workers_wanted; ++w) {
    workers.emplace_back([&] {
      for (unsigned b = next++; b < grid; b = next++) {
        Block block(b, grid, threads, warp_size, [&] { call(kernel, params, std::index_sequence_for<Params...>{}); });
        problems[b] = block.run();
      }
    });
  }
  for (auto& w : workers) w.join();
  for (const auto& p : problems) {
    if (p.empty()) continue;
    std::snprintf(error, error_size, "%s", p.c_str());
    return 1;
  }
  return 0;
}

// Read only by barriers that wait for another block (the fused kernel's, between ranks), once a
// spin: giving the core away there lets the awaited block, on another OS thread, run.
inline unsigned long long realtime_ticks() {
  std::this_thread::yield();
  const auto ns = std::chrono::steady_clock::now().time_since_epoch();
  return (unsigned long long)(std::chrono::duration_cast<std::chrono::nanoseconds>(ns).count() / 10);
}

}  // namespace arfuse_emulated

#define threadIdx (::arfuse_emulated::block().thread_index())
#define blockIdx (::arfuse_emulated::block().block_index())
#define blockDim (::arfuse_emulated::block().block_dim())
#define gridDim (::arfuse_emulated::block().grid_dim())

inline void __syncthreads() { ::arfuse_emulated::block().syncthreads(); }
inline float __shfl_xor(float v, int lane_mask, int width) {
  return ::arfuse_emulated::block().shuffle_xor(v, lane_mask, width);
}
inline unsigned atomicCAS(unsigned* address, unsigned compare, unsigned value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;  // the old value
}
inline float __uint_as_float(unsigned x) { return __builtin_bit_cast(float, x); }
inline unsigned __float_as_uint(float x) { return __builtin_bit_cast(unsigned, x); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
// platform.cuh's clock for hiprtc 5.x: 100 MHz ticks.
#define __builtin_amdgcn_s_memrealtime() (::arfuse_emulated::realtime_ticks())
