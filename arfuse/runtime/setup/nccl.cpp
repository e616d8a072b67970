#include "runtime/setup/nccl.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "arfuse/error.hpp"
#include "arfuse/settings.hpp"

#include "base/dynamic_library.hpp"
#include "base/load_once.hpp"

namespace arfuse {
namespace {

// The stable C ABI of nccl.h (2.x).
using ncclResult_t = int;
struct ncclUniqueId {
  char internal[128];
};
constexpr int kNcclSum = 0;
constexpr int kNcclFloat16 = 6;
constexpr int kNcclBfloat16 = 9;

struct NcclApi {
  ncclResult_t (*ncclGetVersion)(int*);
  const char* (*ncclGetErrorString)(ncclResult_t);
  ncclResult_t (*ncclGetUniqueId)(ncclUniqueId*);
  ncclResult_t (*ncclCommInitRank)(void** comm, int nranks, ncclUniqueId id, int rank);
  ncclResult_t (*ncclCommDestroy)(void* comm);
  ncclResult_t (*ncclCommAbort)(void* comm);
  ncclResult_t (*ncclAllReduce)(const void*, void*, std::size_t, int, int, void*, NativeStream);
};

struct Loaded {
  std::unique_ptr<DynamicLibrary> library;
  NcclApi api{};
};

std::unique_ptr<Loaded> load_nccl() {
  // RCCL (ROCm) has NCCL's API: on a machine without NCCL it is the one that loads.
  std::vector<std::string> candidates = with_rocm_folders({"libnccl.so.2", "libnccl.so", "librccl.so.1", "librccl.so"});
  if (const auto path = settings::text("ARFUSE_NCCL_LIBRARY")) candidates = {*path};
  auto l = std::make_unique<Loaded>();
  l->library = std::make_unique<DynamicLibrary>("NCCL (or RCCL)", candidates);
  l->library->bind(l->api.ncclGetVersion, "ncclGetVersion");
  l->library->bind(l->api.ncclGetErrorString, "ncclGetErrorString");
  l->library->bind(l->api.ncclGetUniqueId, "ncclGetUniqueId");
  l->library->bind(l->api.ncclCommInitRank, "ncclCommInitRank");
  l->library->bind(l->api.ncclCommDestroy, "ncclCommDestroy");
  l->library->bind(l->api.ncclCommAbort, "ncclCommAbort");
  l->library->bind(l->api.ncclAllReduce, "ncclAllReduce");
  return l;
}

const Loaded& load() {
  static LoadOnce<Loaded> loaded;
  return loaded.get(load_nccl);
}

const NcclApi& api() { return load().api; }

void check(ncclResult_t r, const char* call) {
  if (r == 0) return;
  const char* text = api().ncclGetErrorString(r);
  throw DeviceError(fmt::format("{} failed: NCCL error {}: {}", call, r, text ? text : "unknown"), r);
}

}  // namespace

struct NcclCommunicator::Comm {
  void* handle = nullptr;
};

std::string nccl_unavailable_reason() {
  try {
    load();
    return {};
  } catch (const Unavailable& e) {
    return e.what();
  }
}

std::string nccl_description() {
  int code = 0;
  check(api().ncclGetVersion(&code), "ncclGetVersion");
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return fmt::format("NCCL {}.{}.{} ({})", code / 10000, code / 100 % 100, code % 100, load().library->path());
}

NcclCommunicator::NcclCommunicator(Bootstrap& bootstrap, const Device& device) : device_(&device) {
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) check(api().ncclGetUniqueId(&id), "ncclGetUniqueId");
  const auto all = bootstrap.allgather(std::string(id.internal, sizeof(id.internal)));
  if (all[0].size() != sizeof(id.internal)) {
    throw Error(fmt::format("rank 0 sent an NCCL unique id of {} bytes; it is {}", all[0].size(), sizeof(id.internal)));
  }
  std::memcpy(id.internal, all[0].data(), sizeof(id.internal));
  device.make_current();  // NCCL takes the device from the current context
  auto comm = std::make_unique<Comm>();
  check(api().ncclCommInitRank(&comm->handle, bootstrap.world(), id, bootstrap.rank()), "ncclCommInitRank");
  comm_ = comm.release();
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  device_->make_current_quietly();
  api().ncclCommDestroy(comm_->handle);
  delete comm_;
}

void NcclCommunicator::abort() {
  if (comm_ == nullptr) return;
  device_->make_current_quietly();
  api().ncclCommAbort(comm_->handle);
  delete comm_;
  comm_ = nullptr;
}

void NcclCommunicator::allreduce(const void* send, void* recv, std::size_t count, DType dtype, const Stream& stream) {
  if (comm_ == nullptr) throw Error("this NCCL communicator was aborted");
  device_->make_current();
  check(api().ncclAllReduce(send, recv, count, dtype == DType::bf16 ? kNcclBfloat16 : kNcclFloat16, kNcclSum,
                            comm_->handle, stream.native()),
        "ncclAllReduce");
}

}  // namespace arfuse
