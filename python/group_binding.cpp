// arfuse._arfuse.Group: the groups arfuse.torch's Communicator holds (made through torch's
// process group or as virtual ranks), their handles for the torch ops (op_table.cpp), and the
// Group's call with device addresses (int) and native streams (int), which python -m
// arfuse.bench times beside the ops. No torch headers here: the wheel builds without torch.
#include "group_binding.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "arfuse/epilogue.hpp"
#include "arfuse/error.hpp"
#include "arfuse/group.hpp"

#include "jit/kernel_spec.hpp"

namespace nb = nanobind;

namespace arfuse::python {
namespace {

// The engine's allgather (torch.distributed) as a Bootstrap callback. A Python exception
// becomes an arfuse::Error, so that Group::close and reset handle a lost peer as they do for
// the other bootstraps. After drop() the callback refuses: a group garbage-collected without
// close() must not start a collective from a finaliser.
struct PythonAllgather {
  nb::object function;
  bool dropped = false;

  ~PythonAllgather() {
    nb::gil_scoped_acquire gil;
    function.reset();
  }

  std::vector<std::string> operator()(const std::string& mine) {
    if (dropped)
      throw Error(
          "the communicator was garbage-collected without close(), so its closing barrier with the other ranks was "
          "skipped");
    std::string failure;
    {
      nb::gil_scoped_acquire gil;
      try {
        nb::object result = function(nb::bytes(mine.data(), mine.size()));
        std::vector<std::string> all;
        for (nb::handle item : result) {
          const auto bytes = nb::cast<nb::bytes>(item);
          all.emplace_back(bytes.c_str(), bytes.size());
        }
        return all;
      } catch (nb::python_error& e) {
        failure = e.what();
      } catch (const nb::cast_error&) {
        failure = "the allgather function must return a list of bytes, one per rank";
      }
    }
    throw Error("the allgather through the process group failed: " + failure);
  }
};

CacheOptions cache_options(const std::string& cache_dir) {
  CacheOptions options;
  if (!cache_dir.empty()) options.dir = cache_dir;
  return options;
}

GroupOptions base_options(int max_tokens, int max_hidden, const std::optional<std::string>& dtype, double timeout_s,
                          const std::string& transport, bool check_calls, int graph_calls,
                          const std::string& cache_dir) {
  if (!(timeout_s > 0 && timeout_s <= 3600)) {
    throw Error("timeout must be between 0 and 3600 seconds, not " + std::to_string(timeout_s));
  }
  GroupOptions o;
  o.max_tokens = max_tokens;
  o.max_hidden = max_hidden;
  if (dtype) o.dtype = parse_dtype(*dtype);
  o.timeout = std::chrono::milliseconds(std::int64_t(timeout_s * 1000.0));
  o.transport = parse_transport(transport);
  o.check_calls = check_calls;
  o.graph_calls = graph_calls;
  o.cache = cache_options(cache_dir);
  return o;
}

const void* address(std::uintptr_t value) { return reinterpret_cast<const void*>(value); }
void* mutable_address(std::uintptr_t value) { return reinterpret_cast<void*>(value); }

// One group, its ranks driven from Python. Every call names the local rank it is for (0 for a
// group of one rank per process).
class PyGroup {
 public:
  PyGroup(GroupOptions options, std::shared_ptr<PythonAllgather> allgather)
      : allgather_(std::move(allgather)), group_(std::make_unique<Group>(std::move(options))) {}

  ~PyGroup() {
    release_handles(this);
    if (allgather_) allgather_->dropped = true;
  }

  Group& group() {
    if (!group_) throw Error("the communicator is closed");
    return *group_;
  }
  Rank& rank(int local) {
    if (local < 0 || local >= group().local_ranks()) {
      throw Error("local rank " + std::to_string(local) + " is not in [0, " + std::to_string(group().local_ranks()) +
                  ")");
    }
    return group().local_ranks() == 1 ? group().local_rank() : group().rank(local);
  }
  void close() {
    if (!group_) return;
    release_handles(this);
    auto group = std::move(group_);
    group->close();
  }

