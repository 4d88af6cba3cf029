// The format advisor's statistics in ONE pass, csr_stats, that reads indptr once and indices
// once and writes ONE buffer of unsigned 64-bit words whose head is zero at launch (layout
// below; sparsegpu/reference/stats.py holds the same constants and the NumPy twin); then
// stats_summary (at the end of this file), one block that summarises the buffer into a record in
// the caller's pinned host memory and zeroes the head again. Every word is an integer merged
// with integer atomics, so the counts are exact and the same every run; only the order of the
// overflow list varies, and every reader takes that list as a multiset.
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
// Work items. The rows are cut into row tiles of `tile_rows` rows (chosen by the host, a
// multiple of 32 up to STATS_WINDOW, so that a tile holds about 3/4 of STATS_ITEM entries on
// average). A block takes a tile, copies its tile_rows + 1 pointers into shared memory once
// (16-byte cp.async copies, all in flight at once), and from there computes the tile's row statistics (a warp per slice of 32
// rows: the slice's width, the length histogram in block-private shared bins, a slice of equal
// lengths adding once, longer rows appended to the overflow list) AND, for the tile's first
// STATS_ITEM entries, the structure statistics.
//
// The structure statistics go piece by piece: pieces are STATS_PIECE entries (8 KiB of columns)
// on a grid aligned to the piece, cut to the item. The block copies a piece's columns into shared
// memory with coalesced 16-byte loads (issued one piece ahead: the next piece's bytes are in
// flight while the block works on this one), then walks the rows that meet the piece, each cut to
// it, knowing every entry's row without any search:
//  - a row with fewer than STATS_SHORT entries in the piece: one thread, which walks its entries
//    in shared memory starting at a skew, lane * g / 32 for g the largest power of two dividing
//    the length, and wrapping (so rows of equal even lengths spread over the banks: lanes whose
//    rows start on the same bank start at different entries); consecutive threads
//    take consecutive rows, the piece's first row from the piece before (the row that holds the
//    previous piece's last entry), so rows never have to be searched for;
//  - a longer row: announced in a shared list (one shared atomic gives its slot and its first
//    32-entry segment), then after a barrier all the block's warps share the listed rows'
//    segments, lane-strided: 32 consecutive entries a warp step, spread over the 8 warps
//    whatever the rows' lengths.
// Per entry that is one shared load and a few integer operations, and the global loads are all
// whole, coalesced 16-byte vectors (single entries only where indices is not 16-byte aligned,
// and in a last vector that would reach past nnz).
// The counts below and above the diagonal are 32-bit per thread within an item (it has at most
// STATS_ITEM entries), added into 64-bit per-warp totals in shared memory after it; the sum and
// max of |i - j| are 64-bit per thread; entries on the diagonal are the block's item entries
// less those below and above it.
// Work is split by entries, not rows, past STATS_ITEM: a tile with more entries (a very long
// row, or dense rows) announces the rest as chunks of STATS_ITEM entries in a queue, and any
// block takes them, so a row of 10^7 entries is spread over the whole device. A chunk reloads its
// tile's pointers (from L2), finds its first row by a binary search of them, and runs the same
// structure code. Many empty rows cost nothing special: a tile never holds more rows than its
// shared window.
//
// Scheduling, without a grid barrier and without deadlock whatever the scheduling: one ticket
// counter hands out work in order: tickets below the tile count are row tiles, the ticket
// tiles + c is queue slot c. A tile's block announces its chunks (reserving slots with one
// atomic), publishes each as (tile, first entry, epoch flag), and then counts itself done, all
// before its own structure work. A block holding slot c waits (thread 0 polls, sleeping) until
// slot c is published, or until every tile is done and fewer than c + 1 chunks were announced,
// then leaves. It waits only on tiles whose tickets came before its own, so on blocks already
// running that never wait: progress is guaranteed. The counters (COUNTER_*: the ticket, chunks
// announced, tiles done) lie just before `out` and are zeroed with its head, by stats_summary
// (or the host); published slots carry the call's epoch (the host counts calls up), so the queue
// is never zeroed: an older call's slots hold older epochs.
#include "common.cuh"

constexpr int STATS_BLOCK = 256;
// Blocks per SM registers are capped for, without spills (40 registers a thread for int32, 48
// for int64); shared memory (about 33 and 41 KB) allows as many.
template <class I> constexpr int STATS_MIN_BLOCKS = sizeof(I) == 4 ? 6 : 5;
// Entries of a work item (a tile's own part, or a chunk): 64 KiB of columns.
template <class I> constexpr long long STATS_ITEM = 65536 / sizeof(I);
// Entries of a piece: 8 KiB of columns in shared memory, two 16-byte vectors a thread.
template <class I> constexpr int STATS_PIECE = 8192 / sizeof(I);
template <class I> constexpr int STATS_VECTOR = 16 / sizeof(I);  // entries of a 16-byte vector
template <class I> constexpr int PIECE_VECTORS = STATS_PIECE<I> / STATS_VECTOR<I> / STATS_BLOCK;
// A row with fewer entries in a piece is walked by one thread; longer ones (at most
// STATS_PIECE / STATS_SHORT a piece) are shared by the block in segments of 32 entries.
constexpr int STATS_SHORT = 32;
template <class I> constexpr int LONG_ROWS = STATS_PIECE<I> / STATS_SHORT;
// Rows a tile holds at most (a multiple of 32): its pointers fill 8 KiB (int32) or 16 KiB (int64)
// of shared memory, which with the bins and the piece stays within 48 KiB of static shared memory.
constexpr int STATS_WINDOW = 2016;
// 4096 bins: 16 KiB of 32-bit shared counts per block, and an overflow list of at most
// nnz / 4096 rows, so the head the host copies back stays small (32 KiB). 32-bit block counts
// suffice: a block counts at most the rows of the tiles it takes, far below 2^32 for any
// indptr that fits in device memory when the grid fills the device.
constexpr int STATS_BINS = 4096;
constexpr int OUT_SLICE_WIDTHS = 5, OUT_OVERFLOW_ROWS = 6, OUT_LONGEST = 7, OUT_BINS = 8;
constexpr int OUT_OVERFLOW = OUT_BINS + STATS_BINS;
// Each work counter on a 128-byte line of its own, apart from the head every block merges into:
// every block's atomics on them would otherwise queue at one L2 slice.
constexpr int COUNTER_TICKET = 0, COUNTER_ANNOUNCED = 16, COUNTER_TILES_DONE = 32;
constexpr int STATS_COUNTERS = 48;
// The record stats_summary writes straight into the caller's pinned host memory (int64 words;
// sparsegpu/advisor.py RECORD_*): the call's epoch (written last, once the other words are
// visible: the host polls for it, publish_record), the status, the head's first OUT_BINS words,
// then the summary of the row lengths, SUMMARY_WORDS words in this order:
// shortest row, empty rows, sum of squared lengths, the p50, p90 and p99 lengths, HYB's width,
// the entries in HYB's ELL part at that width, rows longer than `limit`, and the entries in the
// `hot_rows` longest rows.
constexpr int RECORD_EPOCH = 0, RECORD_STATUS = 1, RECORD_HEAD = 2, RECORD_SUMMARY = 10, SUMMARY_WORDS = 10;
constexpr int RECORD_WORDS = RECORD_SUMMARY + SUMMARY_WORDS;
// STATUS_SUMMARISED: the record is whole, and the buffer's counters and head are zero again for
// the next call (zeroed before the record is published).
// STATUS_HEAD_KEPT: the head and overflow list are left for the host to summarise (more than
// SUMMARY_OVERFLOW_ROWS rows past the bins, or at least hot_rows of them, or costs past
// float64's exact integers, or an inconsistent indptr), and to zero.
constexpr int STATUS_SUMMARISED = 1, STATUS_HEAD_KEPT = 2;
constexpr int SUMMARY_OVERFLOW_ROWS = 1024;
constexpr int QUEUE_WORDS = 4;  // a queue slot: tile, first entry, epoch flag, (padding)
constexpr unsigned STATS_POLL_NS = 200;

template <bool B> struct Constant {
    __device__ constexpr operator bool() const { return B; }
};
template <class I> struct unsigned_of;
template <> struct unsigned_of<int> { using type = unsigned; };
template <> struct unsigned_of<long long> { using type = unsigned long long; };

// The last index r in [low, high) with window[r] <= j, given window[low] <= j (else low).
template <class I>
__device__ __forceinline__ int window_search(const I* window, int low, int high, I j) {
    while (high - low > 1) {
        const int mid = (low + high) / 2;
        if (window[mid] <= j) low = mid; else high = mid;
    }
    return low;
}

