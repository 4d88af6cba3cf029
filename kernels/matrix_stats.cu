// The format advisor's statistics in two kernels that write ONE buffer of unsigned 64-bit words,
// whose head the caller zeroes and reads back with one copy (layout below; sparsegpu/reference/stats.py
// holds the same constants and the NumPy twins). Every word is an integer merged with integer
// atomics, so the counts are exact and the same every run; only the order of the overflow list
// varies, and the host reads that list as a multiset (it bincounts it).
//
//   out[0..4]  csr_structure: entries below the diagonal, on it, above it, sum of |i - j|, max |i - j|
//   out[5]     csr_row_stats: sum over slices of 32 consecutive rows of the slice's longest row
//              (SELL slots / 32; the last slice may be partial)
//   out[6]     csr_row_stats: rows of length >= ROW_STATS_BINS (the overflow list's length)
//   out[7 .. 7 + ROW_STATS_BINS)   rows of each length 0 .. ROW_STATS_BINS - 1
//   out[7 + ROW_STATS_BINS ..)     the overflow rows' lengths, in no particular order; the caller
//                                  gives it room for nnz / ROW_STATS_BINS + 1 of them, at least
//                                  as many as rows can be that long
//   tile_rows (a separate array, never read back): tile_rows[t] = the row holding entry
//              t * STATS_TILE, written by csr_row_stats, read by csr_structure
//
// csr_row_stats runs first. It reads indptr once, a row per lane (grid-stride by whole warps, so
// a warp's 32 rows are one SELL slice, ROW_STATS_UNROLL slices loaded at a time, each lane
// loading only its row's end and taking its start from the lane before): the warp's max length
// is the slice's width; lengths below ROW_STATS_BINS go to a block-private shared histogram, a
// slice whose lengths are all equal adding once (so a matrix whose rows all have the same length
// costs one shared atomic per warp, not 32 serialised ones) and other slices lane by lane;
// longer rows (at most nnz / ROW_STATS_BINS of them) are appended to the overflow list. A row
// holding the first entry of a tile of STATS_TILE entries records itself in tile_rows (one row
// per tile, so no atomics). Each block then adds its non-zero bins to out[7..] and its slice
// widths to out[5].
//
// csr_structure splits work by entries, not rows, so one very long row cannot hold up anyone: a
// block takes tiles of STATS_TILE entries (grid-stride), each thread a run of STATS_RUN
// consecutive entries (64 bytes: 16 int32 or 8 int64), loaded first (16-byte vector loads when
// indices is aligned) so their bytes are in flight while the block finds their rows. The tile's
// rows are tile_rows[t] (loaded a tile ahead) .. tile_rows[t + 1]; the block copies their pointers into shared memory
// as offsets into the tile (a window of up to STATS_WINDOW rows: every tile whose rows are not
// mostly empty fits in one), and each thread binary-searches that window for its run's first
// entry and walks forward as its entries advance (a search again past a run of empty rows). A
// tile spanning more rows than the window (long runs of empty rows) takes several windows in
// turn, each thread handling the entries whose rows the window holds, so indptr is still read
// once and no search ever touches global memory.
#include "common.cuh"

constexpr int STATS_BLOCK = 256;
// Consecutive entries per thread and tile: 64 bytes of columns (four 16-byte loads in flight per
// thread), which keeps csr_structure within 48 registers without spills.
template <class I> constexpr int STATS_RUN = 64 / sizeof(I);
template <class I> constexpr int STATS_TILE = STATS_BLOCK * STATS_RUN<I>;  // entries per block and turn
// Rows whose pointers a block holds at once: a tile without empty rows spans at most a tile's
// entries in rows, so it always fits. 16 KiB of shared memory (offsets into the tile, 32-bit).
constexpr int STATS_WINDOW = 4096;
constexpr int STATS_WALK = 4;  // rows walked forward before searching instead
constexpr int ROW_STATS_BLOCK = 256;
// Slices whose row ends a warp loads before using any: 32 bytes in flight per lane.
template <class I> constexpr int ROW_STATS_UNROLL = 32 / sizeof(I);
// Blocks per SM csr_row_stats's registers are capped for (40 registers, no spills).
constexpr int ROW_STATS_MIN_BLOCKS = 6;
// 4096 bins: 16 KiB of 32-bit shared counts per block (eight blocks of 256 threads still fit
// on an SM), and an overflow list of at most nnz / 4096 rows, so the head the host copies back
// stays small (32 KiB). 32-bit block counts suffice: the launcher gives every multiprocessor
// several blocks, so a block counts a small share of the rows, far below 2^32 for any indptr
// that fits in device memory.
constexpr int ROW_STATS_BINS = 4096;
constexpr int OUT_SLICE_WIDTHS = 5, OUT_OVERFLOW_ROWS = 6, OUT_BINS = 7;
constexpr int OUT_OVERFLOW = OUT_BINS + ROW_STATS_BINS;