 private:
  std::shared_ptr<PythonAllgather> allgather_;
  std::unique_ptr<Group> group_;
};

std::unique_ptr<PyGroup> make_process_group(int rank, int world, nb::object allgather, int device, int max_tokens,
                                            int max_hidden, std::optional<std::string> dtype, double timeout_s,
                                            std::string transport, bool check_calls, int graph_calls,
                                            std::string cache_dir) {
  auto callback = std::make_shared<PythonAllgather>();
  callback->function = std::move(allgather);
  GroupOptions o =
      base_options(max_tokens, max_hidden, dtype, timeout_s, transport, check_calls, graph_calls, cache_dir);
  o.devices = {device};
  o.bootstrap = callback_bootstrap(rank, world, [callback](const std::string& mine) { return (*callback)(mine); });
  return std::make_unique<PyGroup>(std::move(o), callback);
}

std::unique_ptr<PyGroup> make_local_group(std::vector<int> devices, int max_tokens, int max_hidden,
                                          std::optional<std::string> dtype, double timeout_s, std::string transport,
                                          bool check_calls, int graph_calls, std::string cache_dir) {
  GroupOptions o =
      base_options(max_tokens, max_hidden, dtype, timeout_s, transport, check_calls, graph_calls, cache_dir);
  o.devices = std::move(devices);
  return std::make_unique<PyGroup>(std::move(o), nullptr);
}

struct Pointers {
  std::uintptr_t input, residual_in, residual_out, weight, out, scales, mirror;
};

// Row strides in elements (0: contiguous) and the padded width of `out`, as Python passes them.
struct Layout {
  int input_stride, residual_in_stride, residual_out_stride, out_stride, mirror_stride, out_width;
};

// The output mode as Python passes it, by name: quant and norm, the fp8_group settings, the
// mirror. A group size is checked here, where the mode becomes a code that holds only those a
// kernel takes.
EpilogueMode parse_mode(const std::string& quant, const std::string& norm, int group_size,
                        const std::string& scale_format, const std::string& scale_layout, bool mirror) {
  const EpilogueMode mode{parse_quant(quant),
                          parse_norm(norm),
                          group_size,
                          parse_scale_format(scale_format),
                          parse_scale_layout(scale_layout),
                          mirror};
  if (takes_group_size(mode.quant) && !valid_group_size(group_size))
    throw Error("group size " + std::to_string(group_size) + " is not supported by " + quant +
                ": allowed are 32, 64 and 128");
  return mode;
}

// The call's scale, in the argument the mode reads it from (quant_scale_argument).
template <typename Args>
void set_quant_scale(Args& a, std::uintptr_t scale) {
  const auto* p = static_cast<const float*>(address(scale));
  const char* argument = quant_scale_argument(a.mode.quant);
  if (argument != nullptr) (std::string(argument) == "global_scale" ? a.global_scale : a.static_scale) = p;
}

RmsnormQuantArgs epilogue_args(const Pointers& p, const Layout& l, float eps, int tokens, int hidden,
                               const std::string& dtype, const EpilogueMode& mode) {
  RmsnormQuantArgs a;
  a.input_stride = l.input_stride, a.residual_in_stride = l.residual_in_stride;
  a.residual_out_stride = l.residual_out_stride, a.out_stride = l.out_stride, a.mirror_stride = l.mirror_stride;
  a.out_width = l.out_width;
  a.input = address(p.input);
  a.residual_in = address(p.residual_in);
  a.residual_out = mutable_address(p.residual_out);
  a.weight = address(p.weight);
  a.eps = eps;
  a.out = mutable_address(p.out);
  a.scales = static_cast<float*>(mutable_address(p.scales));
  a.mirror = mutable_address(p.mirror);
  a.tokens = tokens;
  a.hidden = hidden;
  a.dtype = parse_dtype(dtype);
  a.mode = mode;
  return a;
}

// Python spells the paths as identifiers.
std::string path_name(Path path) {
  switch (path) {
    case Path::one_stage: return "one_stage";
    case Path::two_stage: return "two_stage";
    case Path::nccl: return "nccl";
  }
  return "?";
}

const char* fp8_format_name(const Device& device) {
  return fp8_dtype_of(device) == torch_ops::Fp8Dtype::e4m3fnuz ? "e4m3fnuz" : "e4m3fn";
}

// One rank's pointers and stream for time_calls.
using RankCall = std::tuple<int, std::uintptr_t, std::uintptr_t, std::uintptr_t, std::uintptr_t, std::uintptr_t,
                            std::uintptr_t, std::uintptr_t, std::uintptr_t>;

std::vector<double> time_calls(PyGroup& g, int calls, const std::vector<RankCall>& ranks, int tokens, int hidden,
                               const std::string& dtype, std::int64_t mode_code) {
  const std::optional<EpilogueMode> decoded = jit::mode_of_code(mode_code);
  if (!decoded) throw Error("mode code " + std::to_string(mode_code) + " is not a mode");
  const EpilogueMode mode = *decoded;
  std::vector<AllreduceRmsnormArgs> args;
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<Rank*> targets;
  for (const auto& [local, input, residual, weight, out, scales, mirror, scale, stream] : ranks) {
    Rank& rank = g.rank(local);
    AllreduceRmsnormArgs a;
    static_cast<RmsnormQuantArgs&>(a) = epilogue_args({input, residual, residual, weight, out, scales, mirror},
                                                      {0, 0, 0, 0, 0, 0}, 1e-6f, tokens, hidden, dtype, mode);
    set_quant_scale(a, scale);
    args.push_back(a);
    streams.push_back(std::make_unique<Stream>(rank.device(), mutable_address(stream)));
    targets.push_back(&rank);
  }
  std::vector<double> micros;
  micros.reserve(std::size_t(calls) * ranks.size());
  nb::gil_scoped_release unlocked;
  for (int call = 0; call < calls; ++call) {
    for (std::size_t r = 0; r < targets.size(); ++r) {
      const auto start = std::chrono::steady_clock::now();
      targets[r]->allreduce_rmsnorm(args[r], *streams[r]);
      micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
  }
  return micros;
}

void bind_group_class(nb::module_& m) {
  nb::class_<PyGroup>(m, "Group", "A group of ranks (include/arfuse/group.hpp); python/arfuse/torch.py wraps it.")
      .def_prop_ro("world", [](PyGroup& g) { return g.group().world(); })
      .def_prop_ro("local_ranks", [](PyGroup& g) { return g.group().local_ranks(); })
      .def_prop_ro("max_tokens", [](PyGroup& g) { return g.group().max_tokens(); })
      .def_prop_ro("max_hidden", [](PyGroup& g) { return g.group().max_hidden(); })
      .def_prop_ro("has_nccl", [](PyGroup& g) { return g.group().has_nccl(); })
      .def_prop_ro("custom_path_available", [](PyGroup& g) { return g.group().custom_path_available(); })
      .def_prop_ro("custom_path_failure", [](PyGroup& g) { return g.group().custom_path_failure(); })
      .def("rank_index", [](PyGroup& g, int local) { return g.rank(local).index(); })
      .def("device_ordinal", [](PyGroup& g, int local) { return g.rank(local).device().ordinal(); })
      .def("fp8_format", [](PyGroup& g, int local) { return fp8_format_name(g.rank(local).device()); })
      .def("register_handle",
           [](PyGroup& g, int local) {
             Rank& rank = g.rank(local);
             return register_handle(&g, &rank, fp8_dtype_of(rank.device()));
           })
      .def("input_buffer",
           [](PyGroup& g, int local) { return reinterpret_cast<std::uintptr_t>(g.rank(local).input_buffer()); })
      .def("path_for", [](PyGroup& g, int tokens, int hidden) { return path_name(g.group().path_for(tokens, hidden)); })
      .def("last_path",
           [](PyGroup& g, int local) -> std::optional<std::string> {
             const auto path = g.rank(local).last_path();
             if (!path) return std::nullopt;
             return path_name(*path);
           })
      .def("stage_for", [](PyGroup& g, int tokens, int hidden) { return g.group().stage_for(tokens, hidden); })
      .def("force_stage", [](PyGroup& g, std::optional<int> stage) { g.group().force_stage(stage); })
      .def("prepare",
           [](PyGroup& g, int local, int hidden, const std::string& dtype, const std::string& quant,
              const std::string& norm, int group_size, const std::string& scale_format, bool mirror) {
             g.rank(local).prepare(hidden, parse_dtype(dtype),
                                   parse_mode(quant, norm, group_size, scale_format, "row_major", mirror));
           })
      .def("allreduce_rmsnorm",
           [](PyGroup& g, int local, std::uintptr_t input, std::uintptr_t residual_in, std::uintptr_t residual_out,
              std::uintptr_t weight, float eps, std::uintptr_t out, std::uintptr_t scales, std::uintptr_t mirror,
              int tokens, int hidden, const std::string& dtype, const std::string& quant, const std::string& norm,
              int group_size, const std::string& scale_format, const std::string& scale_layout, bool writes_mirror,
              bool pdl, std::uintptr_t stream, int input_stride, int residual_in_stride, int residual_out_stride,
              int out_stride, int mirror_stride, int out_width, std::uintptr_t quant_scale) {
             Rank& rank = g.rank(local);
             AllreduceRmsnormArgs args;
             static_cast<RmsnormQuantArgs&>(args) = epilogue_args(
                 {input, residual_in, residual_out, weight, out, scales, mirror},
                 {input_stride, residual_in_stride, residual_out_stride, out_stride, mirror_stride, out_width}, eps,
                 tokens, hidden, dtype, parse_mode(quant, norm, group_size, scale_format, scale_layout, writes_mirror));
             args.pdl = pdl;
             set_quant_scale(args, quant_scale);
             rank.allreduce_rmsnorm(args, Stream(rank.device(), mutable_address(stream)));
           })
      .def(
          "time_calls",
          [](PyGroup& g, int calls, const std::vector<RankCall>& ranks, int tokens, int hidden,
             const std::string& dtype,
             std::int64_t mode) { return time_calls(g, calls, ranks, tokens, hidden, dtype, mode); },
          "Host microseconds of each Rank::allreduce_rmsnorm of `calls` rounds, one call per listed rank "
          "(local, input, residual, weight, out, scales, mirror, scale, stream; residual updated in place), "
          "without Python between the calls.")
      .def("check", [](PyGroup& g) { g.group().check(); })
      .def("set_check_calls", [](PyGroup& g, bool on) { g.group().set_check_calls(on); })
      .def("reset", [](PyGroup& g) { g.group().reset(); })
      .def(
          "register_graph_inputs",
          [](PyGroup& g) {
            const Group::GraphInputs done = g.group().register_graph_inputs();
            return std::make_tuple(done.calls, done.in_place);
          },
          "Group::register_graph_inputs: (calls registered, of them read in place on every rank).")
      .def("close", &PyGroup::close);
}

// PeerTimeout and CallMismatch as Python exceptions that also carry the ranks (.rank, .peer).
void bind_rank_attributes(nb::handle peer_timeout, nb::handle call_mismatch) {
  static nb::handle timeout_type = peer_timeout, mismatch_type = call_mismatch;
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const PeerTimeout& e) {
      nb::object error = timeout_type(e.what());
      error.attr("rank") = e.rank();
      PyErr_SetObject(timeout_type.ptr(), error.ptr());
    } catch (const CallMismatch& e) {
      nb::object error = mismatch_type(e.what());
      error.attr("rank") = e.rank();
      error.attr("peer") = e.peer();
      PyErr_SetObject(mismatch_type.ptr(), error.ptr());
    }
  });
}

}  // namespace