// One 16-byte vector of columns, loaded (streaming: read once) or stored as a whole.
__device__ __forceinline__ void load_vector(const int* p, int (&e)[4]) {
    const int4 v = __ldcs(reinterpret_cast<const int4*>(p));
    e[0] = v.x, e[1] = v.y, e[2] = v.z, e[3] = v.w;
}
__device__ __forceinline__ void load_vector(const long long* p, long long (&e)[2]) {
    const longlong2 v = __ldcs(reinterpret_cast<const longlong2*>(p));
    e[0] = v.x, e[1] = v.y;
}
__device__ __forceinline__ void store_vector(int* p, const int (&e)[4]) {
    *reinterpret_cast<int4*>(p) = int4{e[0], e[1], e[2], e[3]};
}
__device__ __forceinline__ void store_vector(long long* p, const long long (&e)[2]) {
    *reinterpret_cast<longlong2*>(p) = longlong2{e[0], e[1]};
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

// A device-scope acquire-release fetch-and-add of 1: a ticket that releases what its thread (and,
// through a barrier before it, its block) wrote and acquires what the earlier tickets released.
// One fence and the atomic: a fence, a relaxed atomic and a second fence cost a fence's wait more
// (0.3 us on an H200).
__device__ __forceinline__ unsigned long long ticket_acq_rel(unsigned long long* counter) {
    unsigned long long ticket;
    asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], 1;" : "=l"(ticket) : "l"(counter) : "memory");
    return ticket;
}

