// The one pattern for what arfuse loads lazily (the CUDA driver, NVRTC, hiprtc, NCCL): built on
// first use; a build that throws leaves nothing behind, so the next call tries again (a library
// installed meanwhile, a variable set); after the first success a call is one atomic load, no lock.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

namespace arfuse {

template <typename T>
class LoadOnce {
 public:
  template <typename Make>
  const T& get(Make&& make) {
    if (const T* ready = ready_.load(std::memory_order_acquire)) return *ready;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!value_) {
      value_ = make();  // a std::unique_ptr<T> or std::shared_ptr<T>
      ready_.store(value_.get(), std::memory_order_release);
    }
    return *value_;
  }
  // The owning pointer, for callers that hand out shared ownership.
  template <typename Make>
  std::shared_ptr<const T> shared(Make&& make) {
    get(std::forward<Make>(make));
    return value_;
  }

 private:
  std::mutex mutex_;
  std::shared_ptr<const T> value_;
  std::atomic<const T*> ready_{nullptr};
};

}  // namespace arfuse
