// [cpu][emulated] The fused all-reduce kernels of AMD targets, W ranks emulated on the CPU at once
// (tests/emulated/emulated_kernel.hpp; each rank's blocks are OS threads that meet at the cross-rank
// barriers through the same signal blocks the GPUs use), against the reference model bit for
// bit: every rank's every output, both stages, W = 2, 4 and 8, two calls in a row (the barrier
// epochs carry over), with fewer blocks than rows so that blocks stride over rows; and the kernels
// of captured calls, which read each rank's input where its input slot says.
#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>

#include "jit/spec_set.hpp"
#include "reference/block_scaled.hpp"
#include "reference/model.hpp"
#include "runtime/kernel_args.hpp"
#include "templates/quant_table.cuh"
#include "templates/signal.cuh"

#include "emulated_kernel.hpp"
#include "row_layout.hpp"
#include "support.hpp"

using namespace arfuse;
using namespace arfuse::jit;
using arfuse::test::Bits16;
using arfuse::test::EmulatedKernel;

namespace {

// The kernel of a captured call (the spec's graph_inputs) and what its input slot holds: nothing
// registered (every rank copies, as an eager call), every rank's input, or rank 0's only.
enum class CapturedCall { no, unregistered, registered, rank0_registered };

struct FusedCase {
  std::string target;
  int world, stage, tokens, hidden;
  DType dtype;
  test::QuantCase quant;
  Norm norm;
  bool epilogue = true;  // false: the plain all-reduce
  int group = 128;
  ScaleFormat scale_format = ScaleFormat::f32;
  ScaleLayout scale_layout = ScaleLayout::row_major;
  bool strided = false;  // every caller tensor a view with its own row stride
  int out_width = 0;     // 0: hidden; more: a padded output
  CapturedCall graph = CapturedCall::no;
};

bool registered(const FusedCase& c, int rank) {
  return c.graph == CapturedCall::registered || (c.graph == CapturedCall::rank0_registered && rank == 0);
}

// The slot the captured call's kernel is given; the slots before it point at other rows, so that
// reading the wrong slot shows in the outputs.
constexpr unsigned kCallSlot = 2;

// A rank's Signal with its input-slot table right after it, zeroed, as the runtime allocates them.
struct SignalBlock {
  std::vector<std::uint64_t> words =
      std::vector<std::uint64_t>((sizeof(Signal) + (kCallSlot + 1) * sizeof(InputSlot)) / 8);
  Signal* get() { return reinterpret_cast<Signal*>(words.data()); }
  const Signal* get() const { return reinterpret_cast<const Signal*>(words.data()); }
  Signal* operator->() { return get(); }
  const Signal* operator->() const { return get(); }
  const Signal& operator*() const { return *get(); }
  InputSlot* slots() { return const_cast<InputSlot*>(input_slots(get())); }
};

RowStrides rows_of(const FusedCase& c) {
  if (!c.epilogue) return detail::row_strides(test::allreduce_layout(c.tokens, c.hidden, c.dtype, c.strided));
  const EpilogueMode mode = test::mode_of(c.quant, c.norm, c.group, c.scale_format, c.scale_layout);
  return detail::row_strides(test::epilogue_layout(c.tokens, c.hidden, c.dtype, mode, c.strided, c.out_width));
}

struct RankBuffers {
  Bits16 input, staging, gather;
  SignalBlock signal;  // zeroed: epoch 0, no error, no input registered
  Bits16 residual_out, mirror;
  std::vector<std::uint8_t> out, scales;
};

// Row 0's first 4 W elements, where the result depends on the order of the fold: rank s holds 1,
// ranks s + 1 and s + 2 hold 2^-24 and rank s + 3 holds h, half of T's ulp at 1 (mod W; the
// others 0), for each shift s. Rank order from s gives 1 + h in f32 (each 2^-24 is a tie to even
// and lost), a tie that T rounds to 1; adding the small ones first gives 1 + h + 2^-23, which
// rounds up. So a fold that starts at another rank, or runs backwards, changes some of these
// sums, and with a residual of 0 residual_out shows each sum unchanged.
void plant_order_probe(std::vector<Bits16>& inputs, std::vector<RankBuffers>& ranks, Bits16& residual, DType dtype) {
  const int world = int(inputs.size());
  const float pattern[4] = {1.0f, 0x1p-24f, 0x1p-24f, dtype == DType::bf16 ? 0x1p-8f : 0x1p-11f};
  for (int e = 0; e < 4 * world; ++e) {
    const int shift = e % world;
    for (int r = 0; r < world; ++r) {
      const int position = (r - shift + world) % world;
      inputs[size_t(r)][size_t(e)] = reference::narrow(position < 4 ? pattern[position] : 0.0f, dtype);
      ranks[size_t(r)].input[size_t(e)] = inputs[size_t(r)][size_t(e)];
    }
    residual[size_t(e)] = reference::narrow(0.0f, dtype);
  }
}

KernelSpec spec_of(const FusedCase& c) {
  KernelSpec s;
  s.module = c.epilogue ? Module::fused_ar : Module::allreduce;
  s.hidden = c.hidden, s.dtype = c.dtype, s.mode = test::mode_of(c.quant, c.norm);
  if (c.quant.quant == Quant::fp8_group) s.mode.group_size = c.group, s.mode.scale_format = c.scale_format;
  s.world = c.world, s.stage = c.stage;
  s.target = Target::parse(c.target);
  s.views = c.strided || c.out_width != 0;
  s.graph_inputs = c.graph != CapturedCall::no;
  return s;
}

// Ranks 0 .. launched - 1 run the kernel at once, each from a thread of its own, as W processes
// would; throws what the first failed emulation threw.
void launch_ranks(const EmulatedKernel& kernel, std::vector<FusedArgs>& args, unsigned grid, int launched) {
  std::vector<std::string> problems(static_cast<size_t>(launched));
  std::vector<std::thread> launches;
  for (int r = 0; r < launched; ++r) {
    launches.emplace_back([&, r] {
      void* params[] = {&args[size_t(r)]};
      try {
        kernel.launch(grid, params, true);
      } catch (const std::exception& e) {
        problems[size_t(r)] = e.what();
      }
    });
  }
  for (auto& t : launches) t.join();
  for (int r = 0; r < launched; ++r) {
    INFO("rank " << r);
    REQUIRE(problems[size_t(r)].empty());
  }
}

struct OutputSizes {
  size_t out_bytes, scale_count;
};

// Bytes per unit of out's row stride.
int out_unit(const FusedCase& c) { return !c.epilogue || c.quant == Quant::none ? 2 : 1; }

OutputSizes output_sizes(const FusedCase& c) {
  const size_t n = size_t(c.tokens) * size_t(c.hidden);
  const bool mx = c.quant.quant == Quant::mxfp4, grouped = c.quant.quant == Quant::fp8_group || mx;
  const size_t scale_count = c.quant.quant == Quant::nvfp4
                                 ? reference::nvfp4_scale_count(c.tokens, c.hidden, c.scale_layout)
                             : c.quant.quant == Quant::fp8_static ? 0
                             : grouped                            ? n / size_t(mx ? 32 : c.group)
                                                                  : size_t(c.tokens);
  return {size_t(c.tokens) * size_t(rows_of(c).out) * size_t(out_unit(c)), scale_count};
}

// Poisons every rank's staging, gather and output buffers and fills each rank's kernel argument.
std::vector<FusedArgs> prepare_ranks(const FusedCase& c, std::vector<RankBuffers>& ranks, const Bits16& residual,
                                     const Bits16& weight, const float* quant_scale) {
  const size_t n = size_t(c.tokens) * size_t(c.hidden);
  const OutputSizes sizes = output_sizes(c);
  const RowStrides rows = rows_of(c);
  for (auto& b : ranks) {
    b.staging = test::poisoned<std::uint16_t>(n), b.gather = test::poisoned<std::uint16_t>(n);
    b.residual_out = test::poisoned<std::uint16_t>(size_t(c.tokens) * size_t(rows.residual_out));
    b.mirror = test::poisoned<std::uint16_t>(size_t(c.tokens) * size_t(rows.mirror));
    b.out = test::poisoned<std::uint8_t>(sizes.out_bytes),
    b.scales = test::poisoned<std::uint8_t>(sizes.scale_count * 4);
  }
  const auto strides = detail::scale_strides(test::mode_of(c.quant, c.norm, c.group, c.scale_format, c.scale_layout),
                                             c.tokens, c.hidden);
  std::vector<FusedArgs> args(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    FusedArgs& a = args[r];
    std::memset(&a, 0, sizeof a);
    for (size_t p = 0; p < ranks.size(); ++p) {
      a.peers.staging[p] = ranks[p].staging.data();
      a.peers.gather[p] = ranks[p].gather.data();
      a.peers.signal[p] = ranks[p].signal.get();
    }
    RankBuffers& b = ranks[r];
    a.rank = int(r), a.tokens = c.tokens, a.residual_in = residual.data(), a.residual_out = b.residual_out.data();
    a.weight = weight.data(), a.eps = 1e-5f, a.out = b.out.data(), a.scales = b.scales.data();
    a.mirror = b.mirror.data(), a.timeout_ns = 600'000'000'000ull, a.input = b.input.data(), a.check_call = 1;
    a.scale_row_stride = strides.row, a.scale_group_stride = strides.group;
    a.strides = rows;
    a.quant_scale = reads_quant_scale(c.quant.quant) ? quant_scale : nullptr;
    if (c.graph != CapturedCall::no) {
      a.input_slot = kCallSlot;
      InputSlot* slots = b.signal.slots();
      for (size_t p = 0; p < ranks.size(); ++p) {
        for (unsigned k = 0; k < kCallSlot; ++k) slots[k].rows[p] = residual.data();
        slots[kCallSlot].rows[p] = registered(c, int(p)) ? ranks[p].input.data() : nullptr;
      }
    }
  }
  return args;
}

// One call of every rank at once on fresh inputs; every rank's outputs against the reference.
void run_call(const FusedCase& c, const EmulatedKernel& kernel, std::vector<RankBuffers>& ranks, unsigned grid) {
  auto rng = test::fresh_rng();
  const int tokens = c.tokens, hidden = c.hidden, world = c.world;
  const size_t n = size_t(tokens) * hidden;
  const RowStrides rows = rows_of(c);
  std::vector<Bits16> inputs;
  for (auto& r : ranks) inputs.push_back(r.input = test::random_tensor(rng, n, c.dtype));
  Bits16 residual = test::random_tensor(rng, n, c.dtype);
  if (world >= 3) plant_order_probe(inputs, ranks, residual, c.dtype);
  for (auto& r : ranks) r.input = test::spread_rows(r.input, tokens, hidden, rows.input);
  const Bits16 weight = test::random_tensor(rng, size_t(hidden), c.dtype, 0.5f);
  const Bits16 sum = reference::fold(inputs, c.dtype);
  const EpilogueMode mode = test::mode_of(c.quant, c.norm, c.group, c.scale_format, c.scale_layout);
  reference::EpilogueConfig config{
      hidden, c.dtype, mode, 1e-5f, Target::parse(c.target), test::test_quant_scale(c.quant.quant)};
  const Bits16 residual_rows = c.epilogue ? test::spread_rows(residual, tokens, hidden, rows.residual_in) : residual;
  std::vector<FusedArgs> args = prepare_ranks(c, ranks, residual_rows, weight, &config.quant_scale);
  launch_ranks(kernel, args, grid, world);
  for (int r = 0; r < world; ++r) REQUIRE(ranks[size_t(r)].signal->error == 0u);
  // A registered input is read where it lies: its rank's staging buffer is never written.
  for (int r = 0; r < world; ++r) {
    INFO("staging of rank " << r);
    const Bits16& staging = ranks[size_t(r)].staging;
    if (registered(c, r))
      REQUIRE(std::all_of(staging.begin(), staging.end(), [](std::uint16_t v) { return v == 0xffff; }));
    else
      test::require_bits_equal(staging, inputs[size_t(r)], "staged input", hidden);
  }

  if (!c.epilogue) {
    for (int r = 0; r < world; ++r) {
      INFO("rank " << r);
      std::vector<std::uint16_t> strided(size_t(tokens) * size_t(rows.out));
      std::memcpy(strided.data(), ranks[size_t(r)].out.data(), strided.size() * 2);
      const Bits16 got = test::packed_rows(strided, tokens, hidden, rows.out, hidden, "out");
      test::require_bits_equal(got, sum, "all-reduce sum", hidden);
    }
    return;
  }
  const auto expected = reference::epilogue(config, tokens, sum, residual, weight);
  const int unit = out_unit(c);
  const int out_row_bytes = packs_fp4(c.quant.quant) ? hidden / 2 : hidden * unit;
  for (int r = 0; r < world; ++r) {
    INFO("rank " << r);
    const RankBuffers& b = ranks[size_t(r)];
    const auto out = test::packed_rows(b.out, tokens, out_row_bytes, rows.out * unit,
                                       packs_fp4(c.quant.quant) ? out_row_bytes : rows.out_width * unit, "out");
    const Bits16 residual_out =
        test::packed_rows(b.residual_out, tokens, hidden, rows.residual_out, hidden, "residual_out");
    const Bits16 mirror = c.quant.mirror ? test::packed_rows(b.mirror, tokens, hidden, rows.mirror, hidden, "mirror")
                                         : Bits16(b.mirror.begin(), b.mirror.begin() + long(n));
    test::require_epilogue_bytes({residual_out, out, b.scales, mirror}, expected, config, tokens);
  }
}

void check_fused(const FusedCase& c, unsigned grid, int calls) {
  CAPTURE(c.target, c.world, c.stage, c.tokens, c.hidden, to_string(c.dtype), test::text(c.quant), to_string(c.norm),
          c.epilogue, c.strided, c.out_width, c.group, to_string(c.scale_format), to_string(c.scale_layout), grid,
          int(c.graph));
  const EmulatedKernel kernel(spec_of(c));
  std::vector<RankBuffers> ranks(static_cast<size_t>(c.world));
  for (int call = 0; call < calls; ++call) {
    INFO("call " << call);
    run_call(c, kernel, ranks, grid);
  }
  for (const auto& r : ranks) REQUIRE(r.signal->epoch[0] == unsigned(calls * (c.stage == 1 ? 2 : 3)));
}

}  // namespace

