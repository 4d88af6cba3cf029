// Compressed layout -> the other orientation (CSR <-> CSC, equally the transpose's CSR), on the
// device (sparsegpu/convert/transpose.py; NumPy references in sparsegpu/reference/transpose.py,
// same arguments, same layouts).
//
// The entries, in storage order (major line by major line), are sorted by their minor index with
// a stable least-significant-digit radix sort, DIGIT_BITS bits a pass: within each new major line
// they keep their storage order, which is ascending old major index (then storage order, for
// repeated indices), as convert.swap_major orders them. A pass over tiles of TILE entries:
//   transpose_count: each tile's digit counts, digit-major (counts[d * n_tiles + t]);
//   (host: an exclusive scan of the counts: where each (digit, tile) run starts)
//   transpose_move / transpose_place: each tile ranks its entries by digit, stably (a warp takes
//     WARP_ITEMS consecutive entries, 32 a round; lanes of one digit are found with
//     __match_any_sync and counted in per-warp tables, whose prefixes over the warps give each
//     entry's place in the tile), stages them in shared memory in that order and writes each
//     digit's run at its start: consecutive threads write consecutive positions. move carries
//     (key, position) to the next pass; place, the last pass, writes the sorted keys, the old
//     major index of each entry (row_of[position]) and its value (data[position]).
// No atomics decide an order: counts are exact and every rank comes from the input order, so the
// result is the same bits run to run. Keys outside [0, 2^bits) (invalid input) still land inside
// the outputs: count and rank read the same digits.
#include "common.cuh"

inline constexpr int TRANSPOSE_BLOCK = 256;
inline constexpr int TRANSPOSE_DIGIT_BITS = 8;
inline constexpr int TRANSPOSE_DIGITS = 1 << TRANSPOSE_DIGIT_BITS;
inline constexpr int TRANSPOSE_WARPS = TRANSPOSE_BLOCK / 32;
inline constexpr int TRANSPOSE_ROUNDS = 8;  // 32-entry rounds per warp and tile
inline constexpr int TRANSPOSE_WARP_ITEMS = 32 * TRANSPOSE_ROUNDS;
inline constexpr int TRANSPOSE_TILE = TRANSPOSE_BLOCK * TRANSPOSE_ROUNDS;
static_assert(TRANSPOSE_DIGITS == TRANSPOSE_BLOCK, "one thread per digit");

// Bits [shift, shift + DIGIT_BITS) of the key (shift < 32 for int32 keys: widening keeps them).
template <class I> __device__ __forceinline__ int transpose_digit(I key, int shift) {
    return (int)(((unsigned long long)(long long)key >> shift) & (TRANSPOSE_DIGITS - 1));
}

// What a tile stages in shared memory: its entries ordered by (digit, input order), where each
// digit's run starts in the tile and in the output.
template <class I> struct TransposeTile {
    int warp_counts[TRANSPOSE_WARPS][TRANSPOSE_DIGITS];  // per (warp, digit); then their prefixes
    int digit_start[TRANSPOSE_DIGITS];                  // the digit's run in the staged tile
    long long output_start[TRANSPOSE_DIGITS];           // the digit's run in the output
    I key[TRANSPOSE_TILE];
    I pos[TRANSPOSE_TILE];
};

// Per tile: counts[d * n_tiles + tile] = entries of digit d. Lanes of one digit add once.
template <class I>
__global__ void __launch_bounds__(TRANSPOSE_BLOCK)
transpose_count(const I* __restrict__ keys, const long long n, const int shift, const long long n_tiles,
                I* __restrict__ counts) {
    __shared__ int tally[TRANSPOSE_DIGITS];
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    const long long tile = blockIdx.x;
    tally[t] = 0;
    __syncthreads();
    const long long first = tile * TRANSPOSE_TILE + warp * TRANSPOSE_WARP_ITEMS + lane;
#pragma unroll
    for (int r = 0; r < TRANSPOSE_ROUNDS; ++r) {
        const long long j = first + r * 32;
        const int digit = j < n ? transpose_digit(sg::ldg(keys + j), shift) : TRANSPOSE_DIGITS;
        const unsigned peers = __match_any_sync(sg::FULL_MASK, digit);
        if (digit < TRANSPOSE_DIGITS && (peers & ((1u << lane) - 1u)) == 0) atomicAdd(&tally[digit], __popc(peers));
    }
    __syncthreads();
    counts[t * n_tiles + tile] = (I)tally[t];
}