// The last index r in [low, high) with window[r] <= j, given window[low] <= j < window[high].
__device__ __forceinline__ int window_search(const int* window, int low, int high, int j) {
    while (high - low > 1) {
        const int mid = (low + high) / 2;
        if (window[mid] <= j) low = mid; else high = mid;
    }
    return low;
}

// A thread's run of entries with 16-byte loads (the run starts 16-byte aligned when `indices`
// is: tiles and runs start at multiples of the run's length).
__device__ __forceinline__ void load_run(const int* p, int (&columns)[STATS_RUN<int>]) {
#pragma unroll
    for (int q = 0; q < STATS_RUN<int> / 4; ++q) {
        const int4 v = __ldg(reinterpret_cast<const int4*>(p) + q);
        columns[4 * q] = v.x, columns[4 * q + 1] = v.y, columns[4 * q + 2] = v.z, columns[4 * q + 3] = v.w;
    }
}
__device__ __forceinline__ void load_run(const long long* p, long long (&columns)[STATS_RUN<long long>]) {
#pragma unroll
    for (int q = 0; q < STATS_RUN<long long> / 2; ++q) {
        const longlong2 v = __ldg(reinterpret_cast<const longlong2*>(p) + q);
        columns[2 * q] = v.x, columns[2 * q + 1] = v.y;
    }
}

template <class I> struct unsigned_of;
template <> struct unsigned_of<int> { using type = unsigned; };
template <> struct unsigned_of<long long> { using type = unsigned long long; };

