// Fused all-reduce + epilogue across the W ranks of a node, and the plain all-reduce.
//
// Every rank runs the same grid; block b of every rank handles the same rows and meets only
// block b of its peers at barriers, so no grid-wide synchronisation is needed.
//
// One stage:  entry barrier | each rank folds every row from all staging buffers | epilogue |
//             exit barrier.
// Two stages: entry barrier | rank r folds its share of the rows and pushes the T-rounded
//             sums into every rank's gather buffer | middle barrier | epilogue over all rows
//             from the local gather buffer | exit barrier.
// Both fold x0 + x1 + ... + x(W-1) in rank order, never rotated, so every rank, both stages
// and the standalone kernels give the same bits. The exit barrier keeps a rank from
// overwriting its staging (or a peer's gather) buffer while a peer still reads it.
#pragma once

#include "epilogue.cuh"
#include "signal.cuh"

namespace arfuse {

// After this long at a barrier a block also watches its rank's error word: once another block
// of the rank has failed this call (a mismatched call, a timeout), waiting on is pointless.
// The fast path, where peers arrive within microseconds, never reads it.
inline constexpr u64 kWatchErrorAfterNs = 20000;  // inline: an internal symbol would carry a per-process name

// A peer's call differs from ours: record it (the first error only) for the host.
__device__ __forceinline__ void record_mismatch(Signal* self, int peer, u64 mine, u64 theirs) {
  if (record_error(&self->error, signal_error_code(kCallMismatch, blockIdx.x, peer))) {
    self->mismatch_mine = mine;
    self->mismatch_theirs = theirs;
  }
}

// Announces `epoch` to every peer's slot for this block, then waits until every peer has
// announced it here. Wrap-safe: epochs compare by wrapped difference. On timeout, writes the
// error word naming the rank that did not arrive and returns false. The flag word also
// carries this rank's call (`call`, 0 when unchecked): at the entry barrier (`check`) every
// peer's is compared before any of its rows is read, and a mismatch is an error, not garbage.
// The check costs no memory operation: the call rides in the store and the load the barrier
// makes anyway.
template <int W>
__device__ __forceinline__ bool cross_rank_barrier(const PeerBuffers& peers, int rank, u32 epoch, u64 timeout_ns,
                                                   u32 kind, u64 call, bool check, u32 error_at_start, int& failed) {
  __syncthreads();  // this block's reads and writes before the barrier are complete
  if (threadIdx.x < W) {
    const int peer = threadIdx.x;
    Signal* self = peers.signal[rank];
    // Release: the staging/gather writes ordered before it by __syncthreads() are visible to
    // the peer before it sees the flag.
    store_release_system(&peers.signal[peer]->flag[blockIdx.x][rank], (call << kEpochBits) | (epoch & kEpochMask));
    const u64* mine = &self->flag[blockIdx.x][peer];
    const u64 start = clock_ns();
    bool arrived = true;
    u64 seen;
    // Acquire: once the peer's epoch is seen, its writes before its release are visible.
    while (!epoch_reached(seen = load_acquire_system(mine), epoch)) {
      const u64 waited = clock_ns() - start;
      if (waited > timeout_ns) {
        record_error(&self->error, signal_error_code(kind, blockIdx.x, peer));
        arrived = false;
        break;
      }
      if (waited > kWatchErrorAfterNs && *static_cast<const volatile u32*>(&self->error) != error_at_start) {
        arrived = false;
        break;
      }
    }
    if (arrived && check && (seen >> kEpochBits) != call)
      record_mismatch(self, peer, call, seen >> kEpochBits), arrived = false;
    if (!arrived) failed = 1;
  }
  __syncthreads();  // the acquiring threads' view is now the whole block's
  return failed == 0;
}

// Whether two ranks' sum is add_pair's (one rounding of one addition, as the f32 fold): in the
// plain all-reduce, and where the epilogue adds in pairs too; the other epilogues keep the f32
// fold with their f32 add.
template <typename T, int QUANT, bool EPILOGUE>
inline constexpr bool kFoldPairAdd = EPILOGUE ? kEpiloguePairAdd<T, QUANT> : kPairAddFor<T>;

// T( ((f(x0) + f(x1)) + f(x2)) + ... ), packed: one vector of every rank, folded in rank order.
template <typename T, int W, bool PAIRS>
__device__ __forceinline__ Vec16 fold_vector(const Vec16 (&v)[W]) {
  if constexpr (W == 2 && PAIRS) {
    Vec16 sum;
#pragma unroll
    for (int i = 0; i < 4; ++i) sum.w[i] = add_pair<T>(v[0].w[i], v[1].w[i]);
    return sum;
  } else {
    float acc[8];
    unpack8<T>(v[0], acc);
#pragma unroll
    for (int r = 1; r < W; ++r) {
      float t[8];
      unpack8<T>(v[r], t);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += t[j];
    }
    return pack8<T>(acc);
  }
}

// The folded vectors this thread owns of the row at `offset`, rank r's rows at rows[r] (the
// staging buffers, or a captured call's registered inputs). All W loads of a vector are issued
// before the first add.
template <typename T, int H, int THREADS, int VPT, int W, bool PAIRS, typename Rows>
__device__ __forceinline__ void fold_row(const Rows& rows, long long offset, Vec16 (&sum)[VPT]) {
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (!owns_vector<H, THREADS>(k)) continue;
    const long long element = offset + (threadIdx.x + k * THREADS) * 8;
    Vec16 v[W];
#pragma unroll
    for (int r = 0; r < W; ++r) v[r] = load_shared_l2(static_cast<const T*>(rows[r]) + element);
    sum[k] = fold_vector<T, W, PAIRS>(v);
  }
}