// Loads tile blockIdx.x's keys and positions (position j itself when `pos` is null), ranks them
// stably by digit and stages them in `s`; `starts` is the exclusive scan of transpose_count's
// counts. Returns the tile's entry count.
template <class I>
__device__ __forceinline__ int stage_tile(const I* __restrict__ keys, const I* __restrict__ pos, const long long n,
                                          const int shift, const long long n_tiles, const I* __restrict__ starts,
                                          TransposeTile<I>& s) {
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    const long long tile = blockIdx.x, base = tile * TRANSPOSE_TILE;
    const int count = (int)min((long long)TRANSPOSE_TILE, n - base);
#pragma unroll
    for (int w = 0; w < TRANSPOSE_WARPS; ++w) s.warp_counts[w][t] = 0;
    s.output_start[t] = (long long)starts[t * n_tiles + tile];
    __syncthreads();
    I key[TRANSPOSE_ROUNDS], at[TRANSPOSE_ROUNDS];
    int digit[TRANSPOSE_ROUNDS], rank[TRANSPOSE_ROUNDS];
    const int first = warp * TRANSPOSE_WARP_ITEMS + lane;
#pragma unroll
    for (int r = 0; r < TRANSPOSE_ROUNDS; ++r) {
        const int i = first + r * 32;
        key[r] = i < count ? sg::ldg(keys + base + i) : I(0);
        at[r] = i < count ? (pos == nullptr ? (I)(base + i) : sg::ldg(pos + base + i)) : I(0);
    }
#pragma unroll
    for (int r = 0; r < TRANSPOSE_ROUNDS; ++r) {
        const int i = first + r * 32;
        digit[r] = i < count ? transpose_digit(key[r], shift) : TRANSPOSE_DIGITS;
        const unsigned peers = __match_any_sync(sg::FULL_MASK, digit[r]);
        const int before = __popc(peers & ((1u << lane) - 1u));  // same digit, lower lane, this round
        const int earlier = digit[r] < TRANSPOSE_DIGITS ? s.warp_counts[warp][digit[r]] : 0;
        rank[r] = earlier + before;
        __syncwarp();
        if (digit[r] < TRANSPOSE_DIGITS && before == 0) s.warp_counts[warp][digit[r]] = earlier + __popc(peers);
        __syncwarp();
    }
    __syncthreads();
    // Thread t owns digit t: prefixes over the warps in warp order, then over the digits.
    int total = 0;
#pragma unroll
    for (int w = 0; w < TRANSPOSE_WARPS; ++w) {
        const int c = s.warp_counts[w][t];
        s.warp_counts[w][t] = total;
        total += c;
    }
    s.digit_start[t] = total;
    __syncthreads();
    for (int offset = 1; offset < TRANSPOSE_DIGITS; offset *= 2) {  // inclusive scan of the totals
        const int add = t >= offset ? s.digit_start[t - offset] : 0;
        __syncthreads();
        s.digit_start[t] += add;
        __syncthreads();
    }
    s.digit_start[t] -= total;  // exclusive
    __syncthreads();
#pragma unroll
    for (int r = 0; r < TRANSPOSE_ROUNDS; ++r) {
        if (digit[r] < TRANSPOSE_DIGITS) {
            const int slot = s.digit_start[digit[r]] + s.warp_counts[warp][digit[r]] + rank[r];
            s.key[slot] = key[r];
            s.pos[slot] = at[r];
        }
    }
    __syncthreads();
    return count;
}

// One pass that is not the last: (key, position) of every entry to its place in keys_out, pos_out.
template <class I>
__global__ void __launch_bounds__(TRANSPOSE_BLOCK)
transpose_move(const I* __restrict__ keys, const I* __restrict__ pos, const long long n, const int shift,
               const long long n_tiles, const I* __restrict__ starts, I* __restrict__ keys_out,
               I* __restrict__ pos_out) {
    __shared__ TransposeTile<I> s;
    const int count = stage_tile(keys, pos, n, shift, n_tiles, starts, s);
    for (int k = threadIdx.x; k < count; k += TRANSPOSE_BLOCK) {
        const I key = s.key[k];
        const int d = transpose_digit(key, shift);
        const long long out = s.output_start[d] + (k - s.digit_start[d]);
        keys_out[out] = key;
        pos_out[out] = s.pos[k];
    }
}

// The last pass: the sorted keys to keys_out, each entry's old major index row_of[position] to
// indices_out and its value data[position] to data_out.
template <class V, class I>
__global__ void __launch_bounds__(TRANSPOSE_BLOCK)
transpose_place(const I* __restrict__ keys, const I* __restrict__ pos, const long long n, const int shift,
                const long long n_tiles, const I* __restrict__ starts, const I* __restrict__ row_of,
                const V* __restrict__ data, I* __restrict__ keys_out, I* __restrict__ indices_out,
                V* __restrict__ data_out) {
    __shared__ TransposeTile<I> s;
    const int count = stage_tile(keys, pos, n, shift, n_tiles, starts, s);
    for (int k = threadIdx.x; k < count; k += TRANSPOSE_BLOCK) {
        const I key = s.key[k];
        const long long p = (long long)s.pos[k];
        const int d = transpose_digit(key, shift);
        const long long out = s.output_start[d] + (k - s.digit_start[d]);
        keys_out[out] = key;
        indices_out[out] = sg::ldg(row_of + p);
        data_out[out] = sg::ldg(data + p);
    }
}