__device__ __forceinline__ unsigned long long load_volatile(const unsigned long long* p) {
    return *reinterpret_cast<const volatile unsigned long long*>(p);
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

// The vectors of the piece of columns starting at `base` (a multiple of STATS_PIECE) that meet
// its entries [from, to) (offsets from base): thread t's v-th is the vector at offset
// STATS_VECTOR * (t + v * STATS_BLOCK). Whole 16-byte loads when indices is 16-byte aligned
// and the vector lies within the nnz entries; else one entry at a time, those in [from, to).
template <class I>
__device__ __forceinline__ bool piece_vector_needed(const int offset, const int from, const int to) {
    return offset + STATS_VECTOR<I> > from && offset < to;
}
template <class I>
__device__ __forceinline__ void load_piece(const I* __restrict__ indices, const I base, const int from, const int to,
                                           const I nnz, const bool aligned,
                                           I (&held)[PIECE_VECTORS<I>][STATS_VECTOR<I>]) {
    constexpr int N = STATS_VECTOR<I>;
    const I room = nnz - base;  // entries of indices from base on
#pragma unroll
    for (int v = 0; v < PIECE_VECTORS<I>; ++v) {
        const int offset = (threadIdx.x + v * STATS_BLOCK) * N;
        if (!piece_vector_needed<I>(offset, from, to)) continue;
        if (aligned && I(offset + N) <= room) {
            load_vector(indices + base + offset, held[v]);
        } else {
#pragma unroll
            for (int k = 0; k < N; ++k)
                held[v][k] = offset + k >= from && offset + k < to ? __ldcs(indices + base + offset + k) : I(0);
        }
    }
}
template <class I>
__device__ __forceinline__ void store_piece(I* stage, const int from, const int to,
                                            const I (&held)[PIECE_VECTORS<I>][STATS_VECTOR<I>]) {
#pragma unroll
    for (int v = 0; v < PIECE_VECTORS<I>; ++v) {
        const int offset = (threadIdx.x + v * STATS_BLOCK) * STATS_VECTOR<I>;
        if (piece_vector_needed<I>(offset, from, to)) store_vector(stage + offset, held[v]);
    }
}

// The rows of the tile (pointers window[0..rows], rows starting at row0) that meet the piece's
// entries [plo, phi) (its columns in stage, from entry `base` on), from first_row on (no row
// before it meets the piece): thread t takes rows first_row + t, + t + STATS_BLOCK, ... up to
// the first row that starts at phi or later, each cut to the piece. Short rows are counted here;
// longer ones are listed for piece_long_rows: long_counter counts (listed rows << 32) + their
// 32-entry segments, so one atomic gives a row its slot and its first segment, slots in segment
// order. The row that holds the piece's last entry is written to next_first_row.
template <class I>
__device__ __forceinline__ void piece_short_rows(const I* window, const int rows, const I row0, const I base,
                                                 const I plo, const I phi, const int first_row, const I* stage,
                                                 int* next_first_row, unsigned long long* long_counter,
                                                 int2* long_rows, Structure<I>& s) {
    const int lane = threadIdx.x % 32;
    for (int r = first_row + threadIdx.x; r < rows; r += STATS_BLOCK) {
        const I start = window[r];
        if (start >= phi) break;
        const I end = window[r + 1];
        const I b = start > plo ? start : plo, e = end < phi ? end : phi;
        if (e <= b) continue;  // an empty row, or one that ends before the piece
        if (e == phi) *next_first_row = r;
        const int length = int(e - b), first = int(b - base);
        if (length >= STATS_SHORT) {
            const unsigned long long slot =
                atomicAdd(long_counter, (1ULL << 32) | (unsigned long long)((length + 31) / 32));
            // (Rows of a valid indptr are disjoint, so at most LONG_ROWS<I> fit a piece; overlapping
            // rows of a corrupt one are dropped past that.)
            if ((slot >> 32) < (unsigned long long)LONG_ROWS<I>) long_rows[slot >> 32] = int2{int(unsigned(slot)), r};
            continue;
        }
        // Column minus row fits I: the host checked 0 <= column < n_cols, and rows fit I too.
        const I row = row0 + I(r);
        // Start at a skew below the largest power of two dividing the length (rows of equal even
        // lengths: the lanes' first entries step through the banks), wrapping at the row's end.
        const int stop = first + length;
        int k = first + ((lane * (length & -length)) >> 5);
        for (int n = 0; n < length; ++n) {
            s.count(stage[k] - row);
            k = k + 1 == stop ? first : k + 1;
        }
    }
}

// The listed long rows' segments (`listed` as long_counter read after the listing): warp w takes
// segments w, w + 8, ..., lane l the segment's entry l; a warp walks the list forward as its
// segments advance.
template <class I>
__device__ __forceinline__ void piece_long_rows(const I* window, const I row0, const I base, const I plo, const I phi,
                                                const unsigned long long listed, const int2* long_rows,
                                                const I* stage, Structure<I>& s) {
    const int count = listed >> 32 < LONG_ROWS<I> ? int(listed >> 32) : LONG_ROWS<I>;
    const int segments = int(unsigned(listed));
    int k = 0;
    for (int segment = threadIdx.x / 32; segment < segments; segment += STATS_BLOCK / 32) {
        while (k + 1 < count && long_rows[k + 1].x <= segment) ++k;
        const int2 listed_row = long_rows[k];
        const I start = window[listed_row.y], end = window[listed_row.y + 1];
        const I b = start > plo ? start : plo, e = end < phi ? end : phi;
        const I j = b + I((segment - listed_row.x) * 32 + threadIdx.x % 32);
        if (j < e) s.count(stage[int(j - base)] - (row0 + I(listed_row.y)));
    }
}

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

template <class I>
__global__ void __launch_bounds__(STATS_BLOCK, STATS_MIN_BLOCKS<I>)
csr_stats(const I* __restrict__ indptr, const I* __restrict__ indices, const long long n_rows, const long long nnz,
          const int tile_rows, const long long overflow_capacity, const long long queue_capacity,
          const unsigned long long epoch, unsigned long long* __restrict__ counters,
          unsigned long long* __restrict__ out, unsigned long long* __restrict__ queue) {
    constexpr long long ITEM = STATS_ITEM<I>;
    __shared__ sg::vec16<I> window_storage[vectors_holding<I>(STATS_WINDOW + 1)];
    __shared__ __align__(16) unsigned bins[STATS_BINS];
    // A piece's columns.
    __shared__ __align__(16) I stage[STATS_PIECE<I>];
    // The piece's long rows: (first segment, row in the tile), in segment order.
    __shared__ int2 long_rows[LONG_ROWS<I>];
    __shared__ unsigned long long long_counter;
    __shared__ int next_first_row;
    __shared__ BlockTotals totals;
    __shared__ long long ticket_shared, tile_shared, lo_shared, slot_shared;
    I* window = reinterpret_cast<I*>(window_storage);

    clear_bins(bins);
    totals.clear();
    const long long tiles = (n_rows + tile_rows - 1) / tile_rows;
    const bool aligned = reinterpret_cast<unsigned long long>(indices) % 16 == 0;
    const auto clamp_entry = [nnz](long long p) { return p < 0 ? 0 : p < nnz ? p : nnz; };
    if (threadIdx.x == 0) ticket_shared = (long long)atomicAdd(counters + COUNTER_TICKET, 1ULL);
    Structure<I> s;
    for (;;) {
        __syncthreads();  // the ticket is known; the previous item's readers are done with the window
        const long long ticket = ticket_shared;
        const bool own_tile = ticket < tiles;
        long long tile = ticket, lo = 0;
        if (!own_tile) {
            // Queue slot `ticket - tiles`: wait until it is published or can no longer be.
            const long long slot = ticket - tiles;
            if (threadIdx.x == 0) {
                tile = -1;
                if (slot < queue_capacity) {
                    const unsigned long long* entry = queue + QUEUE_WORDS * slot;
                    for (;;) {
                        if (load_volatile(entry + 2) == epoch) {
                            __threadfence();
                            tile = (long long)load_volatile(entry);
                            lo = (long long)load_volatile(entry + 1);
                            break;
                        }
                        if (load_volatile(counters + COUNTER_TILES_DONE) == (unsigned long long)tiles) {
                            __threadfence();
                            if (load_volatile(counters + COUNTER_ANNOUNCED) <= (unsigned long long)slot) break;
                            continue;  // announced by a finished tile: already published
                        }
                        __nanosleep(STATS_POLL_NS);
                    }
                }
                tile_shared = tile, lo_shared = lo;
            }
            __syncthreads();
            tile = tile_shared, lo = lo_shared;
            if (tile < 0) break;
        }
        const long long row0 = tile * tile_rows;
        const int rows = n_rows - row0 < tile_rows ? (int)(n_rows - row0) : tile_rows;
        load_pointers<I, STATS_WINDOW + 1>(indptr, row0, rows + 1, window_storage);
        copy_to_shared_wait();
        __syncthreads();
        const long long first = clamp_entry(window[0]), last = clamp_entry(window[rows]);
        long long hi;
        if (own_tile) {
            lo = first;
            hi = last - first > ITEM ? first + ITEM : last;
            // Entries past the first ITEM go to the queue as chunks of ITEM, published before
            // this tile counts itself done (uniform branch: every thread sees the same window).
            if (last - first > ITEM) {
                const long long chunks = (last - first - 1) / ITEM;
                if (threadIdx.x == 0)
                    slot_shared = (long long)atomicAdd(counters + COUNTER_ANNOUNCED, (unsigned long long)chunks);
                __syncthreads();
                for (long long c = threadIdx.x; c < chunks; c += STATS_BLOCK) {
                    const long long slot = slot_shared + c;
                    if (slot >= queue_capacity) break;
                    unsigned long long* entry = queue + QUEUE_WORDS * slot;
                    entry[0] = (unsigned long long)tile;
                    entry[1] = (unsigned long long)(first + (c + 1) * ITEM);
                    __threadfence();  // the chunk before its flag
                    *reinterpret_cast<volatile unsigned long long*>(entry + 2) = epoch;
                }
                __threadfence();  // every flag before the tile counts itself done
                __syncthreads();
            }
            if (threadIdx.x == 0) atomicAdd(counters + COUNTER_TILES_DONE, 1ULL);
        } else {
            hi = lo + ITEM < last ? lo + ITEM : last;
        }
        // The next ticket is taken now and stored after the row statistics, so its round trip
        // overlaps them.
        unsigned long long next_ticket = 0;
        if (threadIdx.x == 0) next_ticket = atomicAdd(counters + COUNTER_TICKET, 1ULL);
        // The item's pieces, the first one's loads issued before the row statistics, so its
        // bytes are in flight meanwhile. (hi < lo only for a corrupt indptr, whose statistics
        // mean nothing: no entries then.)
        const I item_lo = I(lo), item_hi = I(hi < lo ? lo : hi);
        if (threadIdx.x == 0) totals.entries += (unsigned long long)(item_hi - item_lo);
        I base = item_lo / STATS_PIECE<I> * STATS_PIECE<I>;
        I held[PIECE_VECTORS<I>][STATS_VECTOR<I>];
        const auto piece_end = [item_hi](const I from) {  // of the piece starting at from (fits I)
            return item_hi - from <= STATS_PIECE<I> ? item_hi : from + STATS_PIECE<I>;
        };
        if (item_hi > item_lo)
            load_piece(indices, base, int(item_lo - base), int(piece_end(base) - base), I(nnz), aligned, held);
        if (own_tile) tile_rows_stats(window, rows, overflow_capacity, bins, out, totals.widths, totals.longest);
        if (threadIdx.x == 0) ticket_shared = (long long)next_ticket;  // (read after the next item's barrier)
        // A tile's own item starts at its first row; a chunk at the row holding its first entry.
        int first_row = own_tile ? 0 : window_search(window, 0, rows, item_lo);
        for (I plo = item_lo; plo < item_hi;) {
            const I phi = piece_end(base);
            store_piece(stage, int(plo - base), int(phi - base), held);
            if (threadIdx.x == 0) long_counter = 0, next_first_row = first_row;
            __syncthreads();  // the piece, the list's counter
            if (phi < item_hi) load_piece(indices, phi, 0, int(piece_end(phi) - phi), I(nnz), aligned, held);
            piece_short_rows(window, rows, I(row0), base, plo, phi, first_row, stage, &next_first_row, &long_counter,
                             long_rows, s);
            __syncthreads();  // the long rows listed
            piece_long_rows(window, I(row0), base, plo, phi, long_counter, long_rows, stage, s);
            if (phi == item_hi) break;  // (the next item's first barrier frees the stage and the list)
            first_row = next_first_row;
            base = plo = phi;
            __syncthreads();  // every thread is done with the stage and the list
        }
        s.end_item(totals.structure[threadIdx.x / 32]);
    }
    merge_into_buffer(block_head_word(s, totals), bins, totals, out);
}

// ---------------------------------------------------------------- the summary
// stats_summary: one block, launched after csr_stats, that summarises the row lengths from the
// merged bins and the overflow list into the record in pinned host memory (so the host copies
// nothing back and sums nothing), then zeroes the buffer's counters and the head's used words
// for the next call (so the host sets nothing before it). A kernel of its own, not csr_stats's
// last block: that call cost csr_stats's capped loops registers (3-8% on 11-20M entries) and
// gained nothing at 1024 rows (asv_benchmarks/measured/h200_2026-11-21_s7_summary_*), and the
// summary can be run on any buffer. The twin of the host's summary (sparsegpu/advisor.py _summary_words), bit for
// bit. Every word is an integer but HYB's width, the first minimum over the distinct lengths w of
//     cost(w) = R * w * (v + i) + (after - w * over) * (v + 2 i) + over * 2 v
// (R rows; `over` rows longer than w hold `after` entries; v, i the value and index bytes),
// computed with the host's float64 operations in its order (no contraction into FMAs), at costs
// below 2^53 where every float64 operation is exact.

// A candidate width: its cost, then its length, the smaller pair wins (the host's first minimum);
// the rows up to it and their entries.
struct Width {
    double cost;
    long long length, rows_to, entries_to;
};
__device__ __forceinline__ bool cheaper(const Width& a, const Width& b) {
    return a.cost < b.cost || (a.cost == b.cost && a.length < b.length);
}
__device__ __forceinline__ double hyb_cost(long long width, long long rows_to, long long entries_to, long long rows,
                                           long long entries, int v, int i) {
    const double w = double(width), over = double(rows - rows_to);
    const double slots = __dmul_rn(__dmul_rn(double(rows), w), double(v + i));
    const double spilled = __dmul_rn(__dsub_rn(double(entries - entries_to), __dmul_rn(w, over)), double(v + 2 * i));
    return __dadd_rn(__dadd_rn(slots, spilled), __dmul_rn(over, double(2 * v)));
}
__device__ __forceinline__ Width shfl_down_width(const Width& w, int offset) {
    return Width{sg::shfl_down(w.cost, offset), sg::shfl_down(w.length, offset), sg::shfl_down(w.rows_to, offset),
                 sg::shfl_down(w.entries_to, offset)};
}

// Exclusive prefix sums over the block of two values a thread (every thread calls it); `scratch`
// holds 2 * STATS_BLOCK / 32 values. Also returns the totals.
__device__ __forceinline__ void block_exclusive_scan(long long& a, long long& b, long long& total_a,
                                                     long long& total_b, long long* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    long long inclusive_a = a, inclusive_b = b;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
        const long long up_a = sg::shfl_up(inclusive_a, offset), up_b = sg::shfl_up(inclusive_b, offset);
        if (lane >= offset) inclusive_a += up_a, inclusive_b += up_b;
    }
    if (lane == 31) scratch[warp] = inclusive_a, scratch[STATS_BLOCK / 32 + warp] = inclusive_b;
    __syncthreads();
    long long before_a = inclusive_a - a, before_b = inclusive_b - b;
    total_a = total_b = 0;
    for (int w = 0; w < STATS_BLOCK / 32; ++w) {
        if (w < warp) before_a += scratch[w], before_b += scratch[STATS_BLOCK / 32 + w];
        total_a += scratch[w], total_b += scratch[STATS_BLOCK / 32 + w];
    }
    a = before_a, b = before_b;
}