// A row another rank wrote in this kernel (the gather buffer).
template <typename T, int H, int THREADS, int VPT>
__device__ __forceinline__ void load_row_l2(const T* row, Vec16 (&v)[VPT]) {
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (owns_vector<H, THREADS>(k)) v[k] = load_shared_l2(row + (threadIdx.x + k * THREADS) * 8);
  }
}

template <typename T, int H, int THREADS, int VPT>
__device__ __forceinline__ void store_row(T* row, const Vec16 (&v)[VPT]) {
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (owns_vector<H, THREADS>(k)) store16(row + (threadIdx.x + k * THREADS) * 8, v[k]);
  }
}

// The result of one reduced row: the epilogue, or (plain all-reduce) the sum itself.
template <typename T, int H, int THREADS, int VPT, int QUANT, int NORM, int GROUP, int SCALE, bool EPILOGUE, bool VIEWS>
__device__ __forceinline__ void finish_row(const FusedArgs& a, int row, const Vec16 (&ar)[VPT],
                                           const Vec16 (&residual)[VPT], StagedWeight weight, QuantScale quant_scale,
                                           ReduceScratch& scratch) {
  const RowOffsets<T, H, EPILOGUE ? QUANT : kQuantNone, VIEWS> at{a.strides};
  if (!EPILOGUE) {
    store_row<T, H, THREADS, VPT>(static_cast<T*>(a.out) + at.out(row), ar);
    return;
  }
  RowOutputs<T> outputs;
  outputs.residual_out = static_cast<T*>(a.residual_out) + at.residual_out(row);
  outputs.out = static_cast<u8*>(a.out) + at.out_bytes(row);
  outputs.out_width = at.out_width();
  place_row_scales<T, QUANT, SCALE>(outputs, a.scales, row, a.scale_row_stride, a.scale_group_stride, quant_scale);
  outputs.mirror = static_cast<T*>(a.mirror) + (kQuantWritesMirror<QUANT> ? at.mirror(row) : 0);
  // The later residual_out store that rmsnorm_quant uses for fp8_group is slower here
  // (docs/performance.md, "Tuning decisions").
  epilogue_row<T, H, THREADS, VPT, QUANT, NORM, GROUP, SCALE, ResidualStore::after_add>(ar, residual, weight, a.eps,
                                                                                        outputs, scratch);
}

// Copies this rank's input rows into its staging buffer: exactly the rows that block b of
// every rank reads, so block b's entry barrier publishes them (no separate copy launch, which
// costs a launch and, on some drivers, a load that waits for the peers' spinning kernels).
template <typename T, int H, int THREADS, int VPT, int W, int STAGE, bool VIEWS>
__device__ __forceinline__ void stage_own_rows(const FusedArgs& a) {
  const RowOffsets<T, H, kQuantNone, VIEWS> at{a.strides};
  const int share = STAGE == 1 ? a.tokens : (a.tokens + W - 1) / W;
  for (int part = 0; part < (STAGE == 1 ? 1 : W); ++part) {
    const int begin = part * share, end = min(a.tokens, begin + share);
    for (int row = begin + blockIdx.x; row < end; row += gridDim.x) {
      Vec16 v[VPT];
      load_vectors<T, H, THREADS, VPT>(static_cast<const T*>(a.input) + at.input(row), v);
      store_row<T, H, THREADS, VPT>(static_cast<T*>(a.peers.staging[a.rank]) + (long long)row * H, v);
    }
  }
}

