#include "static_group_worker.hpp"

#include <cstdio>

#include "arfuse/group.hpp"

namespace arfuse::test {
namespace {

Group& process_group() {
  static Group group([] {
    GroupOptions o;
    o.devices = {0, 0};
    o.max_tokens = 4, o.max_hidden = 1024;
    return o;
  }());
  return group;
}

}  // namespace

int static_group_worker_main() {
  try {
    Group& group = process_group();
    const Device& device = group.rank(0).device();
    const std::size_t bytes = 4 * 1024 * 2;
    DeviceBuffer in0(device, bytes), in1(device, bytes), out0(device, bytes), out1(device, bytes);
    in0.fill(0), in1.fill(0);
    Stream s0(device), s1(device);
    AllreduceArgs a;
    a.tokens = 4, a.hidden = 1024;
    a.input = in0.get(), a.out = out0.get();
    group.rank(0).allreduce(a, s0);
    a.input = in1.get(), a.out = out1.get();
    group.rank(1).allreduce(a, s1);
    s0.synchronize(), s1.synchronize();
    group.check();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "static group worker: %s\n", e.what());
    return 2;
  }
  return 0;  // the static Group is destroyed after this, at exit
}

}  // namespace arfuse::test