TEST_CASE("emulated AMD fused all-reduce kernels equal the reference on every rank", "[cpu][emulated]") {
  using F = ScaleFormat;
  using L = ScaleLayout;
  // Seven rows: with two stages and W = 8 the last rank has no share, with W = 4 an uneven one.
  check_fused({"gfx1250", 2, 1, 7, 6144, DType::bf16, test::mirror(Quant::fp8), Norm::rms}, 3, 2);
  check_fused({"gfx1250", 4, 2, 7, 2880, DType::f16, test::mirror(Quant::fp8_group), Norm::gemma, true, 32, F::e8m0,
               L::column_major},
              2, 2);
  check_fused({"gfx1250", 8, 2, 7, 2048, DType::bf16, test::mirror(Quant::mxfp4), Norm::rms}, 2, 1);
  check_fused({"gfx1100", 4, 1, 9, 7168, DType::bf16, Quant::none, Norm::gemma}, 2, 1);
  check_fused({"gfx942", 4, 1, 7, 8192, DType::bf16, Quant::mxfp4, Norm::gemma}, 2, 2);
  check_fused({"gfx942", 2, 2, 9, 2880, DType::bf16, Quant::fp8, Norm::rms}, 3, 1);
  check_fused({"gfx942", 8, 1, 7, 4096, DType::f16, Quant::fp8_group, Norm::rms, true, 128, F::ue8m0_f32}, 2, 1);
  check_fused({"gfx90a", 4, 2, 7, 5120, DType::f16, Quant::none, Norm::rms, false}, 2, 2);
  // Static per-tensor FP8 and NVFP4, both scale layouts (swizzled: the grid writes the padding rows).
  check_fused({"gfx1250", 4, 2, 7, 6144, DType::bf16, test::mirror(Quant::fp8_static), Norm::rms}, 2, 2);
  check_fused({"gfx942", 2, 1, 9, 2880, DType::f16, Quant::fp8_static, Norm::gemma}, 3, 1);
  check_fused({"gfx950", 4, 1, 7, 7168, DType::bf16, test::mirror(Quant::nvfp4), Norm::rms, true, 128, F::f32,
               L::swizzled_128x4},
              3, 2);
  check_fused({"gfx1250", 8, 2, 9, 2064, DType::bf16, Quant::nvfp4, Norm::gemma, true, 128, F::f32, L::row_major}, 2,
              1);
  // Strided caller tensors (the staging copy reads the strided input) and padded outputs.
  const FusedCase strided_none{"gfx1250", 4,    2,   7,      2880,         DType::bf16, Quant::none,
                               Norm::rms, true, 128, F::f32, L::row_major, true,        3072};
  check_fused(strided_none, 2, 2);
  check_fused({"gfx942", 2, 1, 9, 6144, DType::f16, test::mirror(Quant::fp8), Norm::gemma, true, 128, F::f32,
               L::row_major, true, 6400},
              3, 1);
  check_fused({"gfx1100", 4, 1, 7, 4096, DType::bf16, test::mirror(Quant::mxfp4), Norm::rms, true, 128, F::f32,
               L::row_major, true},
              2, 1);
  check_fused({"gfx942", 2, 2, 7, 2048, DType::bf16, Quant::none, Norm::rms, false, 128, F::f32, L::row_major, true}, 2,
              1);
}