// Stage 1: every row of this block, folded from all staging buffers, then its epilogue.
template <typename T, int H, int THREADS, int VPT, int QUANT, int NORM, int GROUP, int SCALE, int W, bool EPILOGUE,
          bool VIEWS, typename Rows>
__device__ __forceinline__ void reduce_rows(const FusedArgs& a, const Rows& rows, StagedWeight weight,
                                            QuantScale quant_scale, ReduceScratch& scratch) {
  const RowOffsets<T, H, QUANT, VIEWS> at{a.strides};
  for (int row = blockIdx.x; row < a.tokens; row += gridDim.x) {
    Vec16 residual[VPT];
    if (EPILOGUE) {
      load_vectors<T, H, THREADS, VPT>(static_cast<const T*>(a.residual_in) + at.residual_in(row), residual);
    }
    Vec16 x[VPT];
    fold_row<T, H, THREADS, VPT, W, kFoldPairAdd<T, QUANT, EPILOGUE>>(rows, (long long)row * H, x);
    finish_row<T, H, THREADS, VPT, QUANT, NORM, GROUP, SCALE, EPILOGUE, VIEWS>(a, row, x, residual, weight, quant_scale,
                                                                               scratch);
  }
}

// The graph_inputs kernels: where each rank's rows are read, from the call's input slot
// (templates/signal.cuh), into `rows`, which the entry barrier's __syncthreads publishes to the
// block: a registered input where it lies, else the rank's staging buffer. Returns whether this
// rank's own input is read where it lies (then nothing is copied).
template <int W>
__device__ __forceinline__ bool read_input_slot(const FusedArgs& a, const Signal* self, const void* (&rows)[W]) {
  const InputSlot& slot = input_slots(self)[a.input_slot];
  if (threadIdx.x < W) {
    const void* registered = slot.rows[threadIdx.x];
    rows[threadIdx.x] = registered != nullptr ? registered : a.peers.staging[threadIdx.x];
  }
  return slot.rows[a.rank] != nullptr;
}

// The graph_inputs kernels' shared copy of where each rank's rows lie (one per block; only
// those kernels instantiate it, so the others' shared memory is as it was).
template <int W>
__device__ __forceinline__ auto graph_rows() -> const void* (&)[W] {
  __shared__ const void* rows[W];
  return rows;
}

// Where the kernel reads each rank's rows: the staging buffers, or what the input slot says.
template <bool GRAPH_INPUTS, int W>
__device__ __forceinline__ const auto& rows_to_fold(const FusedArgs& a) {
  if constexpr (GRAPH_INPUTS) {
    return graph_rows<W>();
  } else {
    return a.peers.staging;
  }
}

// The kernels' body.
template <typename T, int H, int THREADS, int VPT, int QUANT, int NORM, int GROUP, int SCALE, int W, int STAGE,
          bool EPILOGUE, bool VIEWS, bool GRAPH_INPUTS>
