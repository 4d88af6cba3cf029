// ELL SpMV, y = alpha * A x + beta * y, over a column-major padded layout: slot k of row r is
// at k * n_rows + r, so the 32 rows of a warp read 32 consecutive indices and values per slot
// (coalesced). Padding slots hold column -1 and trail each row's entries: the loop skips them
// without loading their values and stops at the first one.
//
// One thread per row, slots summed in order k = 0, 1, ...: bitwise reproducible run to run.
// padded_row_sum is shared with SELL-C-sigma (kernels/spmv_sell.cu), which is ELL slice by slice.
#include "common.cuh"

constexpr int ELL_BLOCK = 256;
constexpr int PADDED_UNROLL = 4;  // slots in flight per thread: four independent load chains

namespace sg {

// Sum of data[s] * x[indices[s]] over one row's slots s = first + k * stride, k < width,
// stopping at the first padding slot (column < 0).
template <class V, class I>
__device__ __forceinline__ V padded_row_sum(const I* __restrict__ indices, const V* __restrict__ data,
                                            const V* __restrict__ x, long long first, long long stride,
                                            long long width) {
    V sum = V(0);
    for (long long k = 0; k < width; k += PADDED_UNROLL) {
        I col[PADDED_UNROLL];
#pragma unroll
        for (int u = 0; u < PADDED_UNROLL; ++u)
            col[u] = k + u < width ? ldg(indices + first + (k + u) * stride) : I(-1);
#pragma unroll
        for (int u = 0; u < PADDED_UNROLL; ++u)
            if (col[u] >= 0) sum = sum + ldg(data + first + (k + u) * stride) * ldg(x + col[u]);
        if (col[PADDED_UNROLL - 1] < 0) break;  // the row's padding has begun (or its slots ended)
    }
    return sum;
}

}  // namespace sg

template <class V, class I>
__global__ void __launch_bounds__(ELL_BLOCK)
ell_spmv(const I* __restrict__ indices, const V* __restrict__ data, const long long width,
         const long long n_rows, const V* __restrict__ x, V* __restrict__ y, const V alpha, const V beta) {
    const long long row = (long long)blockIdx.x * ELL_BLOCK + threadIdx.x;
    if (row >= n_rows) return;
    const V sum = sg::padded_row_sum(indices, data, x, row, n_rows, width);
    y[row] = sg::axpby(alpha, sum, beta, y + row);
}
