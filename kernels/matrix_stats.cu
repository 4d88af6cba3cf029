// One pass over a CSR pattern for the format advisor: where the entries sit relative to the
// diagonal. out[0] entries below it (j < i), out[1] on it, out[2] above it, out[3] the sum of
// |i - j|, out[4] the largest |i - j| (the bandwidth). Integer counts merged with integer
// atomics, so the result is exact and the same every run.
//
// Work is split by entries, not rows, so one very long row cannot hold up a thread: each warp
// takes chunks of STATS_CHUNK consecutive entries (grid-stride), finds the chunk's first row by
// binary search over indptr, and each lane walks rows forward as its entries advance.
#include "common.cuh"

constexpr int STATS_BLOCK = 256;
constexpr int STATS_CHUNK = 256;

template <class I>
__global__ void __launch_bounds__(STATS_BLOCK)
csr_structure(const I* __restrict__ indptr, const I* __restrict__ indices, const I n_rows,
              unsigned long long* __restrict__ out) {
    __shared__ long long scratch[5][STATS_BLOCK / 32];
    long long below = 0, on = 0, above = 0, distance = 0, band = 0;
    const int lane = threadIdx.x % 32;
    const long long nnz = indptr[n_rows];
    const long long warps = (long long)gridDim.x * (STATS_BLOCK / 32);
    for (long long base = ((long long)blockIdx.x * STATS_BLOCK + threadIdx.x) / 32 * STATS_CHUNK; base < nnz;
         base += warps * STATS_CHUNK) {
        // The row holding entry `base`: the last row r with indptr[r] <= base.
        long long row = 0;
        if (lane == 0) {
            long long high = n_rows;
            while (high - row > 1) {
                const long long mid = (row + high) / 2;
                if (sg::ldg(indptr + mid) <= base) row = mid; else high = mid;
            }
        }
        row = sg::shfl(row, 0);
        long long next = sg::ldg(indptr + row + 1);
        const long long end = base + STATS_CHUNK < nnz ? base + STATS_CHUNK : nnz;
        for (long long j = base + lane; j < end; j += 32) {
            while (next <= j) next = sg::ldg(indptr + ++row + 1);
            const long long d = (long long)sg::ldg(indices + j) - row;
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
    if (lane == 0) {
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