__device__ __forceinline__ void fused_ar(const FusedArgs& a) {
  static_assert(W >= 2 && W <= kMaxWorld, "world size");
  static_assert(STAGE == 1 || STAGE == 2, "stage");
  wait_for_previous_kernel();  // before the signal reads: the previous call's blocks write them last
  __shared__ ReduceScratch scratch;
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  Signal* self = a.peers.signal[a.rank];
  u32 epoch = self->epoch[blockIdx.x];  // read by all before any write (the write is last)
  const u32 error_at_start = *static_cast<const volatile u32*>(&self->error);
  const u64 call = a.check_call ? call_descriptor(a.tokens, H, kIsBf16<T>, QUANT, NORM, STAGE, EPILOGUE,
                                                  kQuantIsGroupFp8<QUANT> ? GROUP : 0,
                                                  kQuantIsGroupFp8<QUANT> ? SCALE
                                                  : kQuantSwizzles<QUANT> ? unsigned(a.scale_group_stride == 0)
                                                                          : 0u)
                                : 0;
  bool copy = a.input != nullptr;
  if constexpr (GRAPH_INPUTS) copy = !read_input_slot<W>(a, self, graph_rows<W>()) && copy;
  // The previous call's exit barrier guarantees no peer still reads the staging buffer (or, where
  // the peers read this rank's input where it lies, the input).
  if (copy) stage_own_rows<T, H, THREADS, VPT, W, STAGE, VIEWS>(a);
  // Once per block for all its rows, in flight while the block waits at the entry barrier.
  __shared__ Vec16 staged_weight[EPILOGUE ? THREADS * VPT : 1];
  StagedWeight weight{staged_weight};
  if constexpr (EPILOGUE) weight = stage_weight<T, H, THREADS, VPT>(static_cast<const T*>(a.weight), staged_weight);

  // In flight across the barrier: the call's scale, for the modes that read one.
  const float scale_value = EPILOGUE ? load_quant_scale<QUANT>(a.quant_scale) : 1.0f;
  const bool entered = cross_rank_barrier<W>(a.peers, a.rank, ++epoch, a.timeout_ns, kBarrierEntry, call, call != 0,
                                             error_at_start, failed);
  // No path leaves the kernel with the weight's copy in flight (a failed barrier returns early);
  // it had the whole barrier to land, so this costs nothing on the way in.
  weight.wait();
  if (entered) {
    let_next_kernel_start();  // every rank's blocks are resident now
    const QuantScale quant_scale = quant_scale_of<QUANT>(scale_value);
    if constexpr (EPILOGUE)
      zero_scale_padding<THREADS, QUANT>(a.scales, a.tokens, a.scale_row_stride, a.scale_group_stride);
    const auto& rows = rows_to_fold<GRAPH_INPUTS, W>(a);
    if (STAGE == 1) {
      reduce_rows<T, H, THREADS, VPT, QUANT, NORM, GROUP, SCALE, W, EPILOGUE, VIEWS>(a, rows, weight, quant_scale,
                                                                                     scratch);
    } else {
      const int share = (a.tokens + W - 1) / W;
      const int first = a.rank * share, last = min(a.tokens, first + share);
      for (int row = first + blockIdx.x; row < last; row += gridDim.x) {
        Vec16 x[VPT];
        fold_row<T, H, THREADS, VPT, W, kFoldPairAdd<T, QUANT, EPILOGUE>>(rows, (long long)row * H, x);
#pragma unroll
        for (int r = 0; r < W; ++r)
          store_row<T, H, THREADS, VPT>(static_cast<T*>(a.peers.gather[r]) + (long long)row * H, x);
      }
      if (cross_rank_barrier<W>(a.peers, a.rank, ++epoch, a.timeout_ns, kBarrierMiddle, call, false, error_at_start,
                                failed)) {
        // The rows block b of every rank pushed, and no others: block b's barrier covers them.
        const RowOffsets<T, H, QUANT, VIEWS> at{a.strides};
        for (int r = 0; r < W; ++r) {
          const int begin = r * share, end = min(a.tokens, begin + share);
          for (int row = begin + blockIdx.x; row < end; row += gridDim.x) {
            Vec16 residual[VPT];
            if (EPILOGUE)
              load_vectors<T, H, THREADS, VPT>(static_cast<const T*>(a.residual_in) + at.residual_in(row), residual);
            Vec16 x[VPT];
            load_row_l2<T, H, THREADS, VPT>(static_cast<const T*>(a.peers.gather[a.rank]) + (long long)row * H, x);
            finish_row<T, H, THREADS, VPT, QUANT, NORM, GROUP, SCALE, EPILOGUE, VIEWS>(a, row, x, residual, weight,
                                                                                       quant_scale, scratch);
          }
        }
      }
    }
    if (!failed)
      cross_rank_barrier<W>(a.peers, a.rank, ++epoch, a.timeout_ns, kBarrierExit, call, false, error_at_start, failed);
  }
  if (threadIdx.x == 0) self->epoch[blockIdx.x] = epoch;
}

// MIN_BLOCKS: 0, or the resident blocks per multiprocessor the kernel is compiled for, which
// caps its registers (jit/tuning_policy.cpp).
template <typename T, int H, int THREADS, int VPT, int QUANT, int NORM, int GROUP, int SCALE, int W, int STAGE,
          bool EPILOGUE, bool VIEWS, int MIN_BLOCKS>
__global__ void ARFUSE_LAUNCH_BOUNDS(THREADS, MIN_BLOCKS) fused_ar_kernel(FusedArgs a) {
  fused_ar<T, H, THREADS, VPT, QUANT, NORM, GROUP, SCALE, W, STAGE, EPILOGUE, VIEWS, false>(a);
}

// The kernel of a call captured in a graph (the spec's graph_inputs): as fused_ar_kernel, each
// rank's rows read where the call's input slot says.
template <typename T, int H, int THREADS, int VPT, int QUANT, int NORM, int GROUP, int SCALE, int W, int STAGE,
          bool EPILOGUE, bool VIEWS, int MIN_BLOCKS>
__global__ void ARFUSE_LAUNCH_BOUNDS(THREADS, MIN_BLOCKS) fused_ar_graph_kernel(FusedArgs a) {
  fused_ar<T, H, THREADS, VPT, QUANT, NORM, GROUP, SCALE, W, STAGE, EPILOGUE, VIEWS, true>(a);
}

}  // namespace arfuse
