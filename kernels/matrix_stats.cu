// The format advisor's statistics in ONE kernel, csr_stats, that reads indptr once and indices
// once and writes ONE buffer of unsigned 64-bit words, whose head the caller zeroes and reads back
// with one copy (layout below; sparsegpu/reference/stats.py holds the same constants and the
// NumPy twin). Every word is an integer merged with integer atomics, so the counts are exact and
// the same every run; only the order of the overflow list varies, and the host reads that list
// as a multiset (it bincounts it).
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
// (16-byte loads), and from there computes the tile's row statistics (a warp per slice of 32
// rows: the slice's width, the length histogram in block-private shared bins, a slice of equal
// lengths adding once, longer rows appended to the overflow list) AND, for the tile's first
// STATS_ITEM entries, the structure statistics: each thread takes runs of STATS_RUN consecutive
// entries (64 bytes, on a grid aligned to the run so whole runs are 16-byte vector loads),
// finds its run's first row by a binary search of the shared pointers and walks forward. A
// thread's first run is loaded before the row statistics, and each later one while the one
// before is walked (the walk reads it back from the thread's own column of shared memory, so
// registers stay low): the bytes are in flight while the block computes.
// Work is split by entries, not rows, past STATS_ITEM: a tile with more entries (a very long
// row, or dense rows) announces the rest as chunks of STATS_ITEM entries in a queue, and any
// block takes them, so a row of 10^7 entries is spread over the whole device. A chunk reloads its
// tile's pointers (from L2) and runs the same structure code. Many empty rows cost nothing
// special: a tile never holds more rows than its shared window.
//
// Scheduling, without a grid barrier and without deadlock whatever the scheduling: one ticket
// counter hands out work in order: tickets below the tile count are row tiles, the ticket
// tiles + c is queue slot c. A tile's block announces its chunks (reserving slots with one
// atomic), publishes each as (tile, first entry, epoch flag), and then counts itself done, all
// before its own structure work. A block holding slot c waits (thread 0 polls, sleeping) until
// slot c is published, or until every tile is done and fewer than c + 1 chunks were announced,
// then leaves. It waits only on tiles whose tickets came before its own, so on blocks already
// running that never wait: progress is guaranteed. The counters (counters[0] the ticket,
// [1] chunks announced, [2] tiles done) lie just before `out` and are zeroed by the same memset
// as its head; published slots carry the call's epoch (the host counts calls up), so the queue
// is never zeroed: an older call's slots hold older epochs.
#include "common.cuh"

constexpr int STATS_BLOCK = 256;
// Blocks per SM registers are capped for, without spills: 4 for int32 (64 registers a thread),
// 3 for int64 (its 64-bit positions and pointers need a few more than 64).
template <class I> constexpr int STATS_MIN_BLOCKS = sizeof(I) == 4 ? 4 : 3;
// Consecutive entries per run: 64 bytes of columns (four 16-byte loads in flight per thread).
template <class I> constexpr int STATS_RUN = 64 / sizeof(I);
// Entries of a work item (a tile's own part, or a chunk): 64 KiB of columns, 4 runs a thread.
template <class I> constexpr long long STATS_ITEM = 65536 / sizeof(I);
// Rows a tile holds at most (a multiple of 32): its pointers fill 8 KiB (int32) or 16 KiB (int64)
// of shared memory, which with the bins and the stage stays within 48 KiB of static shared memory.
constexpr int STATS_WINDOW = 2016;
constexpr int STATS_WALK = 4;  // rows walked forward before searching instead
// 4096 bins: 16 KiB of 32-bit shared counts per block, and an overflow list of at most
// nnz / 4096 rows, so the head the host copies back stays small (32 KiB). 32-bit block counts
// suffice: a block counts at most the rows of the tiles it takes, far below 2^32 for any
// indptr that fits in device memory when the grid fills the device.
constexpr int STATS_BINS = 4096;
constexpr int OUT_SLICE_WIDTHS = 5, OUT_OVERFLOW_ROWS = 6, OUT_LONGEST = 7, OUT_BINS = 8;
constexpr int OUT_OVERFLOW = OUT_BINS + STATS_BINS;
constexpr int COUNTER_TICKET = 0, COUNTER_ANNOUNCED = 1, COUNTER_TILES_DONE = 2;
constexpr int QUEUE_WORDS = 4;  // a queue slot: tile, first entry, epoch flag, (padding)
constexpr unsigned STATS_POLL_NS = 200;

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

