// The format advisor's statistics: what every pass shares. csr_stats (matrix_stats_tiled.cu) and
// csr_stats_direct (matrix_stats_direct.cu) read indptr once and indices once and write ONE buffer
// of unsigned 64-bit words whose head is zero at launch (layout below; sparsegpu/reference/stats.py
// holds the same constants and the NumPy reference); the summary (matrix_stats_summary.cuh) turns
// it into a record in the caller's pinned host memory and zeroes the head again. Every word is an
// integer merged with integer atomics, so the counts are exact and the same every run; only the
// order of the overflow list varies, and every reader takes that list as a multiset.
//
//   out[0..4]  entries below the diagonal, on it, above it, sum of |i - j|, max |i - j|
//   out[5]     sum over slices of 32 consecutive rows of the slice's longest row
//              (SELL slots / 32; the last slice may be partial)
//   out[6]     rows of length >= STATS_BINS (the overflow list's length)
//   out[7]     the longest row's length (so the host reads only the bins up to it)
//   out[8 .. 8 + STATS_BINS)   rows of each length 0 .. STATS_BINS - 1
//   out[8 + STATS_BINS ..)     the overflow rows' lengths, in no particular order; the caller
//                              gives it room for nnz / STATS_BINS + 1 of them, at least as many
//                              as rows can be that long
//
// Namespace-scope constants are `inline constexpr`: a translation unit that instantiates no
// kernel leaves some unreferenced, which is no reason for a warning.
#ifndef SPARSEGPU_MATRIX_STATS_COMMON_CUH
#define SPARSEGPU_MATRIX_STATS_COMMON_CUH
#include "common.cuh"

inline constexpr int STATS_BLOCK = 256;
template <class I> constexpr int STATS_VECTOR = 16 / sizeof(I);  // entries of a 16-byte vector
// Rows a tile holds at most (a multiple of 32): its pointers fill 8 KiB (int32) or 16 KiB (int64)
// of shared memory, which with the bins and the piece stays within 48 KiB of static shared memory.
inline constexpr int STATS_WINDOW = 2016;
// 4096 bins: 16 KiB of 32-bit shared counts per block, and an overflow list of at most
// nnz / 4096 rows, so the head the host copies back stays small (32 KiB). 32-bit block counts
// suffice: a block counts at most the rows of the tiles it takes, far below 2^32 for any
// indptr that fits in device memory when the grid fills the device.
inline constexpr int STATS_BINS = 4096;
inline constexpr int OUT_SLICE_WIDTHS = 5, OUT_OVERFLOW_ROWS = 6, OUT_LONGEST = 7, OUT_BINS = 8;
inline constexpr int OUT_OVERFLOW = OUT_BINS + STATS_BINS;
// Each work counter on a 128-byte line of its own, apart from the head every block merges into:
// every block's atomics on them would otherwise queue at one L2 slice.
inline constexpr int COUNTER_TICKET = 0, COUNTER_ANNOUNCED = 16, COUNTER_TILES_DONE = 32;
inline constexpr int STATS_COUNTERS = 48;
// The record stats_summary writes straight into the caller's pinned host memory (int64 words;
// sparsegpu/advisor/statistics.py RECORD_*): the call's epoch (written last, once the other words are
// visible: the host polls for it, publish_record), the status, the head's first OUT_BINS words,
// then the summary of the row lengths, SUMMARY_WORDS words in this order:
// shortest row, empty rows, sum of squared lengths, the p50, p90 and p99 lengths, HYB's width,
// the entries in HYB's ELL part at that width, rows longer than `limit`, and the entries in the
// `hot_rows` longest rows.
inline constexpr int RECORD_EPOCH = 0, RECORD_STATUS = 1, RECORD_HEAD = 2, RECORD_SUMMARY = 10;
inline constexpr int SUMMARY_WORDS = 10;
inline constexpr int RECORD_WORDS = RECORD_SUMMARY + SUMMARY_WORDS;
// STATUS_SUMMARISED: the record is whole, and the buffer's counters and head are zero again for
// the next call (zeroed before the record is published).
// STATUS_HEAD_KEPT: the head and overflow list are left for the host to summarise (more than
// SUMMARY_OVERFLOW_ROWS rows past the bins, or at least hot_rows of them, or costs past
// float64's exact integers, or an inconsistent indptr), and to zero.
inline constexpr int STATUS_SUMMARISED = 1, STATUS_HEAD_KEPT = 2;
inline constexpr int SUMMARY_OVERFLOW_ROWS = 1024;