TEST_CASE("emulated kernels of captured calls read each rank's input where its slot says, bit for bit",
          "[cpu][emulated][graph]") {
  using F = ScaleFormat;
  using L = ScaleLayout;
  for (CapturedCall g : {CapturedCall::unregistered, CapturedCall::registered, CapturedCall::rank0_registered}) {
    check_fused({"gfx1250", 4, 1, 7, 6144, DType::bf16, test::mirror(Quant::fp8), Norm::rms, true, 128, F::f32,
                 L::row_major, false, 0, g},
                3, 2);
    check_fused({"gfx942", 8, 2, 9, 2048, DType::f16, Quant::nvfp4, Norm::gemma, true, 128, F::f32, L::swizzled_128x4,
                 false, 0, g},
                2, 2);
    check_fused(
        {"gfx950", 2, 2, 7, 2880, DType::bf16, Quant::none, Norm::rms, false, 128, F::f32, L::row_major, false, 0, g},
        2, 1);
  }
  // A views kernel whose inputs are contiguous (its residual is not); and one whose strided
  // inputs are copied (the runtime registers contiguous inputs only).
  check_fused({"gfx1250", 4, 2, 7, 4096, DType::bf16, Quant::fp8_static, Norm::rms, true, 128, F::f32, L::row_major,
               false, 6144, CapturedCall::registered},
              2, 2);
  check_fused({"gfx942", 2, 1, 9, 2880, DType::f16, test::mirror(Quant::fp8_group), Norm::rms, true, 64, F::e8m0,
               L::column_major, true, 0, CapturedCall::unregistered},
              3, 1);
}