// A run of STATS_RUN<I> columns with 16-byte loads (the run is 64-byte aligned when `indices` is
// 16-byte aligned: runs start at multiples of their length).
__device__ __forceinline__ void load_run(const int* p, int* columns) {
#pragma unroll
    for (int q = 0; q < STATS_RUN<int> / 4; ++q) {
        const int4 v = __ldcs(reinterpret_cast<const int4*>(p) + q);
        columns[4 * q] = v.x, columns[4 * q + 1] = v.y, columns[4 * q + 2] = v.z, columns[4 * q + 3] = v.w;
    }
}
__device__ __forceinline__ void load_run(const long long* p, long long* columns) {
#pragma unroll
    for (int q = 0; q < STATS_RUN<long long> / 2; ++q) {
        const longlong2 v = __ldcs(reinterpret_cast<const longlong2*>(p) + q);
        columns[2 * q] = v.x, columns[2 * q + 1] = v.y;
    }
}

__device__ __forceinline__ unsigned long long load_volatile(const unsigned long long* p) {
    return *reinterpret_cast<const volatile unsigned long long*>(p);
}

// The largest of the warp's 32 values (every lane gets it).
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

// Per-thread structure counts: below and above the diagonal, entries seen (on = seen - below -
// above), sum and max of |i - j|. A thread counts at most nnz / STATS_BLOCK entries: 32-bit
// counts hold below 2^40 entries.
template <class I> struct Structure {
    using Magnitude = typename unsigned_of<I>::type;
    unsigned below = 0, above = 0, seen = 0;
    unsigned long long distance = 0;
    Magnitude band = 0;
};

// A run's columns, masked to the entries [lo, hi) (zero elsewhere): 16-byte loads when the run
// is whole and indices is aligned.
template <class I>
__device__ __forceinline__ void load_masked_run(const I* __restrict__ indices, const I base, const I lo, const I hi,
                                                const bool aligned, I (&columns)[STATS_RUN<I>]) {
    constexpr int RUN = STATS_RUN<I>;
    if (aligned && base >= lo && base <= hi - RUN) {
        load_run(indices + base, columns);
    } else {
#pragma unroll
        for (int k = 0; k < RUN; ++k) columns[k] = base + k >= lo && base + k < hi ? __ldcs(indices + base + k) : I(0);
    }
}

// This thread's runs of the entries [lo, hi) of the tile whose pointers are window[0..rows]
// (rows starting at row0): runs run, run + STATS_BLOCK, ... before end_run, the first one's
// columns already loaded (the caller issues those loads before its other work, so they are in
// flight meanwhile). Software-pipelined through the thread's own column of `stage`
// (STATS_RUN<I> x STATS_BLOCK, conflict-free): the next run's loads are in flight while the
// current one is read back from shared memory in a rolled loop (registers stay low whatever the
// run). Each run's first row comes from a search of the window, later ones by walking forward.
// Positions are I: every entry position is below nnz, which fits I (int32 arithmetic for int32).
template <class I>
__device__ __forceinline__ void tile_structure(const I* __restrict__ indices, const I* window, const int rows,
                                               const I row0, const I lo, const I hi, I run, const I end_run,
                                               I (&columns)[STATS_RUN<I>], const bool aligned, I* stage,
                                               Structure<I>& s) {
    using Magnitude = typename Structure<I>::Magnitude;
    constexpr int RUN = STATS_RUN<I>;
    while (run < end_run) {
#pragma unroll
        for (int k = 0; k < RUN; ++k) stage[k * STATS_BLOCK + threadIdx.x] = columns[k];
        const I base = run * RUN;
        run += STATS_BLOCK;
        if (run < end_run) load_masked_run(indices, run * RUN, lo, hi, aligned, columns);
        const int begin = lo > base ? (int)(lo - base) : 0;
        const int end = hi - base < RUN ? (int)(hi - base) : RUN;
        s.seen += end - begin;
        int row = window_search(window, 0, rows, I(base + begin));
        I next = window[row + 1];
        for (int k = begin; k < end; ++k) {
            const I j = base + k;
            if (next <= j) {
                int walked = 0;
                do {
                    next = window[++row + 1];
                } while (next <= j && ++walked < STATS_WALK);
                if (next <= j) {  // a run of empty rows
                    row = window_search(window, row + 1, rows, j);
                    next = window[row + 1];
                }
            }
            // Column minus row fits I: the host checked 0 <= column < n_cols, and rows fit I too.
            const I d = stage[k * STATS_BLOCK + threadIdx.x] - (row0 + I(row));
            s.below += d < 0;
            s.above += d > 0;
            const Magnitude magnitude = d < 0 ? Magnitude(0) - Magnitude(d) : Magnitude(d);
            s.distance += magnitude;
            s.band = magnitude > s.band ? magnitude : s.band;
        }
    }
}