template <class I> struct unsigned_of;
template <> struct unsigned_of<int> { using type = unsigned; };
template <> struct unsigned_of<long long> { using type = unsigned long long; };

// One 16-byte vector of columns, loaded as a whole (streaming: read once).
__device__ __forceinline__ void load_vector(const int* p, int (&e)[4]) {
    const int4 v = __ldcs(reinterpret_cast<const int4*>(p));
    e[0] = v.x, e[1] = v.y, e[2] = v.z, e[3] = v.w;
}
__device__ __forceinline__ void load_vector(const long long* p, long long (&e)[2]) {
    const longlong2 v = __ldcs(reinterpret_cast<const longlong2*>(p));
    e[0] = v.x, e[1] = v.y;
}

// 16 bytes from global to shared memory: cp.async (no registers held while in flight; it
// completes at copy_to_shared_wait) where the device has it, else through a register.
template <class V>
__device__ __forceinline__ void copy_to_shared(V* dst, const V* src) {
    static_assert(sizeof(V) == 16, "16-byte copies");
#if __CUDA_ARCH__ >= 800
    unsigned shared_address;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(shared_address) : "l"(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared_address), "l"(src) : "memory");
#else
    *dst = *src;
#endif
}
__device__ __forceinline__ void copy_to_shared_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// The sum of the warp's 32 values (every lane gets it): one instruction.
__device__ __forceinline__ unsigned warp_total(const unsigned v) {
#if __CUDA_ARCH__ >= 800
    return __reduce_add_sync(sg::FULL_MASK, v);
#else
    return sg::shfl(sg::subwarp_sum<32>(v), 0);
#endif
}

// The largest of the warp's 32 values (every lane gets it).
__device__ __forceinline__ long long warp_max(const int v) {
#if __CUDA_ARCH__ >= 800
    return __reduce_max_sync(sg::FULL_MASK, v);
#else
    int m = v;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) m = max(m, __shfl_xor_sync(sg::FULL_MASK, m, offset));
    return m;
#endif
}
__device__ __forceinline__ long long warp_max(long long v) {
#if __CUDA_ARCH__ >= 800
    // One instruction when every length fits 32 bits (always for int32 indptr).
    if (__all_sync(sg::FULL_MASK, (unsigned long long)v <= 0xffffffffULL))
        return (long long)__reduce_max_sync(sg::FULL_MASK, (unsigned)v);
#endif
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
        const long long other = __shfl_xor_sync(sg::FULL_MASK, v, offset);
        v = other > v ? other : v;
    }
    return v;
}

// Per-thread structure counts: below and above the diagonal within the current item (32-bit: an
// item has at most STATS_ITEM entries; end_item adds them to the warp's 64-bit totals), sum and
// max of |i - j|.
template <class I> struct Structure {
    using Magnitude = typename unsigned_of<I>::type;
    static constexpr int SIGN = 8 * sizeof(I) - 1;
    unsigned below = 0, above = 0;
    unsigned long long distance = 0;
    Magnitude band = 0;
    // An entry at column - row = d; d = 0 counts nothing here (entries on the diagonal are the
    // item's entries less those off it), so an entry not to be counted passes 0. Branch-free,
    // and cheap per entry: below and above are the sign bits of d and -d (|d| < 2^SIGN: both
    // row and column lie in [0, 2^SIGN)).
    __device__ __forceinline__ void count(const I d) {
        below += unsigned(Magnitude(d) >> SIGN);
        above += unsigned((Magnitude(0) - Magnitude(d)) >> SIGN);
        const Magnitude magnitude = d < 0 ? Magnitude(0) - Magnitude(d) : Magnitude(d);
        distance += magnitude;
        band = magnitude > band ? magnitude : band;
    }
    // Every lane of the warp calls it; lane 0 adds the warp's counts to totals[0] (below) and
    // totals[1] (above).
    __device__ __forceinline__ void end_item(unsigned long long* totals) {
        const unsigned warp_below = warp_total(below), warp_above = warp_total(above);
        if (threadIdx.x % 32 == 0) totals[0] += warp_below, totals[1] += warp_above;
        below = above = 0;
    }
};

