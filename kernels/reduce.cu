// Reductions: whole-array (sum, min, max) and segmented (segment i = x[offsets[i]:offsets[i+1]]).
//
// Whole array, two launches in a fixed order, no atomics, so results are bitwise reproducible
// run to run on a given device (the partition depends on the grid, sized from the SM count):
//   reduce_partials: a grid-stride loop over 16-byte vectors, VECS vectors loaded before any is
//     combined (bytes in flight), a per-thread fold, a warp-shuffle tree, one partial per block;
//   reduce_final: one block folds the partials in index order.
// With a single block, reduce_partials writes the result directly (one launch).
//
// Segmented: a sub-warp of TPS threads per segment for segments of at most 64 * TPS entries;
// longer segments are split into chunks of LONG_CHUNK entries, one block per chunk
// (segmented_reduce_chunks), whose partials one warp per long segment folds in chunk order
// (segmented_reduce_finish). Empty segments get the operator's identity. Fixed order throughout.
//
// Operators are objects (sg::Sum<V>, sg::Min<V>, sg::Max<V>) passed as template parameters.
#include "common.cuh"

inline constexpr int REDUCE_BLOCK = 256;
inline constexpr int SEGMENT_BLOCK = 256;
inline constexpr int LONG_BLOCK = 256;
inline constexpr int LONG_ITEMS = 16;
inline constexpr int LONG_CHUNK = LONG_BLOCK * LONG_ITEMS;

// partials[blockIdx.x] = fold of the block's share of x[0:n].
template <class V, class Op, int VECS>
__global__ void __launch_bounds__(REDUCE_BLOCK)
reduce_partials(const V* __restrict__ x, const long long n, V* __restrict__ partials) {
    __shared__ V scratch[REDUCE_BLOCK / 32];
    const Op op{};
    V acc = Op::identity();
    sg::for_each_strided<VECS>(x, n, [&](V value) { acc = op(acc, value); });
    acc = sg::block_reduce<REDUCE_BLOCK>(acc, op, scratch);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// out[0] = fold of partials[0:count] in index order (one block).
template <class V, class Op>
__global__ void __launch_bounds__(REDUCE_BLOCK)
reduce_final(const V* __restrict__ partials, const long long count, V* __restrict__ out) {
    __shared__ V scratch[REDUCE_BLOCK / 32];
    const Op op{};
    V acc = Op::identity();
    for (long long i = threadIdx.x; i < count; i += REDUCE_BLOCK) acc = op(acc, partials[i]);
    acc = sg::block_reduce<REDUCE_BLOCK>(acc, op, scratch);
    if (threadIdx.x == 0) out[0] = acc;
}

// out[s] = fold of x[offsets[s]:offsets[s+1]] for segments of at most `long_segment` entries,
// TPS lanes per segment; longer segments are left to the chunk kernels.
template <class V, class I, class Op, int TPS>
__global__ void __launch_bounds__(SEGMENT_BLOCK)
segmented_reduce_segments(const V* __restrict__ x, const I* __restrict__ offsets, const long long n_segments,
                          V* __restrict__ out, const long long long_segment) {
    const Op op{};
    const long long thread = (long long)blockIdx.x * SEGMENT_BLOCK + threadIdx.x;
    const long long segment = thread / TPS;
    const int lane = threadIdx.x % TPS;
    // Lanes past the last segment, and long segments, still join the shuffles with no work.
    long long begin = 0, end = 0;
    bool owns = false;
    if (segment < n_segments) {
        begin = (long long)sg::ldg(offsets + segment);
        end = (long long)sg::ldg(offsets + segment + 1);
        owns = end - begin <= long_segment;
        if (!owns) end = begin;
    }
    V acc = Op::identity();
    for (long long j = begin + lane; j < end; j += TPS) acc = op(acc, sg::ldg(x + j));
    acc = sg::subwarp_reduce<TPS>(acc, op);
    if (lane == 0 && owns) out[segment] = acc;
}

// One block per chunk of a long segment: partials[chunk] = fold of the chunk.
// chunk_first[slot] is the first chunk of long segment long_segments[slot]; chunk_slot[c] its slot.
template <class V, class I, class Op>
__global__ void __launch_bounds__(LONG_BLOCK)
segmented_reduce_chunks(const V* __restrict__ x, const I* __restrict__ offsets, const I* __restrict__ long_segments,
                        const I* __restrict__ chunk_first, const I* __restrict__ chunk_slot, V* __restrict__ partials) {
    __shared__ V scratch[LONG_BLOCK / 32];
    const Op op{};
    const long long chunk = blockIdx.x;
    const long long slot = chunk_slot[chunk];
    const long long segment = long_segments[slot];
    const long long segment_end = offsets[segment + 1];
    const long long begin = (long long)offsets[segment] + (chunk - (long long)chunk_first[slot]) * LONG_CHUNK;
    const long long end = begin + LONG_CHUNK < segment_end ? begin + LONG_CHUNK : segment_end;
    V items[LONG_ITEMS];
    // Loads first, then the fold: LONG_ITEMS loads in flight per thread.
#pragma unroll
    for (int k = 0; k < LONG_ITEMS; ++k) {
        const long long j = begin + k * LONG_BLOCK + threadIdx.x;
        items[k] = j < end ? sg::ldg(x + j) : Op::identity();
    }
    V acc = items[0];
#pragma unroll
    for (int k = 1; k < LONG_ITEMS; ++k) acc = op(acc, items[k]);
    acc = sg::block_reduce<LONG_BLOCK>(acc, op, scratch);
    if (threadIdx.x == 0) partials[chunk] = acc;
}

// One warp per long segment: out[segment] = fold of its partials in chunk order.
template <class V, class I, class Op>
__global__ void segmented_reduce_finish(const I* __restrict__ long_segments, const I* __restrict__ chunk_first,
                                        const V* __restrict__ partials, V* __restrict__ out, const long long n_long) {
    const Op op{};
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (warp >= n_long) return;  // warp-uniform exit
    V acc = Op::identity();
    for (long long c = (long long)chunk_first[warp] + lane; c < (long long)chunk_first[warp + 1]; c += 32)
        acc = op(acc, partials[c]);
    acc = sg::subwarp_reduce<32>(acc, op);
    if (lane == 0) out[long_segments[warp]] = acc;
}