// The protocol between ranks, with the same signal blocks: a failure ends the call on every rank
// that came, names the rank, and writes no output.
namespace {

bool all_poisoned(const std::vector<std::uint8_t>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b == test::kPoisonByte; });
}

// Two ranks' kernel, buffers and arguments for one call of `c` on fresh inputs.
struct TwoRanks {
  explicit TwoRanks(const FusedCase& c) : kernel(spec_of(c)) {
    auto rng = test::fresh_rng();
    const size_t n = size_t(c.tokens) * size_t(c.hidden);
    for (auto& r : ranks) r.input = test::random_tensor(rng, n, c.dtype);
    residual = test::random_tensor(rng, n, c.dtype);
    weight = test::random_tensor(rng, size_t(c.hidden), c.dtype);
    args = prepare_ranks(c, ranks, residual, weight, nullptr);
  }
  EmulatedKernel kernel;
  std::vector<RankBuffers> ranks = std::vector<RankBuffers>(2);
  Bits16 residual, weight;
  std::vector<FusedArgs> args;
};

void require_nothing_written(const RankBuffers& b) {
  REQUIRE(all_poisoned(b.out));
  REQUIRE(all_poisoned(b.scales));
  REQUIRE(std::all_of(b.residual_out.begin(), b.residual_out.end(), [](std::uint16_t v) { return v == 0xffff; }));
}

}  // namespace