constexpr int SUMMARY_BINS = STATS_BINS / STATS_BLOCK;  // bins a thread loads, and takes at most

// The summary's shared memory.
struct SummaryShared {
    long long counts[STATS_BINS];  // the bins
    long long over[SUMMARY_OVERFLOW_ROWS];  // the rows past the bins
    long long scratch[2 * STATS_BLOCK / 32];
    long long found[5];  // the shortest length, p50, p90, p99; entries in the hot rows
    Width warp_best[STATS_BLOCK / 32];
    long long words[RECORD_WORDS];  // the record, written out together
};

// What a summary needs besides the buffer: the matrix's rows and entries, the overflow list's
// room, the call's epoch, the record (RECORD_WORDS words of pinned host memory), CSR's long-row
// limit, the rows SELL may stage, the value bytes, and the row counts at which the quantiles'
// lengths are reached (the host's arguments, sparsegpu/advisor.py _summary_arguments).
struct SummaryArguments {
    long long n_rows, nnz, overflow_capacity;
    unsigned long long epoch;
    long long* record;
    long long limit, hot_rows;
    int value_bytes;
    long long target50, target90, target99;
};

// The summary's walk over the bins in length order, from the rows and entries before the first
// bin it takes: each length's squares, its HYB cost (the cheapest kept), the quantiles and the
// hot rows' shortest length it holds (into `found`: the shortest length, p50, p90, p99, the entries
// in the hot rows), and the rows past the long-row limit: the host's words, which the warp summary
// makes its own way.
struct BinWalk {
    long long targets[4];  // the row counts at which the shortest length and the quantiles are reached
    long long rows, entries;  // all the matrix's (the bins' and the rows past them)
    long long bin_rows, bin_entries, listed_entries;  // in the bins; in the rows past them
    long long hot_left;  // hot rows in the bins (those past them are all hot)
    long long limit_bin;
    int value_bytes, index_bytes;
    long long rows_to, entries_to;  // up to the last bin taken
    Width best{0x1.fffffffffffffp+1023, 0, 0, 0};  // none yet: every cost (below 2^53) is less
    unsigned long long squares = 0, long_rows = 0;

    template <class Found>
    __device__ __forceinline__ void take(const int k, const long long count, Found& found) {
        const long long previous = rows_to, hot_target = bin_rows - hot_left;  // the hot rows are those past it
        rows_to += count, entries_to += count * k;
        if (count) {
            squares += (unsigned long long)count * k * k;
            const Width here{hyb_cost(k, rows_to, entries_to, rows, entries, value_bytes, index_bytes), k, rows_to,
                             entries_to};
            if (cheaper(here, best)) best = here;
#pragma unroll
            for (int q = 0; q < 4; ++q)
                if (previous < targets[q] && targets[q] <= rows_to) found[q] = k;
        }
        if (k == limit_bin) long_rows += bin_rows - rows_to;
        if ((k == 0 || previous <= hot_target) && rows_to > hot_target)  // the hot rows' shortest length
            found[4] = listed_entries + (bin_entries - entries_to) + (hot_left - (bin_rows - rows_to)) * k;
    }
};

// The warp summary: when every row is in the first WARP_SUMMARY_BINS bins (none past them: most
// meshes, stencils and uniform random matrices), one warp makes the same record as the block's
// summary with shuffles instead of the block's barriers, and its loads go out with the head words
// that decide it, in one round trip. It runs alone at the end of the call, so its length is the
// dependent chain of one warp: the bins go in rounds of 32 consecutive ones, lane l taking bin
// 32 t + l in round t, so that a round is one scan and every length's words at once (rows of up
// to 31 entries, most meshes and stencils: one round).
constexpr int WARP_BINS = 4;
constexpr int WARP_SUMMARY_BINS = 32 * WARP_BINS;
constexpr long long NO_COST = 0x7fffffffffffffffLL;  // a width no row has

// The record published to the host by one whole warp: lane w (RECORD_EPOCH < w < RECORD_WORDS)
// writes `word` as the record's word w where `write`, and then lane RECORD_EPOCH writes the
// call's epoch with a system-scope release after the warp's barrier, so every word (and every
// write the block made before that barrier) is visible before the epoch is. The host polls the
// epoch and reads the record as soon as it shows, without waiting for the kernel to end
// (sparsegpu/advisor.py _Workspace.await_record); the kernel writes nothing after it.
__device__ __forceinline__ void publish_record(long long* record, const bool write, const long long word,
                                               const unsigned long long epoch) {
    const int lane = threadIdx.x % 32;
    if (write && lane > RECORD_EPOCH && lane < RECORD_WORDS) record[lane] = word;
    __syncwarp();
    if (lane == RECORD_EPOCH) {
        asm volatile("fence.acq_rel.sys;" ::: "memory");
        *reinterpret_cast<volatile long long*>(record + RECORD_EPOCH) = (long long)epoch;
    }
}

// A 64-bit L2 load kept where it is written (not moved into the branch that uses it), so that
// loads written together are in flight together.
__device__ __forceinline__ long long load_now(const unsigned long long* p) {
    long long v;
    asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// The smallest of the warp's 32 values, each in [0, 2^63) (every lane gets it): two
// instructions, the high halves' minimum and then the low halves' among the lanes that hold it.
__device__ __forceinline__ long long warp_min(const long long v) {
#if __CUDA_ARCH__ >= 800
    const unsigned high = __reduce_min_sync(sg::FULL_MASK, unsigned(v >> 32));
    const unsigned low = __reduce_min_sync(sg::FULL_MASK, unsigned(v >> 32) == high ? unsigned(v) : 0xffffffffu);
    return (long long)high << 32 | low;
#else
    long long m = v;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
        const long long other = __shfl_xor_sync(sg::FULL_MASK, m, offset);
        m = other < m ? other : m;
    }
    return m;
#endif
}

// Whether the summaries' HYB costs and sum of squares are exact (the host's limits, with a margin
// of 2: the products are rounded here) for `rows` rows and `nnz` entries, the longest `longest`.
__device__ __forceinline__ bool costs_exact(const long long rows, const long long nnz, const double longest,
                                            const int value_bytes, const int index_bytes) {
    return double(rows) * (longest * (2 * value_bytes + 3 * index_bytes) + 2 * value_bytes) < 0x1p52 &&
           double(nnz) * longest < 0x1p62;
}

// Whether the warp summary takes a matrix whose rows are all in `bins` bins, from its shape alone:
// not where the block's summary would leave the head to the host (costs past float64's exact
// integers), nor for 2^32 rows or entries or more (the warp scans them packed in one word).
template <class I>
__device__ __forceinline__ bool warp_summary_applies(const int bins, const SummaryArguments& arguments) {
    return arguments.hot_rows > 0 && arguments.n_rows < (1LL << 32) && arguments.nnz < (1LL << 32) &&
           costs_exact(arguments.n_rows, arguments.nnz, double(bins - 1), arguments.value_bytes, sizeof(I));
}