// The row statistics of one tile: warp w takes slices w, w + 8, ... of 32 rows, lane l the
// slice's row l; rows past the tile count as length 0 (a partial last slice).
template <class I>
__device__ __forceinline__ void tile_rows_stats(const I* window, const int rows, const long long overflow_capacity,
                                                unsigned* bins, unsigned long long* __restrict__ out,
                                                unsigned long long* warp_widths, unsigned long long* warp_longest) {
    using Magnitude = typename unsigned_of<I>::type;
    const int lane = threadIdx.x % 32;
    // The warp's slices' widths and longest row, kept by every lane and written once (both at
    // most the tile's entries, which fit I).
    Magnitude widths = 0, longest = 0;
    for (int slice = threadIdx.x / 32 * 32; slice < rows; slice += STATS_BLOCK) {
        const int i = slice + lane;
        const bool real = i < rows;
        // (Lengths fit I, as the pointers do; one instruction for the width where I is 32-bit.)
        const I length = real ? window[i + 1] - window[i] : I(0);
        const long long width = warp_max(length);
        widths += Magnitude(width);
        // (A negative width only comes from a corrupt indptr; it does not count as longest.)
        longest = width > (long long)longest ? Magnitude(width) : longest;
        // The unsigned comparison also sends a negative length (a corrupt indptr) to the
        // overflow list, never outside the shared bins.
        const bool binned = real && Magnitude(length) < Magnitude(STATS_BINS);
        const unsigned binning = __ballot_sync(sg::FULL_MASK, binned);
        // A slice of equal lengths (stencils, regular meshes) adds once; otherwise every lane
        // adds its own (colliding lanes serialise only among themselves).
        const I lead = sg::shfl(length, 0);
        const unsigned alike = __ballot_sync(sg::FULL_MASK, binned && length == lead);
        if (binning && alike == binning) {
            if (lane == 0) atomicAdd(bins + lead, (unsigned)__popc(binning));
        } else if (binned) {
            atomicAdd(bins + length, 1u);
        }
        // Longer rows are listed whatever their slice's shorter rows did (a slice of 31 equal
        // lengths may hold one long row).
        if (real && !binned) {
            const unsigned long long slot = atomicAdd(out + OUT_OVERFLOW_ROWS, 1ULL);
            if (slot < (unsigned long long)overflow_capacity)
                out[OUT_OVERFLOW + slot] = (unsigned long long)(long long)length;
        }
    }
    if (lane == 0) {
        const int warp = threadIdx.x / 32;
        warp_widths[warp] += widths;
        warp_longest[warp] = longest > warp_longest[warp] ? longest : warp_longest[warp];
    }
}

// A block's totals in shared memory: per warp (written by lane 0) the sum of its slices' widths,
// its longest row, its entries below and above the diagonal; scratch for the merge; the entries
// of the block's items (thread 0's); the block's head words and whether a block alone summarised
// them (csr_stats_direct on one block).
struct BlockTotals {
    unsigned long long widths[STATS_BLOCK / 32], longest[STATS_BLOCK / 32], structure[STATS_BLOCK / 32][2];
    unsigned long long scratch[2][STATS_BLOCK / 32];
    unsigned long long entries;
    unsigned long long head[OUT_BINS];
    bool summarised;
    __device__ __forceinline__ void clear() {
        if (threadIdx.x < STATS_BLOCK / 32) {
            widths[threadIdx.x] = longest[threadIdx.x] = 0;
            structure[threadIdx.x][0] = structure[threadIdx.x][1] = 0;
        }
        if (threadIdx.x == 0) entries = 0;
    }
};

// The block's head word threadIdx.x (threads 0 .. OUT_BINS - 1 but OUT_OVERFLOW_ROWS, which the
// rows' statistics count straight into the buffer; 0 for the others), after every thread's
// s.end_item: below, on (the block's entries less those off the diagonal), above, the sum of
// |i - j| and its max (over each warp, then the block), the slices' widths, the longest row.
// Its barrier also orders every shared bin update before the bins are read.
template <class I>
__device__ __forceinline__ unsigned long long block_head_word(const Structure<I>& s, BlockTotals& totals) {
    const unsigned long long distance = sg::subwarp_sum<32>(s.distance);
    const unsigned long long band = warp_max((long long)s.band);  // (|i - j| < 2^63)
    const int warp = threadIdx.x / 32;
    if (threadIdx.x % 32 == 0) totals.scratch[0][warp] = distance, totals.scratch[1][warp] = band;
    __syncthreads();
    if (threadIdx.x >= OUT_BINS || threadIdx.x == OUT_OVERFLOW_ROWS) return 0;
    unsigned long long below = 0, above = 0, distance_total = 0, band_total = 0, widths = 0, longest = 0;
    for (int w = 0; w < STATS_BLOCK / 32; ++w) {
        below += totals.structure[w][0], above += totals.structure[w][1], distance_total += totals.scratch[0][w];
        band_total = totals.scratch[1][w] > band_total ? totals.scratch[1][w] : band_total;
        widths += totals.widths[w];
        longest = totals.longest[w] > longest ? totals.longest[w] : longest;
    }
    return threadIdx.x == 0 ? below
           : threadIdx.x == 1 ? totals.entries - below - above
           : threadIdx.x == 2 ? above
           : threadIdx.x == 3 ? distance_total
           : threadIdx.x == 4 ? band_total
           : threadIdx.x == OUT_SLICE_WIDTHS ? widths
                                             : longest;
}