// The row statistics of one tile: warp w takes slices w, w + 8, ... of 32 rows, lane l the
// slice's row l; rows past the tile count as length 0 (a partial last slice).
template <class I>
__device__ __forceinline__ void tile_rows_stats(const I* window, const int rows, const long long overflow_capacity,
                                                unsigned* bins, unsigned long long* __restrict__ out,
                                                unsigned long long* warp_widths, unsigned long long* warp_longest) {
    const int lane = threadIdx.x % 32;
    for (int slice = threadIdx.x / 32 * 32; slice < rows; slice += STATS_BLOCK) {
        const int i = slice + lane;
        const bool real = i < rows;
        const long long length = real ? (long long)window[i + 1] - (long long)window[i] : 0;
        const long long width = warp_max(length);
        if (lane == 0) {
            const int warp = threadIdx.x / 32;
            warp_widths[warp] += (unsigned long long)width;
            // (A negative width only comes from a corrupt indptr; it does not count as longest.)
            const unsigned long long longest = width < 0 ? 0 : (unsigned long long)width;
            warp_longest[warp] = longest > warp_longest[warp] ? longest : warp_longest[warp];
        }
        // The unsigned comparison also sends a negative length (a corrupt indptr) to the
        // overflow list, never outside the shared bins.
        const bool binned = real && (unsigned long long)length < STATS_BINS;
        const unsigned binning = __ballot_sync(sg::FULL_MASK, binned);
        // A slice of equal lengths (stencils, regular meshes) adds once; otherwise every lane
        // adds its own (colliding lanes serialise only among themselves).
        const long long lead = sg::shfl(length, 0);
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
            if (slot < (unsigned long long)overflow_capacity) out[OUT_OVERFLOW + slot] = (unsigned long long)length;
        }
    }
}