// The warp summary of the bins 0 .. bins - 1 (bins <= WARP_SUMMARY_BINS; counts[t] holds the
// lane's bin 32 t + l, zero from `bins` on) and, lanes below OUT_BINS, the head's word `lane` (no
// rows past the bins: its OUT_OVERFLOW_ROWS word is zero), where warp_summary_applies. Returns
// true with the lane's word of the record (publish_record's), or false where the bins are not the
// matrix's rows and entries (where the block's summary, too, leaves the head to the host). Every
// lane calls it.
//  The words are the block's summary's (BinWalk's): below 2^52 (the exactness test) the HYB costs
// are integers that float64 holds exactly, so they are compared as integers here, the cheapest
// and, among equal costs, the shortest width winning as there; each quantile's length is the
// one bin where the rows counted up to it cross its target.
template <class I>
__device__ __forceinline__ bool warp_summarise(const long long (&counts)[WARP_BINS], const long long head_word,
                                               const int bins, const SummaryArguments& arguments, long long& word) {
    const auto& [n_rows, nnz, overflow_capacity, epoch, record, limit, hot_rows, value_bytes, target50, target90,
                 target99] = arguments;
    constexpr int index_bytes = sizeof(I);
    const int lane = threadIdx.x % 32;
    const long long targets[4] = {1, target50, target90, target99};  // the shortest length's, the quantiles'
    const long long hot_target = n_rows - hot_rows;  // the hot rows are those counted past it
    const long long limit_bin = limit < bins - 1 ? limit : bins - 1;
    const long long slot_bytes = value_bytes + index_bytes, spill_bytes = value_bytes + 2 * index_bytes;
    long long found[5] = {-1, -1, -1, -1, -1};  // the shortest length, p50, p90, p99; entries in the hot rows
    long long best_cost = NO_COST, best_width = 0, best_in_ell = 0, long_rows = 0;
    unsigned long long before = 0, squares = 0;  // rows << 32 | entries in the earlier rounds; the lane's squares
#pragma unroll
    for (int t = 0; t < WARP_BINS; ++t) {
        if (32 * t >= bins) break;
        const long long k = 32 * t + lane, count = counts[t];
        unsigned long long up_to = ((unsigned long long)count << 32) + (unsigned long long)(count * k);
#pragma unroll
        for (int offset = 1; offset < 32; offset *= 2) {
            const unsigned long long up = sg::shfl_up(up_to, offset);
            if (lane >= offset) up_to += up;
        }
        up_to += before;
        before = sg::shfl(up_to, 31);
        const long long rows_to = (long long)(up_to >> 32), entries_to = (long long)(up_to & 0xffffffffULL);
        const long long previous = rows_to - count, over = n_rows - rows_to;
        squares += (unsigned long long)(count * k * k);
        // HYB at width k: hyb_cost's terms, as integers.
        const long long cost = count ? n_rows * k * slot_bytes + (nnz - entries_to - k * over) * spill_bytes +
                                           over * (2 * value_bytes)
                                     : NO_COST;
        const long long round_best = warp_min(cost);
        if (round_best < best_cost) {  // (an earlier round's equal cost is a shorter width)
            const int owner = __ffs(__ballot_sync(sg::FULL_MASK, cost == round_best)) - 1;
            best_cost = round_best, best_width = 32 * t + owner;
            best_in_ell = sg::shfl(entries_to + k * over, owner);
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const unsigned crossing = __ballot_sync(sg::FULL_MASK, previous < targets[q] && targets[q] <= rows_to);
            if (found[q] < 0 && crossing) found[q] = 32 * t + __ffs(crossing) - 1;
        }
        const unsigned hot = __ballot_sync(sg::FULL_MASK, (k == 0 || previous <= hot_target) && rows_to > hot_target);
        const long long hot_entries = nnz - entries_to + (hot_rows - over) * k;
        if (found[4] < 0 && hot) found[4] = sg::shfl(hot_entries, __ffs(hot) - 1);
        if (limit_bin >= 32 * t && limit_bin < 32 * t + 32) long_rows = n_rows - sg::shfl(rows_to, int(limit_bin) % 32);
    }
    if ((long long)(before >> 32) != n_rows || (long long)(before & 0xffffffffULL) != nnz) return false;
    // A lane's squares are below 2^48 (rows < 2^32, lengths < 2^7, 4 rounds): summed in two 24-bit halves.
    const unsigned long long squares_total =
        ((unsigned long long)warp_total(unsigned(squares >> 24)) << 24) + warp_total(unsigned(squares & 0xffffff));
    // Lane w writes the record's word w, all in one go.
    const long long empty = sg::shfl(counts[0], 0), head_here = sg::shfl(head_word, (lane - RECORD_HEAD) & 31);
    const long long summary[SUMMARY_WORDS] = {
        found[0], empty, (long long)squares_total, found[1], found[2], found[3],
        best_width, best_in_ell, long_rows, found[4]};
    word = lane == RECORD_STATUS ? STATUS_SUMMARISED : head_here;
#pragma unroll
    for (int w = 0; w < SUMMARY_WORDS; ++w)
        if (lane == RECORD_SUMMARY + w) word = summary[w];
    return true;
}

