// The communicator handles and the table of calls arfuse's PyTorch ops make
// (arfuse/torch_ops/op_table.hpp). A handle names one local rank of a group; the ops pass it as
// an int because a torch op's arguments are tensors and scalars.
#include "torch_ops/op_table.hpp"

#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>

#include "arfuse/error.hpp"

#include "jit/kernel_spec.hpp"

#include "group_binding.hpp"

namespace arfuse::python {
namespace {

using torch_ops::CommunicatorInfo;
using torch_ops::Fp8Dtype;

struct HandleEntry {
  const void* owner;  // the group binding that registered it (null: tracing only)
  CommunicatorInfo info;
};

std::mutex registry_mutex;
std::map<std::int64_t, HandleEntry> registry;
std::int64_t next_handle = 1;

// The last failure of an entry on this thread: its message for the torch extension, the
// exception itself for the Python API (rethrow_op_failure).
thread_local std::exception_ptr last_failure;
thread_local std::string last_message;
thread_local torch_ops::Failure failure;

// Only these two name an argument; the other arfuse errors (no device, a failed compile or
// launch, a peer) are about the machine.
bool is_bad_argument(const std::exception& e) { return typeid(e) == typeid(Error) || typeid(e) == typeid(ConfigError); }

template <typename Body>
const torch_ops::Failure* guarded(Body&& body) {
  try {
    body();
    return nullptr;
  } catch (const std::exception& e) {
    last_failure = std::current_exception();
    last_message = e.what();
    failure = torch_ops::Failure{last_message.c_str(), is_bad_argument(e)};
    return &failure;
  }
}

// "a, b, c": the quant modes for which `has` holds, once per process.
std::string modes_where(bool (*has)(Quant)) {
  std::string text;
  for (Quant q : all_quants())
    if (has(q)) text += (text.empty() ? "" : ", ") + std::string(to_string(q));
  return text;
}

torch_ops::ModeInfo describe_mode(std::int64_t code, int hidden) {
  const std::optional<EpilogueMode> mode = jit::mode_of_code(code);
  if (!mode)
    throw Error("epilogue_mode is " + std::to_string(code) +
                ", which no mode makes; pass arfuse.torch.mode_code(quant, norm, ...)");
  mode->validate(hidden);
  static const std::string padded = modes_where(pads_out), scaled = modes_where(reads_quant_scale),
                           grouped = modes_where(group_quant_takes);
  torch_ops::ModeInfo info{};
  info.mode = *mode;
  info.name = to_string(mode->quant);
  info.out_row = mode->out_row(hidden);
  info.scales = mode->scale_shape(hidden);
  info.packs_fp4 = packs_fp4(mode->quant);
  info.pads_out = pads_out(mode->quant);
  info.group_quant = group_quant_takes(mode->quant);
  info.scale_name = reads_quant_scale(mode->quant) ? quant_scale_name(mode->quant) : nullptr;
  const char* argument = quant_scale_argument(mode->quant);
  info.global_scale = argument != nullptr && std::string(argument) == "global_scale";
  info.padded_modes = padded.c_str(), info.scale_modes = scaled.c_str(), info.group_quant_modes = grouped.c_str();
  return info;
}

HandleEntry lookup(std::int64_t handle) {
  std::lock_guard lock(registry_mutex);
  const auto found = registry.find(handle);
  if (found == registry.end())
    throw Error("communicator " + std::to_string(handle) + " is closed or was never created");
  return found->second;
}

Rank& rank_of(const CommunicatorInfo& comm) {
  if (comm.rank == nullptr)
    throw Error("communicator " + std::to_string(comm.handle) + " was registered for tracing only; it cannot run");
  return *comm.rank;
}

const torch_ops::OpTable table = {
    torch_ops::kOpTableVersion,
    sizeof(torch_ops::OpTable),
    [](std::int64_t handle, CommunicatorInfo* info) { return guarded([&] { *info = lookup(handle).info; }); },
    [](const CommunicatorInfo* comm, const AllreduceRmsnormArgs* args, void* stream) {
      return guarded([&] {
        Rank& rank = rank_of(*comm);
        rank.allreduce_rmsnorm(*args, Stream(rank.device(), static_cast<NativeStream>(stream)));
      });
    },
    [](const CommunicatorInfo* comm, const AllreduceArgs* args, void* stream) {
      return guarded([&] {
        Rank& rank = rank_of(*comm);
        rank.allreduce(*args, Stream(rank.device(), static_cast<NativeStream>(stream)));
      });
    },
    [](int device, const RmsnormQuantArgs* args, void* stream) {
      return guarded([&] {
        Context& ctx = context_for(device);
        rmsnorm_quant(ctx, *args, Stream(ctx.device(), static_cast<NativeStream>(stream)));
      });
    },
    [](int device, const GroupQuantArgs* args, void* stream) {
      return guarded([&] {
        Context& ctx = context_for(device);
        group_quant(ctx, *args, Stream(ctx.device(), static_cast<NativeStream>(stream)));
      });
    },
    [](std::int64_t code, int hidden, torch_ops::ModeInfo* info) {
      return guarded([&] { *info = describe_mode(code, hidden); });
    },
    [](int device, Fp8Dtype* dtype) {
      return guarded([&] {
        if (device >= 0) {
          *dtype = fp8_dtype_of(context_for(device).device());
          return;
        }
        try {
          *dtype = fp8_dtype_of(context_for(0).device());
        } catch (const Unavailable&) {
          *dtype = Fp8Dtype::e4m3fn;  // tracing on a machine without a driver
        }
      });
    },
};

}  // namespace

std::int64_t register_handle(const void* owner, Rank* rank, torch_ops::Fp8Dtype fp8) {
  std::lock_guard lock(registry_mutex);
  const std::int64_t handle = next_handle++;
  registry[handle] = HandleEntry{owner, CommunicatorInfo{handle, rank, fp8}};
  return handle;
}

void release_handles(const void* owner) {
  std::lock_guard lock(registry_mutex);
  for (auto it = registry.begin(); it != registry.end();) it = it->second.owner == owner ? registry.erase(it) : ++it;
}

bool release_handle(std::int64_t handle) {
  std::lock_guard lock(registry_mutex);
  return registry.erase(handle) != 0;
}

bool handle_open(std::int64_t handle) {
  std::lock_guard lock(registry_mutex);
  return registry.count(handle) != 0;
}

Fp8Dtype fp8_dtype_of(const Device& device) {
  return device.target().fp8_format() == Fp8Format::e4m3fnuz ? Fp8Dtype::e4m3fnuz : Fp8Dtype::e4m3fn;
}

Context& context_for(int device) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<Context>> contexts;
  std::lock_guard lock(mutex);
  auto& slot = contexts[device];
  if (!slot) slot = std::make_unique<Context>(ContextOptions{device, {}});
  return *slot;
}

const torch_ops::OpTable& op_table() { return table; }

void rethrow_op_failure(const std::string& message) {
  if (!last_failure || message.find(last_message) == std::string::npos) return;
  std::exception_ptr failure = std::exchange(last_failure, nullptr);
  last_message.clear();
  std::rethrow_exception(failure);
}

}  // namespace arfuse::python