template <class I>
__global__ void __launch_bounds__(STATS_BLOCK)
csr_structure(const I* __restrict__ indptr, const I* __restrict__ indices, const long long n_rows,
              const long long* __restrict__ tile_rows, unsigned long long* __restrict__ out) {
    using Magnitude = typename unsigned_of<I>::type;
    constexpr int RUN = STATS_RUN<I>, TILE = STATS_TILE<I>;
    __shared__ int window[STATS_WINDOW + 1];
    __shared__ unsigned long long scratch[5][STATS_BLOCK / 32];
    // Column minus row fits I: the host checked 0 <= column < n_cols, and rows fit I too. A
    // thread counts at most nnz / STATS_BLOCK entries: 32-bit counts hold below 2^40 entries.
    unsigned below = 0, on = 0, above = 0;
    unsigned long long distance = 0;
    Magnitude band = 0;
    const long long nnz = indptr[n_rows];
    const long long tiles = (nnz + TILE - 1) / TILE;
    const bool aligned = reinterpret_cast<unsigned long long>(indices) % 16 == 0;
    // Rows out of range (a corrupt indptr that left a tile unrecorded) are clamped so that no
    // load leaves indptr; the statistics of such a matrix mean nothing anyway.
    const auto clamp_row = [n_rows](long long row) { return row < 0 ? 0 : row < n_rows ? row : n_rows - 1; };
    long long next_first_row = blockIdx.x < tiles ? sg::ldg(tile_rows + blockIdx.x) : 0;
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const long long base = tile * TILE;
        const int in_tile = nnz - base < TILE ? (int)(nnz - base) : TILE;
        const int first = threadIdx.x * RUN;
        const int count = in_tile - first < 0 ? 0 : in_tile - first < RUN ? in_tile - first : RUN;
        // The run's column loads go first: their bytes are in flight while the rows are found.
        I columns[RUN];
        if (count == RUN && aligned) {
            load_run(indices + base + first, columns);
        } else {
#pragma unroll
            for (int k = 0; k < RUN; ++k) columns[k] = k < count ? sg::ldg(indices + base + first + k) : I(0);
        }
        const long long first_row = clamp_row(next_first_row);
        // The tile's last entry lies in the row holding the next tile's first entry, or before.
        long long last_row = tile + 1 < tiles ? clamp_row(sg::ldg(tile_rows + tile + 1)) : n_rows - 1;
        last_row = last_row < first_row ? first_row : last_row;
        if (tile + gridDim.x < tiles) next_first_row = sg::ldg(tile_rows + tile + gridDim.x);
        for (long long row0 = first_row;;) {
            const int rows = last_row + 1 - row0 < STATS_WINDOW ? (int)(last_row + 1 - row0) : STATS_WINDOW;
            __syncthreads();  // the previous window's readers are done with it
            // Pointers as offsets into the tile, clamped to [0, TILE]: order and every
            // comparison with an entry of the tile are kept, and they fit 32 bits.
            for (int i = threadIdx.x; i <= rows; i += STATS_BLOCK) {
                const long long offset = (long long)sg::ldg(indptr + row0 + i) - base;
                window[i] = offset < 0 ? 0 : offset < TILE ? (int)offset : TILE;
            }
            __syncthreads();
            const int window_end = window[rows];
            // This thread's entries whose rows the window holds: run positions [begin, end).
            const int begin = window[0] - first < 0 ? 0 : window[0] - first;
            const int end = window_end - first < count ? window_end - first : count;
            const I window_row = I(row0);
            int row = -1, next = 0;  // the window row of the last entry handled, and where it ends
#pragma unroll
            for (int k = 0; k < RUN; ++k) {
                if (k < begin || k >= end) continue;
                const int j = first + k;
                if (row < 0) {
                    row = window_search(window, 0, rows, j);
                    next = window[row + 1];
                } else if (next <= j) {
                    int walked = 0;
                    do {
                        next = window[++row + 1];
                    } while (next <= j && ++walked < STATS_WALK);
                    if (next <= j) {  // a run of empty rows
                        row = window_search(window, row + 1, rows, j);
                        next = window[row + 1];
                    }
                }
                const I d = columns[k] - (window_row + I(row));
                below += d < 0;
                on += d == 0;
                above += d > 0;
                const Magnitude magnitude = d < 0 ? Magnitude(0) - Magnitude(d) : Magnitude(d);
                distance += magnitude;
                band = magnitude > band ? magnitude : band;
            }
            // Every thread reads window_end before the next window's first barrier.
            if (window_end >= in_tile || rows == last_row + 1 - row0) break;
            row0 += rows;
        }
    }
    unsigned long long totals[5] = {below, on, above, distance, (unsigned long long)band};
#pragma unroll
    for (int w = 0; w < 4; ++w) totals[w] = sg::subwarp_sum<32>(totals[w]);
    for (int offset = 16; offset > 0; offset /= 2) {
        const unsigned long long other = sg::shfl_down(totals[4], offset);
        totals[4] = other > totals[4] ? other : totals[4];
    }
    const int warp = threadIdx.x / 32;
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
        if (threadIdx.x == 4) atomicMax(out + 4, total);
        else if (total) atomicAdd(out + threadIdx.x, total);
    }
}