template <class I>
__global__ void __launch_bounds__(STATS_BLOCK, STATS_MIN_BLOCKS<I>)
csr_stats(const I* __restrict__ indptr, const I* __restrict__ indices, const long long n_rows, const long long nnz,
          const int tile_rows, const long long overflow_capacity, const long long queue_capacity,
          const unsigned long long epoch, unsigned long long* __restrict__ counters,
          unsigned long long* __restrict__ out, unsigned long long* __restrict__ queue) {
    using Vec = sg::vec16<I>;
    constexpr long long ITEM = STATS_ITEM<I>;
    constexpr int WINDOW_VECS = (STATS_WINDOW * (int)sizeof(I) / 16 + STATS_BLOCK - 1) / STATS_BLOCK;
    __shared__ Vec window_storage[STATS_WINDOW * sizeof(I) / 16 + 1];
    __shared__ unsigned bins[STATS_BINS];
    // The runs' columns on their way from registers to the walk; the block's totals at the end.
    __shared__ __align__(16) I stage[STATS_RUN<I> * STATS_BLOCK];
    // Each warp's sum of its slices' widths, and its longest row (written by its lane 0 only).
    __shared__ unsigned long long warp_widths[STATS_BLOCK / 32], warp_longest[STATS_BLOCK / 32];
    __shared__ long long ticket_shared, tile_shared, lo_shared, slot_shared;
    I* window = reinterpret_cast<I*>(window_storage);

    for (int b = threadIdx.x; b < STATS_BINS; b += STATS_BLOCK) bins[b] = 0;
    if (threadIdx.x < STATS_BLOCK / 32) warp_widths[threadIdx.x] = warp_longest[threadIdx.x] = 0;
    const long long tiles = (n_rows + tile_rows - 1) / tile_rows;
    const bool vectors = reinterpret_cast<unsigned long long>(indptr) % 16 == 0;
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
        // The tile's rows + 1 pointers: whole 16-byte vectors when indptr is aligned (row0 is a
        // multiple of 32), all loaded before any is stored; the rest one by one.
        const int whole = vectors ? (rows + 1) / Vec::N : 0;
        const Vec* source = reinterpret_cast<const Vec*>(indptr + row0);
        Vec loaded[WINDOW_VECS];
#pragma unroll
        for (int v = 0; v < WINDOW_VECS; ++v) {
            const int q = threadIdx.x + v * STATS_BLOCK;
            if (q < whole) loaded[v] = source[q];
        }
#pragma unroll
        for (int v = 0; v < WINDOW_VECS; ++v) {
            const int q = threadIdx.x + v * STATS_BLOCK;
            if (q < whole) window_storage[q] = loaded[v];
        }
        for (int i = whole * Vec::N + threadIdx.x; i <= rows; i += STATS_BLOCK) window[i] = sg::ldg(indptr + row0 + i);
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
        // The next ticket is taken now and stored at the end, so its round trip overlaps this
        // item's work.
        unsigned long long next_ticket = 0;
        if (threadIdx.x == 0) next_ticket = atomicAdd(counters + COUNTER_TICKET, 1ULL);
        // This thread's first run of the item's entries is loaded before the row statistics, so
        // its bytes are in flight meanwhile. (hi < lo only for a corrupt indptr, whose
        // statistics mean nothing: no entries then.)
        const I item_lo = I(lo), item_hi = I(hi < lo ? lo : hi);
        const I end_run = item_hi / STATS_RUN<I> + (item_hi % STATS_RUN<I> != 0);
        const I run = item_lo / STATS_RUN<I> + I(threadIdx.x);
        I columns[STATS_RUN<I>];
        if (run < end_run) load_masked_run(indices, run * STATS_RUN<I>, item_lo, item_hi, aligned, columns);
        if (own_tile) tile_rows_stats(window, rows, overflow_capacity, bins, out, warp_widths, warp_longest);
        tile_structure(indices, window, rows, I(row0), item_lo, item_hi, run, end_run, columns, aligned, stage, s);
        if (threadIdx.x == 0) ticket_shared = (long long)next_ticket;
    }
    // The block's totals (block_sum's barrier also orders every shared bin update before the
    // merge below).
    unsigned long long totals[5] = {s.below, (unsigned long long)(s.seen - s.below - s.above), s.above, s.distance,
                                    (unsigned long long)s.band};
#pragma unroll
    for (int w = 0; w < 4; ++w) totals[w] = sg::subwarp_sum<32>(totals[w]);
    for (int offset = 16; offset > 0; offset /= 2) {
        const unsigned long long other = sg::shfl_down(totals[4], offset);
        totals[4] = other > totals[4] ? other : totals[4];
    }
    const int warp = threadIdx.x / 32;
    auto scratch = reinterpret_cast<unsigned long long (*)[STATS_BLOCK / 32]>(stage);
    __syncthreads();  // the stage is free
    if (threadIdx.x % 32 == 0) {
#pragma unroll
        for (int w = 0; w < 5; ++w) scratch[w][warp] = totals[w];
    }
    __syncthreads();
    if (threadIdx.x < 5) {
        unsigned long long total = 0;
        for (int w = 0; w < STATS_BLOCK / 32; ++w) {
            const unsigned long long value = scratch[threadIdx.x][w];
            total = threadIdx.x == 4 ? (value > total ? value : total) : total + value;
        }
        if (threadIdx.x == 4) {
            if (total) atomicMax(out + 4, total);
        } else if (total) {
            atomicAdd(out + threadIdx.x, total);
        }
    }
    if (threadIdx.x % 32 == 0 && warp_widths[warp]) atomicAdd(out + OUT_SLICE_WIDTHS, warp_widths[warp]);
    if (threadIdx.x % 32 == 0 && warp_longest[warp]) atomicMax(out + OUT_LONGEST, warp_longest[warp]);
    for (int b = threadIdx.x; b < STATS_BINS; b += STATS_BLOCK)
        if (bins[b]) atomicAdd(out + OUT_BINS + b, (unsigned long long)bins[b]);
}
