// The format advisor's statistics in two kernels that write ONE buffer of unsigned 64-bit words,
// zeroed by the caller and read back with one copy (layout below; sparsegpu/reference/stats.py
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
//
// csr_structure splits work by entries, not rows, so one very long row cannot hold up a thread:
// each thread takes runs of STATS_RUN consecutive entries (grid-stride), finds the row of a run's
// first entry by binary search over indptr (its upper levels stay in L1) and walks forward as its
// entries advance, so a row boundary costs one load for the thread that crosses it (a binary
// search again past a long run of empty rows). No barrier until the end: every thread's loads
// and searches overlap with everyone else's.
//
// csr_row_stats reads indptr once, a row per thread (grid-stride by whole warps, so a warp's 32
// rows are one SELL slice, ROW_STATS_UNROLL slices loaded at a time): the warp's max length is the slice's width; lengths below
// ROW_STATS_BINS go to a block-private shared histogram, a slice whose lengths are all equal
// adding once (so a matrix whose rows all have the same length costs one shared atomic per warp,
// not 32 serialised ones) and other slices lane by lane; longer rows (at most
// nnz / ROW_STATS_BINS of them) are appended to the overflow list. Each block then adds its
// non-zero bins to out[7..] and its slice widths to out[5].
#include "common.cuh"

constexpr int STATS_BLOCK = 256;
constexpr int STATS_RUN = 16;   // consecutive entries per thread and turn, loaded first
constexpr int STATS_WALK = 32;  // rows walked before searching instead
constexpr int ROW_STATS_BLOCK = 256;
constexpr int ROW_STATS_UNROLL = 4;  // slices whose lengths a warp loads before using them
// 4096 bins: 16 KiB of 32-bit shared counts per block (eight blocks of 256 threads still fit
// on an SM), and an overflow list of at most nnz / 4096 rows, so the buffer the host copies
// back stays small (about 120 KB for 45M entries). 32-bit block counts suffice: the launcher
// gives every multiprocessor several blocks, so a block counts a small share of the rows, far
// below 2^32 for any indptr that fits in device memory.
constexpr int ROW_STATS_BINS = 4096;
constexpr int OUT_SLICE_WIDTHS = 5, OUT_OVERFLOW_ROWS = 6, OUT_BINS = 7;
constexpr int OUT_OVERFLOW = OUT_BINS + ROW_STATS_BINS;

// The row holding entry j: the last row r in [low, high) with indptr[r] <= j, given
// indptr[low] <= j and that row high - 1 or an earlier one holds j.
template <class I>
__device__ __forceinline__ long long row_of_entry(const I* __restrict__ indptr, long long low, long long high,
                                                  long long j) {
    while (high - low > 1) {
        const long long mid = low + (high - low) / 2;
        if (sg::ldg(indptr + mid) <= j) low = mid; else high = mid;
    }
    return low;
}