// The summary, by one block, of `counters` and `out` as csr_stats (or csr_stats_direct) left them.
template <class I>
__device__ __forceinline__ void summarise(SummaryShared& shared, unsigned long long* __restrict__ counters,
                                          unsigned long long* __restrict__ out, const SummaryArguments& arguments) {
    auto& [counts, over, scratch, found, warp_best, words] = shared;
    const auto& [n_rows, nnz, overflow_capacity, epoch, record, limit, hot_rows, value_bytes, target50, target90,
                 target99] = arguments;
    constexpr int index_bytes = sizeof(I);
    // Warp 0's loads for the warp summary go out with the words that decide for it.
    const int lane = threadIdx.x % 32;
    long long warp_counts[WARP_BINS], head_word = 0;
    if (threadIdx.x < 32) {
#pragma unroll
        for (int t = 0; t < WARP_BINS; ++t) warp_counts[t] = load_now(out + OUT_BINS + 32 * t + lane);
        if (lane < OUT_BINS) head_word = load_now(out + lane);
    }
    const long long overflow_rows = load_now(out + OUT_OVERFLOW_ROWS);
    const unsigned long long longest = (unsigned long long)load_now(out + OUT_LONGEST);
    if (overflow_rows == 0 && longest < WARP_SUMMARY_BINS) {
        if (threadIdx.x >= 32) return;
        const int bins = int(longest) + 1;
#pragma unroll
        for (int t = 0; t < WARP_BINS; ++t)
            if (32 * t + lane >= bins) warp_counts[t] = 0;
        if (!warp_summary_applies<I>(bins, arguments)) {
            publish_record(record, lane == RECORD_STATUS, STATUS_HEAD_KEPT, epoch);
            return;
        }
        // Ready for the next call (as below) while the summary is made: the warp holds every word
        // it reads, and the stores have landed by the time the record's fence waits for them.
        for (int w = lane; w < STATS_COUNTERS; w += 32) counters[w] = 0;
        for (int w = lane; w < OUT_BINS + bins; w += 32) out[w] = 0;
        long long word;
        if (warp_summarise<I>(warp_counts, head_word, bins, arguments, word)) {
            publish_record(record, true, word, epoch);
        } else {
            // Bins that are not the matrix's rows (its arrays changed after their checks): the
            // head back as it was, left to the host.
            __syncwarp();  // (other lanes zeroed these words)
            if (lane < OUT_BINS) out[lane] = head_word;
#pragma unroll
            for (int t = 0; t < WARP_BINS; ++t)
                if (32 * t + lane < bins) out[OUT_BINS + 32 * t + lane] = warp_counts[t];
            publish_record(record, lane == RECORD_STATUS, STATUS_HEAD_KEPT, epoch);
        }
        return;
    }
    const int bins = longest < STATS_BINS ? int(longest) + 1 : STATS_BINS;
    const bool listed = overflow_rows <= SUMMARY_OVERFLOW_ROWS && overflow_rows <= overflow_capacity;
    // A thread takes consecutive bins, as few as spread the used ones over the block: its walk
    // over them is the summary's longest chain (16 bins a thread cost mbeacxc, rows of up to 484
    // entries, 4 us of its 15-us kernel on an H200).
    const int bins_each = (bins + STATS_BLOCK - 1) / STATS_BLOCK, first_bin = threadIdx.x * bins_each;

    // The bins and the overflow list into shared memory, every load in flight at once.
    long long over_entries = 0;
#pragma unroll
    for (int v = 0; v < SUMMARY_BINS; ++v) {
        const int k = threadIdx.x + v * STATS_BLOCK;
        counts[k] = k < bins ? (long long)__ldcg(out + OUT_BINS + k) : 0;
    }
    if (listed) {
#pragma unroll
        for (int v = 0; v < SUMMARY_OVERFLOW_ROWS / STATS_BLOCK; ++v) {
            const int r = threadIdx.x + v * STATS_BLOCK;
            if (r < overflow_rows) {
                over[r] = (long long)__ldcg(out + OUT_OVERFLOW + r);
                over_entries += over[r];
            }
        }
    }
    if (threadIdx.x < OUT_BINS) words[RECORD_HEAD + threadIdx.x] = (long long)__ldcg(out + threadIdx.x);
    over_entries = sg::subwarp_sum<32>(over_entries);
    __syncthreads();
    long long rows_before = 0, entries_before = 0;
    for (int k = first_bin; k < first_bin + bins_each && k < bins; ++k)
        rows_before += counts[k], entries_before += counts[k] * k;
    long long bin_rows, bin_entries;
    block_exclusive_scan(rows_before, entries_before, bin_rows, bin_entries, scratch);
    if (threadIdx.x < 5) found[threadIdx.x] = -1;
    __syncthreads();  // scratch read; the overflow list in shared memory
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = over_entries;
    __syncthreads();
    long long listed_entries = 0;
    for (int w = 0; w < STATS_BLOCK / 32; ++w) listed_entries += scratch[w];
    const long long rows = bin_rows + overflow_rows, entries = bin_entries + listed_entries;
    if (!(listed && overflow_rows < hot_rows && rows == n_rows && entries == nnz &&
          costs_exact(rows, nnz, double(longest), value_bytes, index_bytes))) {
        if (threadIdx.x < 32) publish_record(record, threadIdx.x == RECORD_STATUS, STATUS_HEAD_KEPT, epoch);
        return;
    }

    // The bins, each thread's in order from its prefix.
    BinWalk walk{{1, target50, target90, target99}, rows, entries, bin_rows, bin_entries, listed_entries,
                 hot_rows - overflow_rows, limit < bins - 1 ? limit : bins - 1, value_bytes, index_bytes,
                 rows_before, entries_before};
    for (int k = first_bin; k < first_bin + bins_each && k < bins; ++k) walk.take(k, counts[k], found);
    const long long(&targets)[4] = walk.targets;
    Width& best = walk.best;
    unsigned long long &squares = walk.squares, &long_rows = walk.long_rows;
    // The rows past the bins: each length against the whole list (at most SUMMARY_OVERFLOW_ROWS).
    for (int r = threadIdx.x; r < overflow_rows; r += STATS_BLOCK) {
        const long long length = over[r];
        long long shorter = 0, up_to = 0, entries_up_to = 0, copies_before = 0;
        for (int j = 0; j < overflow_rows; ++j) {
            const long long other = over[j];
            shorter += other < length;
            up_to += other <= length;
            entries_up_to += other <= length ? other : 0;
            copies_before += j < r && other == length;
        }
        squares += (unsigned long long)length * (unsigned long long)length;
        long_rows += length > limit;
        const Width here{hyb_cost(length, bin_rows + up_to, bin_entries + entries_up_to, rows, entries, value_bytes,
                                  index_bytes),
                         length, bin_rows + up_to, bin_entries + entries_up_to};
        if (cheaper(here, best)) best = here;
        if (copies_before == 0)  // one writer per length
#pragma unroll
            for (int q = 0; q < 4; ++q)
                if (bin_rows + shorter < targets[q] && targets[q] <= bin_rows + up_to) found[q] = length;
    }
    squares = sg::subwarp_sum<32>(squares);
    long_rows = sg::subwarp_sum<32>(long_rows);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
        const Width other = shfl_down_width(best, offset);
        if (cheaper(other, best)) best = other;
    }
    __syncthreads();  // scratch is free again
    auto sums = reinterpret_cast<unsigned long long*>(scratch);
    if (threadIdx.x % 32 == 0) {
        const int warp = threadIdx.x / 32;
        warp_best[warp] = best, sums[warp] = squares, sums[STATS_BLOCK / 32 + warp] = long_rows;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        squares = long_rows = 0;
        for (int w = 0; w < STATS_BLOCK / 32; ++w) {
            if (cheaper(warp_best[w], best)) best = warp_best[w];
            squares += sums[w], long_rows += sums[STATS_BLOCK / 32 + w];
        }
        words[RECORD_STATUS] = STATUS_SUMMARISED;
        const long long summary[SUMMARY_WORDS] = {
            found[0], counts[0], (long long)squares, found[1], found[2], found[3],
            best.length, best.entries_to + best.length * (rows - best.rows_to), (long long)long_rows, found[4]};
        for (int w = 0; w < SUMMARY_WORDS; ++w) words[RECORD_SUMMARY + w] = summary[w];
    }
    __syncthreads();  // the record whole, every word of the head read before it is zeroed
    // Ready for the next call: the counters and the head's words this call counted into, zeroed
    // before the record shows.
    if (threadIdx.x < STATS_COUNTERS) counters[threadIdx.x] = 0;
    for (int w = threadIdx.x; w < OUT_BINS + bins; w += STATS_BLOCK) out[w] = 0;
    __syncthreads();
    // One store a lane, together (single stores to host memory one after another would each pay
    // a trip over the bus), then the epoch.
    if (threadIdx.x < 32) publish_record(record, true, threadIdx.x < RECORD_WORDS ? words[threadIdx.x] : 0, epoch);
}

template <class I>
__global__ void __launch_bounds__(STATS_BLOCK)
stats_summary(unsigned long long* __restrict__ counters, unsigned long long* __restrict__ out,
              const long long n_rows, const long long nnz, const long long overflow_capacity,
              const unsigned long long epoch, long long* __restrict__ record, const long long limit,
              const long long hot_rows, const int value_bytes, const long long target50, const long long target90,
              const long long target99) {
    __shared__ SummaryShared shared;
    summarise<I>(shared, counters, out,
                 SummaryArguments{n_rows, nnz, overflow_capacity, epoch, record, limit, hot_rows, value_bytes,
                                  target50, target90, target99});
}

// ---------------------------------------------------------------- the direct pass
// csr_stats_direct: csr_stats's statistics for the smaller matrices (the host picks it up to
// DIRECT_MAX_ENTRIES entries, sparsegpu/advisor.py), where every call is latency-bound and
// csr_stats's ticket round trips, its pieces staged one after another and a second launch for the
// summary cost more than the work. Without tickets or a queue, in one launch:
//  - block b takes the rows [b * block_rows, ...) (a multiple of 32, at most STATS_WINDOW) for
//    the row statistics, exactly as a csr_stats tile;
//  - and, independently, the items [b * block_items, ...) of the merge path of the rows' ends and
//    the entries (as in merge-based CSR SpMV) for the structure statistics: at most block_items
//    entries and rows, so neither a long row nor a run of short or empty rows loads one block more
//    than another. The block finds where its diagonals cross the path by a search of indptr
//    (every thread probes at once: one round trip a step) that first probes the rows where the
//    mean row length puts the crossing (one step for regular rows), then narrows 256-fold a step;
//    it holds DIRECT_POINTERS pointers from its first row on in shared memory (the first round of columns
//    in flight with them; rows past them: the next window of pointers), and each thread takes a
//    run of consecutive whole 16-byte vectors of columns, all in flight at once: as many as spread
//    the block's entries over its threads, up to the instantiation's VECTORS (a round), so that a
//    block of a few entries has short runs and one of many takes them in one round trip.
//    The rows find their entries, not the entries their rows: every non-empty row marks its first
//    entry in the round (mark_rows), and an entry's row is the largest mark up to it, a maximum
//    scan over the block (marks_before) and then along the thread's run. That costs a few
//    barriers a round and, per entry, a maximum and the counts without a branch, however long,
//    short or empty the rows are (searching and stepping rows per entry cost 1-4 us more at
//    1K-490K rows on an H200, asv_benchmarks/RESULTS.md, eleventh session).
// The last block to finish (a ticket taken after every block's atomics) summarises the buffer
// into the record as stats_summary would, unless `record` is null (the buffer is then left as
// csr_stats leaves it); a grid of one block (the host's choice for the smallest matrices)
// summarises its own shared bins when the warp summary applies, merging nothing. Measured on an
// H200 (asv_benchmarks/RESULTS.md, eighth and ninth sessions): faster than csr_stats with
// stats_summary on power-law graphs at every size, on a par up to about 1M entries of regular rows.
template <class I> constexpr int DIRECT_POINTERS = 8192 / sizeof(I);  // 8 KiB of pointers
// A round's entries and a thread's (its run of consecutive vectors), at most, for VECTORS 16-byte
// vectors of columns a thread (csr_stats_direct's template parameter).
template <class I, int VECTORS> constexpr int ROUND_ENTRIES = VECTORS * STATS_BLOCK * STATS_VECTOR<I>;
template <class I, int VECTORS> constexpr int RUN_ENTRIES = VECTORS * STATS_VECTOR<I>;