template <class I>
__global__ void __launch_bounds__(ROW_STATS_BLOCK, ROW_STATS_MIN_BLOCKS)
csr_row_stats(const I* __restrict__ indptr, const long long n_rows, const long long overflow_capacity,
              unsigned long long* __restrict__ out, long long* __restrict__ tile_rows) {
    __shared__ unsigned bins[ROW_STATS_BINS];
    __shared__ unsigned long long scratch[ROW_STATS_BLOCK / 32];
    for (int b = threadIdx.x; b < ROW_STATS_BINS; b += ROW_STATS_BLOCK) bins[b] = 0;
    __syncthreads();
    const int lane = threadIdx.x % 32;
    const long long tiles = ((long long)sg::ldg(indptr + n_rows) + STATS_TILE<I> - 1) / STATS_TILE<I>;
    unsigned long long slice_widths = 0;  // lane 0's sum of its warp's slice widths
    const long long stride = (long long)gridDim.x * ROW_STATS_BLOCK;
    // A warp takes ROW_STATS_UNROLL<I> slices a stride apart per turn, loading all their row ends
    // before using any (bytes in flight); a row's start is the previous lane's end, lane 0
    // loading its own. The loop and the slice test below depend on the warp's first row only,
    // so all 32 lanes run them together (the shuffles and the ballots need them); rows past
    // the end count as length 0.
    for (long long first = (long long)blockIdx.x * ROW_STATS_BLOCK + threadIdx.x - lane; first < n_rows;
         first += ROW_STATS_UNROLL<I> * stride) {
        I ends[ROW_STATS_UNROLL<I>], starts[ROW_STATS_UNROLL<I>];
#pragma unroll
        for (int k = 0; k < ROW_STATS_UNROLL<I>; ++k) {
            const long long row = first + k * stride + lane;
            ends[k] = row < n_rows ? sg::ldg(indptr + row + 1) : I(0);
            starts[k] = lane == 0 && row < n_rows ? sg::ldg(indptr + row) : I(0);
        }
#pragma unroll
        for (int k = 0; k < ROW_STATS_UNROLL<I>; ++k) {
            const long long slice = first + k * stride;
            if (slice >= n_rows) break;
            const long long row = slice + lane;
            const bool real = row < n_rows;
            const I before = __shfl_up_sync(sg::FULL_MASK, ends[k], 1);
            const long long start = lane == 0 ? (long long)starts[k] : (long long)before;
            const long long length = real ? (long long)ends[k] - start : 0;
            // csr_structure's tiles whose first entry this row holds (none for most rows).
            // (Bounded by the tile count too, so a corrupt indptr cannot write outside tile_rows.)
            long long t = (start + STATS_TILE<I> - 1) / STATS_TILE<I>;
            for (t = t < 0 ? 0 : t; real && t < tiles && t * STATS_TILE<I> < (long long)ends[k]; ++t) tile_rows[t] = row;
            long long width = length;
#pragma unroll
            for (int offset = 16; offset > 0; offset /= 2) {
                const long long other = __shfl_xor_sync(sg::FULL_MASK, width, offset);
                width = other > width ? other : width;
            }
            if (lane == 0) slice_widths += (unsigned long long)width;
            // The unsigned comparison also sends a negative length (a corrupt indptr) to the
            // overflow list, never outside the shared bins.
            const bool binned = real && (unsigned long long)length < ROW_STATS_BINS;
            const unsigned binning = __ballot_sync(sg::FULL_MASK, binned);
            // A slice of equal lengths (the common case: stencils, regular meshes) adds once;
            // otherwise every lane adds its own (colliding lanes serialise only among
            // themselves): a ballot, not __match_any_sync, which is costly per warp.
            const long long lead = sg::shfl(length, 0);
            const unsigned alike = __ballot_sync(sg::FULL_MASK, binned && length == lead);
            if (binning && alike == binning) {
                if (lane == 0) atomicAdd(bins + lead, (unsigned)__popc(binning));
            } else if (binned) {
                atomicAdd(bins + length, 1u);
            } else if (real) {
                const unsigned long long slot = atomicAdd(out + OUT_OVERFLOW_ROWS, 1ULL);
                if (slot < (unsigned long long)overflow_capacity) out[OUT_OVERFLOW + slot] = (unsigned long long)length;
            }
        }
    }
    // block_sum's __syncthreads also orders every shared bin update before the merge below.
    slice_widths = sg::block_sum<ROW_STATS_BLOCK>(slice_widths, scratch);
    if (threadIdx.x == 0 && slice_widths) atomicAdd(out + OUT_SLICE_WIDTHS, slice_widths);
    for (int b = threadIdx.x; b < ROW_STATS_BINS; b += ROW_STATS_BLOCK)
        if (bins[b]) atomicAdd(out + OUT_BINS + b, (unsigned long long)bins[b]);
}