void bind_group(nb::module_& m, nb::handle peer_timeout, nb::handle call_mismatch) {
  bind_group_class(m);
  bind_rank_attributes(peer_timeout, call_mismatch);
  m.def("process_group", &make_process_group, nb::arg("rank"), nb::arg("world"), nb::arg("allgather"),
        nb::arg("device"), nb::arg("max_tokens"), nb::arg("max_hidden"), nb::arg("dtype").none(), nb::arg("timeout_s"),
        nb::arg("transport"), nb::arg("check_calls"), nb::arg("graph_calls"), nb::arg("cache_dir"),
        "A group with one rank in this process; the ranks meet through `allgather(bytes) -> list[bytes]`.");
  m.def("local_group", &make_local_group, nb::arg("devices"), nb::arg("max_tokens"), nb::arg("max_hidden"),
        nb::arg("dtype").none(), nb::arg("timeout_s"), nb::arg("transport"), nb::arg("check_calls"),
        nb::arg("graph_calls"), nb::arg("cache_dir"),
        "A group whose ranks (one per listed device ordinal; repeats share a GPU) this process drives.");
  m.def(
      "op_table", [] { return reinterpret_cast<std::uintptr_t>(&op_table()); },
      "The address of the call table arfuse's torch extension takes (arfuse/torch_ops/op_table.hpp).");
  m.def(
      "register_tracing_handle",
      [](const std::string& fp8) {
        if (fp8 != "e4m3fn" && fp8 != "e4m3fnuz") throw Error("fp8 is " + fp8 + "; it must be e4m3fn or e4m3fnuz");
        return register_handle(nullptr, nullptr,
                               fp8 == "e4m3fnuz" ? torch_ops::Fp8Dtype::e4m3fnuz : torch_ops::Fp8Dtype::e4m3fn);
      },
      nb::arg("fp8"),
      "A communicator handle without a group, whose FP8 dtype the ops' fake implementations read: tracing on a "
      "machine without a GPU. A real call with it raises Error.");
  m.def("release_handle", &release_handle, nb::arg("handle"), "Forgets a handle; False if it was not open.");
  m.def("handle_open", &handle_open, nb::arg("handle"));
  m.def("rethrow_op_failure", &rethrow_op_failure, nb::arg("message"),
        "Raises the arfuse exception (its class, .rank, .peer) behind an op's failure whose message is `message`; "
        "returns None when the failure did not come from arfuse's runtime.");
  m.def(
      "mode_code",
      [](const std::string& quant, const std::string& norm, int group_size, const std::string& scale_format,
         const std::string& scale_layout, bool mirror) {
        return jit::mode_code(parse_mode(quant, norm, group_size, scale_format, scale_layout, mirror));
      },
      nb::arg("quant"), nb::arg("norm"), nb::arg("group_size"), nb::arg("scale_format"), nb::arg("scale_layout"),
      nb::arg("mirror"),
      "The int the ops take for a mode (names checked here; the hidden-size rules when the op runs).");
  m.def(
      "check_mode",
      [](const std::string& quant, const std::string& norm, int group_size, const std::string& scale_format,
         const std::string& scale_layout, bool mirror,
         int hidden) { parse_mode(quant, norm, group_size, scale_format, scale_layout, mirror).validate(hidden); },
      nb::arg("quant"), nb::arg("norm"), nb::arg("group_size"), nb::arg("scale_format"), nb::arg("scale_layout"),
      nb::arg("mirror"), nb::arg("hidden"),
      "EpilogueMode::validate, the one check every epilogue call makes on its mode (names, hidden size, group "
      "size, scale layout), "
      "for a caller that must refuse a bad mode before it allocates outputs; raises Error naming the value.");
  m.def(
      "fp8_format", [](int device) { return std::string(fp8_format_name(context_for(device).device())); },
      nb::arg("device"), "The FP8 format the kernels write on this device: e4m3fn or e4m3fnuz.");
}

}  // namespace arfuse::python