template <class I>
__global__ void __launch_bounds__(STATS_BLOCK)
csr_structure(const I* __restrict__ indptr, const I* __restrict__ indices, const I n_rows,
              unsigned long long* __restrict__ out) {
    __shared__ long long scratch[5][STATS_BLOCK / 32];
    long long below = 0, on = 0, above = 0, distance = 0, band = 0;
    const long long nnz = indptr[n_rows];
    const long long stride = (long long)gridDim.x * STATS_BLOCK * STATS_RUN;
    for (long long first = ((long long)blockIdx.x * STATS_BLOCK + threadIdx.x) * STATS_RUN; first < nnz;
         first += stride) {
        const long long count = nnz - first < STATS_RUN ? nnz - first : STATS_RUN;
        // All the run's column loads are issued before any is used: bytes in flight.
        I columns[STATS_RUN];
#pragma unroll
        for (int k = 0; k < STATS_RUN; ++k) columns[k] = k < count ? sg::ldg(indices + first + k) : I(0);
        long long row = row_of_entry(indptr, 0, (long long)n_rows, first);
        long long next = sg::ldg(indptr + row + 1);  // where `row` ends
#pragma unroll
        for (int k = 0; k < STATS_RUN; ++k) {
            if (k >= count) break;
            const long long j = first + k;
            if (next <= j) {
                int walked = 0;
                do {
                    next = sg::ldg(indptr + ++row + 1);
                } while (next <= j && ++walked < STATS_WALK);
                if (next <= j) {  // a long run of empty rows
                    row = row_of_entry(indptr, row + 1, (long long)n_rows, j);
                    next = sg::ldg(indptr + row + 1);
                }
            }
            const long long d = (long long)columns[k] - row;
            below += d < 0;
            on += d == 0;
            above += d > 0;
            const long long magnitude = d < 0 ? -d : d;
            distance += magnitude;
            band = magnitude > band ? magnitude : band;
        }
    }
    below = sg::subwarp_sum<32>(below);
    on = sg::subwarp_sum<32>(on);
    above = sg::subwarp_sum<32>(above);
    distance = sg::subwarp_sum<32>(distance);
    for (int offset = 16; offset > 0; offset /= 2) {
        const long long other = sg::shfl_down(band, offset);
        band = other > band ? other : band;
    }
    const int warp = threadIdx.x / 32;
    if (threadIdx.x % 32 == 0) {
        scratch[0][warp] = below, scratch[1][warp] = on, scratch[2][warp] = above;
        scratch[3][warp] = distance, scratch[4][warp] = band;
    }
    __syncthreads();
    if (threadIdx.x < 5) {
        long long total = 0;
        for (int w = 0; w < STATS_BLOCK / 32; ++w)
            total = threadIdx.x == 4 ? (scratch[4][w] > total ? scratch[4][w] : total) : total + scratch[threadIdx.x][w];
        if (threadIdx.x == 4) atomicMax(out + 4, (unsigned long long)total);
        else atomicAdd(out + threadIdx.x, (unsigned long long)total);
    }
}

template <class I>
__global__ void __launch_bounds__(ROW_STATS_BLOCK)
csr_row_stats(const I* __restrict__ indptr, const long long n_rows, const long long overflow_capacity,
              unsigned long long* __restrict__ out) {
    __shared__ unsigned bins[ROW_STATS_BINS];
    __shared__ unsigned long long scratch[ROW_STATS_BLOCK / 32];
    for (int b = threadIdx.x; b < ROW_STATS_BINS; b += ROW_STATS_BLOCK) bins[b] = 0;
    __syncthreads();
    const int lane = threadIdx.x % 32;
    unsigned long long slice_widths = 0;  // lane 0's sum of its warp's slice widths
    const long long stride = (long long)gridDim.x * ROW_STATS_BLOCK;
    // A warp takes ROW_STATS_UNROLL slices a stride apart per turn, loading all their lengths
    // before using any (bytes in flight). The loop and the slice test below depend on the
    // warp's first row only, so all 32 lanes run them together (the shuffles and the match
    // need them); rows past the end count as length 0.
    for (long long first = (long long)blockIdx.x * ROW_STATS_BLOCK + threadIdx.x - lane; first < n_rows;
         first += ROW_STATS_UNROLL * stride) {
        long long lengths[ROW_STATS_UNROLL];
#pragma unroll
        for (int k = 0; k < ROW_STATS_UNROLL; ++k) {
            const long long row = first + k * stride + lane;
            lengths[k] = row < n_rows ? (long long)sg::ldg(indptr + row + 1) - (long long)sg::ldg(indptr + row) : 0;
        }
#pragma unroll
        for (int k = 0; k < ROW_STATS_UNROLL; ++k) {
            const long long slice = first + k * stride;
            if (slice >= n_rows) break;
            const bool real = slice + lane < n_rows;
            const long long length = lengths[k];
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