// The block's head words (block_head_word's) and shared bins (16-byte aligned) into the buffer:
// one atomic a nonzero word, the bins read four a shared load, only those up to the block's
// longest row (the others are zero: one or two loads a block for a stencil, not 4096 bins').
// After block_head_word (its barrier orders the warps' longest rows before they are read).
__device__ __forceinline__ void merge_into_buffer(const unsigned long long word, const unsigned* bins,
                                                  const BlockTotals& totals, unsigned long long* __restrict__ out) {
    if (word) {
        if (threadIdx.x == 4 || threadIdx.x == OUT_LONGEST) atomicMax(out + threadIdx.x, word);
        else atomicAdd(out + threadIdx.x, word);
    }
    unsigned long long longest = 0;
#pragma unroll
    for (int w = 0; w < STATS_BLOCK / 32; ++w) longest = totals.longest[w] > longest ? totals.longest[w] : longest;
    const int vectors = longest < STATS_BINS ? int(longest) / 4 + 1 : STATS_BINS / 4;
    for (int q = threadIdx.x; q < vectors; q += STATS_BLOCK) {
        const uint4 counts = reinterpret_cast<const uint4*>(bins)[q];
        unsigned long long* to = out + OUT_BINS + 4 * q;
        if (counts.x) atomicAdd(to, (unsigned long long)counts.x);
        if (counts.y) atomicAdd(to + 1, (unsigned long long)counts.y);
        if (counts.z) atomicAdd(to + 2, (unsigned long long)counts.z);
        if (counts.w) atomicAdd(to + 3, (unsigned long long)counts.w);
    }
}

// The block's shared bins (16-byte aligned) zeroed, 16 bytes a store.
__device__ __forceinline__ void clear_bins(unsigned* bins) {
    for (int q = threadIdx.x; q < STATS_BINS / 4; q += STATS_BLOCK)
        reinterpret_cast<uint4*>(bins)[q] = uint4{0, 0, 0, 0};
}

// 16-byte vectors that hold `count` pointers of type I.
template <class I> __host__ __device__ constexpr int vectors_holding(int count) {
    return (count * (int)sizeof(I) + 15) / 16;
}

// indptr[row0 .. row0 + count) into shared memory (count <= MAX), all loads in flight at once:
// whole 16-byte vectors copied straight to shared memory where indptr + row0 is 16-byte aligned,
// the rest one by one. Complete at copy_to_shared_wait.
template <class I, int MAX>
__device__ __forceinline__ void load_pointers(const I* __restrict__ indptr, const long long row0, const int count,
                                              sg::vec16<I>* storage) {
    using Vec = sg::vec16<I>;
    constexpr int VECS = (vectors_holding<I>(MAX) + STATS_BLOCK - 1) / STATS_BLOCK;
    const bool vectors = reinterpret_cast<unsigned long long>(indptr + row0) % 16 == 0;
    const int whole = vectors ? count / Vec::N : 0;
    const Vec* source = reinterpret_cast<const Vec*>(indptr + row0);
#pragma unroll
    for (int v = 0; v < VECS; ++v) {
        const int q = threadIdx.x + v * STATS_BLOCK;
        if (q < whole) copy_to_shared(storage + q, source + q);
    }
    I* window = reinterpret_cast<I*>(storage);
    for (int i = whole * Vec::N + threadIdx.x; i < count; i += STATS_BLOCK) window[i] = sg::ldg(indptr + row0 + i);
}

#endif  // SPARSEGPU_MATRIX_STATS_COMMON_CUH