TEST_CASE("emulated fused kernel: a rank that never comes is named after the timeout", "[cpu][emulated]") {
  TwoRanks call({"gfx1250", 2, 1, 5, 2048, DType::bf16, Quant::fp8, Norm::rms});
  call.args[0].timeout_ns = 50'000'000;        // 50 ms
  launch_ranks(call.kernel, call.args, 2, 1);  // rank 1 never launches
  const auto& ranks = call.ranks;
  const unsigned error = ranks[0].signal->error;
  REQUIRE(error != 0u);
  CHECK(signal_error_kind(error) == unsigned(kBarrierEntry));
  CHECK(signal_error_rank(error) == 1u);
  CHECK(signal_error_block(error) < 2u);
  require_nothing_written(ranks[0]);
}

TEST_CASE("emulated fused kernel: ranks whose calls differ record the mismatch and write nothing", "[cpu][emulated]") {
  const FusedCase c{"gfx942", 2, 2, 7, 2048, DType::bf16, Quant::fp8_group, Norm::rms};
  TwoRanks call(c);
  auto& args = call.args;
  args[1].tokens = 5;  // rank 1 was called with fewer rows
  launch_ranks(call.kernel, args, 2, 2);
  const auto& ranks = call.ranks;
  const auto descriptor = [&](int tokens) {
    return call_descriptor(unsigned(tokens), unsigned(c.hidden), true,
                           unsigned(quant_code(int(c.quant.quant), c.quant.mirror)), unsigned(c.norm),
                           unsigned(c.stage), true, unsigned(c.group), unsigned(c.scale_format));
  };
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    const Signal& s = *ranks[size_t(r)].signal;
    REQUIRE(s.error != 0u);
    CHECK(signal_error_kind(s.error) == unsigned(kCallMismatch));
    CHECK(signal_error_rank(s.error) == unsigned(1 - r));
    CHECK(s.mismatch_mine == descriptor(args[size_t(r)].tokens));
    CHECK(s.mismatch_theirs == descriptor(args[size_t(1 - r)].tokens));
    require_nothing_written(ranks[size_t(r)]);
  }
}

