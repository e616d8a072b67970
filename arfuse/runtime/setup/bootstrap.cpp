#include "arfuse/bootstrap.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "arfuse/error.hpp"

namespace arfuse {

void check_bootstrap_world(int rank, int world) {
  if (world < 1 || world > 1024) throw Error(fmt::format("bootstrap world size {} is not allowed: 1 to 1024", world));
  if (rank < 0 || rank >= world) throw Error(fmt::format("bootstrap rank {} is outside 0..{}", rank, world - 1));
}

namespace {

using Clock = std::chrono::steady_clock;

// ---- in-process ---------------------------------------------------------------------------

class InProcessBootstrap final : public Bootstrap {
 public:
  InProcessBootstrap(InProcessRendezvous& r, int rank, int world) : rendezvous_(r), rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::vector<std::string> allgather(const std::string& mine) override { return rendezvous_.exchange(rank_, mine); }

 private:
  InProcessRendezvous& rendezvous_;
  int rank_, world_;
};

// ---- callback -----------------------------------------------------------------------------

class CallbackBootstrap final : public Bootstrap {
 public:
  CallbackBootstrap(int rank, int world, AllgatherFunction fn) : rank_(rank), world_(world), fn_(std::move(fn)) {
    if (!fn_) throw Error("callback_bootstrap needs an allgather function");
  }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::vector<std::string> allgather(const std::string& mine) override {
    auto all = fn_(mine);
    if (int(all.size()) != world_) {
      throw Error(fmt::format("bootstrap callback returned {} entries for a world of {}", all.size(), world_));
    }
    if (all[size_t(rank_)] != mine)
      throw Error(fmt::format("bootstrap callback did not return rank {}'s own bytes at index {}", rank_, rank_));
    return all;
  }

 private:
  int rank_, world_;
  AllgatherFunction fn_;
};

}  // namespace

InProcessRendezvous::InProcessRendezvous(int world, std::chrono::milliseconds timeout)
    : world_(world), timeout_(timeout), slots_(size_t(world)), filled_(size_t(world), false) {
  check_bootstrap_world(0, world);
}

std::unique_ptr<Bootstrap> InProcessRendezvous::join(int rank) {
  check_bootstrap_world(rank, world_);
  return std::make_unique<InProcessBootstrap>(*this, rank, world_);
}

std::vector<std::string> InProcessRendezvous::exchange(int rank, const std::string& mine) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto deadline = Clock::now() + timeout_;
  // Wait until the previous round has been collected by everyone.
  if (!changed_.wait_until(lock, deadline, [&] { return departed_ == 0 && !filled_[size_t(rank)]; })) {
    throw Error(fmt::format("bootstrap: rank {} timed out waiting for the previous exchange to finish", rank));
  }
  const auto round = round_;
  slots_[size_t(rank)] = mine;
  filled_[size_t(rank)] = true;
  if (++arrived_ == world_) {
    result_ = slots_;
    departed_ = world_;
    ++round_;
    changed_.notify_all();
  }
  if (!changed_.wait_until(lock, deadline, [&] { return round_ != round; })) {
    std::string missing;
    for (int r = 0; r < world_; ++r)
      if (!filled_[size_t(r)]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    // The rendezvous stays as it is: after a timeout the group is being torn down.
    throw Error(fmt::format("bootstrap: rank(s) {} did not arrive within {} ms", missing, timeout_.count()));
  }
  auto out = result_;
  if (--departed_ == 0) {
    arrived_ = 0;
    std::fill(filled_.begin(), filled_.end(), false);
    changed_.notify_all();
  }
  return out;
}

std::unique_ptr<Bootstrap> callback_bootstrap(int rank, int world, AllgatherFunction allgather) {
  check_bootstrap_world(rank, world);
  return std::make_unique<CallbackBootstrap>(rank, world, std::move(allgather));
}

void require_agreement(Bootstrap& b, const std::string& what, const std::string& value) {
  const auto all = b.allgather(value);
  std::string differ;
  for (int r = 1; r < b.world(); ++r) {
    if (all[size_t(r)] != all[0])
      differ += fmt::format("{}rank {} has '{}'", differ.empty() ? "" : ", ", r, all[size_t(r)]);
  }
  if (!differ.empty()) {
    throw Error(fmt::format("the ranks disagree on {}: rank 0 has '{}', {}; every rank must create the group alike",
                            what, all[0], differ));
  }
}

}  // namespace arfuse