template <class I, int VECTORS> struct DirectPass {
    // The block's rows' pointers, for the row statistics; then a round's 16-bit row marks.
    sg::vec16<I> rows[vectors_holding<I>(STATS_WINDOW + 1) > ROUND_ENTRIES<I, VECTORS> / 8
                          ? vectors_holding<I>(STATS_WINDOW + 1)
                          : ROUND_ENTRIES<I, VECTORS> / 8];
    sg::vec16<I> entries[vectors_holding<I>(DIRECT_POINTERS<I>)];  // pointers of the entries' rows
    __align__(16) unsigned bins[STATS_BINS];
    BlockTotals totals;
    unsigned warp_marks[STATS_BLOCK / 32];  // marks_before's, apart from the totals' scratch the merge writes
};

// Where the merge path of the row ends (indptr[1..n_rows]) and the entries (0 .. nnz) crosses
// diagonals d[0] and d[1] (rows + entries): the rows ended before it, the first p in
// [max(0, d - nnz), min(d, n_rows)) with indptr[p + 1] > d - p - 1 (else min(d, n_rows)); the
// entries before it are d - p. By the whole block, both at once, a round trip a step: every
// thread probes both. The first step probes the STATS_BLOCK rows around where the mean row
// length puts the split: if the rows are alike (meshes, stencils, uniform random rows: off by
// about the square root of the rows) that finds it, in one step instead of one for each
// 256-fold narrowing of the range; if not, it narrows the range to one side and the steps
// after it to every STATS_BLOCK-th row, then every step-th, ... (A corrupt indptr gives some
// split in range.) In 32 bits: rows plus entries are at most DIRECT_ITEM_LIMIT (the host's).
template <class I>
__device__ __forceinline__ void merge_path_splits(const I* __restrict__ indptr, const int n_rows, const int nnz,
                                                  const int (&d)[2], int (&row)[2]) {
    int low[2], high[2], start[2], step[2] = {1, 1};
    // (A float's rounding moves the guess by well under a row at the entries this pass takes.)
    const float rows_per_item = float(n_rows) / float(n_rows + nnz);
#pragma unroll
    for (int q = 0; q < 2; ++q) {
        low[q] = d[q] > nnz ? d[q] - nnz : 0, high[q] = d[q] < n_rows ? d[q] : n_rows;
        start[q] = int(float(d[q]) * rows_per_item) - STATS_BLOCK / 2;
        start[q] = start[q] < high[q] - STATS_BLOCK ? start[q] : high[q] - STATS_BLOCK;
        start[q] = start[q] > low[q] ? start[q] : low[q];
    }
    while (high[0] > low[0] || high[1] > low[1]) {
        bool ended[2];
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int probe = start[q] + int(threadIdx.x) * step[q];
            ended[q] = probe < high[q] && sg::ldg(indptr + probe + 1) <= I(d[q] - probe - 1);
        }
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            // The probes before the at-th ended a row, the at-th (if any, and in range) did not.
            const int at = __syncthreads_count(ended[q]);
            if (at == 0) {
                high[q] = start[q];
            } else {
                const int past = at < STATS_BLOCK ? start[q] + at * step[q] : high[q];
                low[q] = start[q] + (at - 1) * step[q] + 1;
                high[q] = past < high[q] ? past : high[q];
            }
            step[q] = (high[q] - low[q] + STATS_BLOCK - 1) / STATS_BLOCK;
            start[q] = low[q];
        }
    }
    row[0] = low[0], row[1] = low[1];
}

// The row marks of a round of entries [base, end): 16-bit words, zero but where
// a row of the window starts, and at 0 (the round's first entry), where they hold the row's index
// in the window plus one. Every non-empty row of the window that meets the round writes its own
// mark, so a window's rows need no search: the row of an entry is the largest mark at or before it
// (a prefix maximum), whatever the rows' lengths and however many are empty. Every thread calls it,
// between barriers.
template <class I>
__device__ __forceinline__ void mark_rows(const I* window, const int held, const I base, const I end,
                                          unsigned short* marks) {
    for (int r = threadIdx.x; r < held - 1; r += STATS_BLOCK) {
        const I start = window[r], stop = window[r + 1];
        if (start < stop && stop > base && start < end) marks[start > base ? int(start - base) : 0] = (unsigned short)(r + 1);
    }
}

// The largest of the 16-bit halves of a run's `run` marks (packed two a word; run even).
template <int RUN>
__device__ __forceinline__ unsigned largest_mark(const unsigned (&packed)[RUN / 2], const int run) {
    unsigned m = packed[0];
#pragma unroll
    for (int q = 1; q < RUN / 2; ++q) {
        if (2 * q >= run) break;
        m = __vmaxu2(m, packed[q]);
    }
    return max(m & 0xffff, m >> 16);
}

// The largest mark before each thread's run in the round (0 if none): an exclusive maximum over
// the block's threads in order, of each thread's largest. The marks grow along the round (a row's
// index in the window), so that is the largest of the last thread before with any mark: found in
// the warp by a ballot, and over the warps before by one reduction of their largest. Every thread
// calls it; its barrier also ends every thread's reading of the marks. (For a corrupt indptr the
// marks need not grow: an entry then gets some row of the window, still in range.)
__device__ __forceinline__ unsigned marks_before(const unsigned largest, unsigned* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const unsigned marked = __ballot_sync(sg::FULL_MASK, largest != 0) & ((1u << lane) - 1);
    const unsigned from_lane = __shfl_sync(sg::FULL_MASK, largest, marked ? 31 - __clz(marked) : 0);
    // (Marks are 16-bit: warp_max's int reduction holds them.)
    const unsigned warp_largest = unsigned(warp_max(int(largest)));
    if (lane == 0) scratch[warp] = warp_largest;
    __syncthreads();
    const unsigned earlier = unsigned(warp_max(lane < warp ? int(scratch[lane % (STATS_BLOCK / 32)]) : 0));
    return marked ? from_lane : earlier;
}

// A grid of one block (the smallest matrices) summarises from its own shared bins and head words
// when the warp summary applies: nothing is merged into the buffer (it stays zero), and there is
// no ticket and no round trip for the summary's loads. Returns false (nothing written) where the
// block has to merge and summarise as the last of many would. Every thread calls it.
template <class I>
__device__ __forceinline__ bool summarised_alone(const unsigned long long word, const unsigned* bins,
                                                 BlockTotals& totals, const SummaryArguments& arguments) {
    if (threadIdx.x < OUT_BINS) totals.head[threadIdx.x] = word;  // (no rows past the bins if summarised)
    __syncthreads();
    const unsigned long long longest = totals.head[OUT_LONGEST];
    if (longest >= WARP_SUMMARY_BINS) return false;
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x, used = int(longest) + 1;
        long long counts[WARP_BINS];
#pragma unroll
        for (int t = 0; t < WARP_BINS; ++t) {
            const int k = 32 * t + lane;
            counts[t] = k < used ? bins[k] : 0;
        }
        long long record_word;
        const bool done = warp_summary_applies<I>(used, arguments) &&
                          warp_summarise<I>(counts, lane < OUT_BINS ? (long long)totals.head[lane] : 0, used,
                                            arguments, record_word);
        if (done) publish_record(arguments.record, true, record_word, arguments.epoch);
        if (lane == 0) totals.summarised = done;
    }
    __syncthreads();
    return totals.summarised;
}