// Hidden (30-40 minutes a target on 2 cores: the fused specs are most of the default set; run by
// hand after a template change): every fused_ar and allreduce kernel of the default set, 7 rows on 2 blocks, one call.
namespace {

void sweep_fused(const std::string& target) {
  int ran = 0;
  for (const KernelSpec& s : default_specs({Target::parse(target)})) {
    if (s.module != Module::fused_ar && s.module != Module::allreduce) continue;
    // A graph kernel with every input registered (its unregistered slot is the eager kernel's copy).
    check_fused({target, s.world, s.stage, 7, s.hidden, s.dtype, s.mode.quant, s.mode.norm,
                 s.module == Module::fused_ar, s.mode.group_size, s.mode.scale_format, ScaleLayout::row_major, false, 0,
                 s.graph_inputs ? CapturedCall::registered : CapturedCall::no},
                2, 1);
    ++ran;
  }
  WARN(ran << " default-set fused and allreduce specs of " << target << " ran bit-exact in emulation");
}

}  // namespace

TEST_CASE("emulated: every default-set fused kernel of gfx1250", "[.][emulated-sweep][gfx1250]") {
  sweep_fused("gfx1250");
}
TEST_CASE("emulated: every default-set fused kernel of gfx942", "[.][emulated-sweep][gfx942]") {
  sweep_fused("gfx942");
}
