// The one pattern for what arfuse loads lazily (the CUDA driver, NVRTC, hiprtc, NCCL): built on
// first use; a build that throws leaves nothing behind, so the next call tries again (a library
// installed meanwhile, a variable set); after the first success a call is one atomic load, no lock.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

namespace arfuse {

//
// What was loaded is never unloaded, and a LoadOnce has no destructor: a Group or buffer that a
// program keeps in a static is destroyed at exit, possibly after this LoadOnce's own static, and
// still calls into the driver (a static Group built before anything else touched the driver
// crashed the process at exit when the driver was unloaded first).
template <typename T>
class LoadOnce {
 public:
  template <typename Make>
  const T& get(Make&& make) {
    if (const T* ready = ready_.load(std::memory_order_acquire)) return *ready;
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!state_->value) {
      state_->value = make();  // a std::unique_ptr<T> or std::shared_ptr<T>
      ready_.store(state_->value.get(), std::memory_order_release);
    }
    return *state_->value;
  }
  // The owning pointer, for callers that hand out shared ownership.
  template <typename Make>
  std::shared_ptr<const T> shared(Make&& make) {
    get(std::forward<Make>(make));
    return state_->value;
  }

 private:
  struct State {
    std::mutex mutex;
    std::shared_ptr<const T> value;
  };
  State* state_ = new State;  // deliberately never deleted (above); reachable from the static
  std::atomic<const T*> ready_{nullptr};
};

}  // namespace arfuse