// MIN_BLOCKS: the blocks an SM holds, and VECTORS: the 16-byte vectors of columns a thread loads
// at once, at most (the host's grid picks the instantiation, sparsegpu/advisor.py direct_launch:
// the fewest blocks an SM whose round holds a block's entries). 2 blocks an SM leave a thread 128
// registers (0.5-1.4 us faster on an H200 than 64 at two blocks an SM), 3 leave 80, 4 fill the
// SMs for the largest grids with 64; more vectors hold more registers.
template <class I, int MIN_BLOCKS, int VECTORS>
__global__ void __launch_bounds__(STATS_BLOCK, MIN_BLOCKS)
csr_stats_direct(const I* __restrict__ indptr, const I* __restrict__ indices, const long long n_rows,
                 const long long nnz, const int block_rows, const long long block_items,
                 const long long overflow_capacity, unsigned long long* __restrict__ counters,
                 unsigned long long* __restrict__ out, const unsigned long long epoch, long long* __restrict__ record,
                 const long long limit, const long long hot_rows, const int value_bytes, const long long target50,
                 const long long target90, const long long target99) {
    constexpr int V = STATS_VECTOR<I>;
    __shared__ union Shared {
        DirectPass<I, VECTORS> pass;
        SummaryShared summary;
    } shared;
    __shared__ bool last_block;
    auto& [row_storage, entry_storage, bins, totals, warp_marks] = shared.pass;
    const I* row_window = reinterpret_cast<const I*>(row_storage);
    const I* window = reinterpret_cast<const I*>(entry_storage);
    clear_bins(bins);
    totals.clear();

    // Rows, entries and their positions in 32 bits (fewer registers and instructions): the host
    // takes this pass only for rows plus entries up to DIRECT_ITEM_LIMIT, 2^30, so that a grid's
    // rows and items past them stay in range too.
    const int m = int(n_rows), entries = int(nnz), items = m + entries;
    // The rows' pointers in flight while the entries' first row is searched for.
    const int row0 = int(blockIdx.x) * block_rows;
    const int rows = row0 >= m ? 0 : m - row0 < block_rows ? m - row0 : block_rows;
    if (rows) load_pointers<I, STATS_WINDOW + 1>(indptr, row0, rows + 1, row_storage);
    const int d0 = int(blockIdx.x) * int(block_items);
    const int diagonals[2] = {d0 < items ? d0 : items, items - d0 < block_items ? items : d0 + int(block_items)};
    int splits[2];
    merge_path_splits(indptr, m, entries, diagonals, splits);
    const int first_entry = diagonals[0] - splits[0], last_entry = diagonals[1] - splits[1];
    int first_row = first_entry < last_entry ? splits[0] : m;
    copy_to_shared_wait();
    __syncthreads();
    if (rows) tile_rows_stats(row_window, rows, overflow_capacity, bins, out, totals.widths, totals.longest);

    // The entries [first_entry, last_entry), a window of pointers at a time, each window's first row a multiple
    // of the pointers in a 16-byte vector (so they are copied as vectors) at or before the first
    // row it has to hold: the row of the first entry not yet counted. A round of the window's
    // entries gives each thread a run of `vectors` consecutive 16-byte vectors of columns,
    // all in flight at once; the rows mark where they start in the round (mark_rows), and each
    // entry's row is the largest mark up to it: the marks before the thread's run (marks_before),
    // then its own. Per entry that is a maximum and the counts, without branches, whatever the
    // rows' lengths.
    constexpr int ROW_ALIGN = sg::vec16<I>::N;
    // Vectors a thread takes a round: as many as the block's entries need (so that a few entries
    // spread over every thread: shorter runs), up to VECTORS, spread evenly over the rounds that
    // many entries take (two rounds of 5 cost less than rounds of 6 and 4).
    const int block_vectors = (last_entry - first_entry + V - 1) / V + 1;  // (+1: a run may start mid-vector)
    const int rounds = (block_vectors + VECTORS * STATS_BLOCK - 1) / (VECTORS * STATS_BLOCK);
    const int vectors = (block_vectors + rounds * STATS_BLOCK - 1) / (rounds * STATS_BLOCK);
    const int run = vectors * V, round_entries = run * STATS_BLOCK;
    unsigned short* marks = reinterpret_cast<unsigned short*>(row_storage);
    const bool aligned = reinterpret_cast<unsigned long long>(indices) % 16 == 0;
    Structure<I> s;
    I columns[VECTORS][V];
    // The columns of the thread's run in the round from entry `base` (a multiple of V), within the
    // entries [lo, hi).
    const auto load_run = [&](const int base, const int lo, const int hi) {
#pragma unroll
        for (int u = 0; u < VECTORS; ++u) {
            if (u == vectors) break;
            const int e = base + (int(threadIdx.x) * vectors + u) * V;
            if (e >= hi) continue;
            if (aligned && e + V <= entries) {
                load_vector(indices + e, columns[u]);
            } else {
#pragma unroll
                for (int k = 0; k < V; ++k) columns[u][k] = e + k >= lo && e + k < hi ? __ldcs(indices + e + k) : I(0);
            }
        }
    };
    for (int next = first_entry; first_row < m;) {
        first_row = first_row / ROW_ALIGN * ROW_ALIGN;
        // Pointers up to the end of the row that holds the block's last entry (splits[1]; at
        // least two, so that a corrupt indptr still moves on), at most the window's.
        const int rows_needed = (splits[1] < m ? splits[1] + 1 : m) - first_row;
        const bool to_the_end = rows_needed < DIRECT_POINTERS<I> - 1;
        const int held = rows_needed < 1 ? 2 : to_the_end ? rows_needed + 1 : DIRECT_POINTERS<I>;
        __syncthreads();  // every thread is done with the previous window and its marks
        load_pointers<I, DIRECT_POINTERS<I>>(indptr, first_row, held, entry_storage);
        // A window to the block's last row holds the entries [next, last_entry) of a valid
        // indptr: their first round's columns are in flight with the pointers.
        if (to_the_end) load_run(next / V * V, next, last_entry);
        copy_to_shared_wait();
        __syncthreads();
        // The window's entries within the block's, [lo, hi); none where a corrupt indptr has its
        // pointers out of order (!ordered), which ends the pass.
        const I window_first = window[0], window_last = window[held - 1];
        const int lo = window_first <= I(next) ? next : window_first < I(last_entry) ? int(window_first) : last_entry;
        const bool ordered = window_last >= I(lo);
        const int hi = !ordered ? lo : window_last < I(last_entry) ? int(window_last) : last_entry;
        bool loaded = to_the_end && lo == next && hi == last_entry;  // (else a corrupt indptr: loaded again)
        const I row_base = I(first_row);  // (entries and rows fit I)
        for (int base = lo / V * V; base < hi; base += round_entries) {
            if (!loaded) load_run(base, lo, hi);
            loaded = false;
            // (The previous round's marks were read before marks_before's barrier.)
            for (int q = threadIdx.x; q < round_entries / 8; q += STATS_BLOCK)
                reinterpret_cast<uint4*>(marks)[q] = uint4{0, 0, 0, 0};
            __syncthreads();
            const int end = hi - base < round_entries ? hi : base + round_entries;
            mark_rows(window, held, I(base), I(end), marks);
            __syncthreads();
            constexpr int RUN = RUN_ENTRIES<I, VECTORS>;
            unsigned packed[RUN / 2];
#pragma unroll
            for (int q = 0; q < RUN / 2; ++q) {
                if (2 * q == run) break;
                packed[q] = reinterpret_cast<const unsigned*>(marks)[threadIdx.x * (run / 2) + q];
            }
            unsigned row = marks_before(largest_mark<RUN>(packed, run), warp_marks);
            // The run's entries [from, to) are the round's in [lo, end): all of them but in the
            // threads at the round's ends, which count the others as 0.
            const int run_first = threadIdx.x * run;  // (offsets from base)
            const int lo_offset = lo > base ? lo - base : 0, end_offset = end - base;
            const int from = min(max(lo_offset - run_first, 0), run), to = min(max(end_offset - run_first, 0), run);
            const I row_before = row_base - I(1);  // (the marks are the window's rows plus one)
            const auto count_run = [&](const auto whole) {
#pragma unroll
                for (int i = 0; i < RUN; ++i) {
                    if (i == run) break;
                    row = max(row, (packed[i / 2] >> (16 * (i % 2))) & 0xffff);
                    const I d = columns[i / V][i % V] - (row_before + I(row));
                    s.count(whole || (i >= from && i < to) ? d : I(0));
                }
            };
            if (from == 0 && to == run) count_run(Constant<true>{});
            else if (from < to) count_run(Constant<false>{});  // (threads past the round's end skip)
        }
        if (hi >= last_entry || !ordered) break;
        next = hi;
        first_row += held - 1;
    }
    s.end_item(totals.structure[threadIdx.x / 32]);
    if (threadIdx.x == 0) totals.entries = (unsigned long long)(last_entry - first_entry);
    const unsigned long long word = block_head_word(s, totals);
    const SummaryArguments arguments{n_rows, nnz, overflow_capacity, epoch, record, limit, hot_rows, value_bytes,
                                     target50, target90, target99};
    if (gridDim.x == 1 && record != nullptr && summarised_alone<I>(word, bins, totals, arguments)) return;
    merge_into_buffer(word, bins, totals, out);
    if (record == nullptr) return;

    // The last block summarises: every block's atomics are done before its ticket. Thread 0
    // alone takes it, after the barrier (release is cumulative: the block's atomics that the
    // barrier ordered before it are released with the ticket, and its acquire is the block's
    // through the barrier after it, as in cooperative groups' grid sync): a fence in every warp
    // waited for each warp's atomics to land (10% of the pass's stall samples at 490K rows, H200).
    // Message passing needs acquire-release only; __threadfence's sequentially consistent fence
    // costs more.
    __syncthreads();
    if (threadIdx.x == 0) last_block = ticket_acq_rel(counters + COUNTER_TILES_DONE) == gridDim.x - 1ULL;
    __syncthreads();
    if (!last_block) return;
    summarise<I>(shared.summary, counters, out, arguments);
}
