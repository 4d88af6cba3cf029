// CSC SpMV by scatter: y[indices[j]] += alpha * data[j] * x[col] for every column, with atomic
// adds into a y the caller has already scaled by beta. The order of the adds varies between
// runs, so results are NOT bitwise reproducible; the library uses this kernel only when the
// `deterministic` option is off (otherwise it gathers over a cached CSR copy instead).
//
// The same kernel computes the transposed product of a CSR matrix.
#include "common.cuh"

inline constexpr int SCATTER_BLOCK = 256;

template <class V, class I, int TPC>
__global__ void __launch_bounds__(SCATTER_BLOCK)
csc_spmv_scatter(const I* __restrict__ indptr, const I* __restrict__ indices, const V* __restrict__ data,
                 const V* __restrict__ x, V* __restrict__ y, const V alpha, const I n_cols) {
    const long long thread = (long long)blockIdx.x * SCATTER_BLOCK + threadIdx.x;
    const I col = (I)(thread / TPC);
    if (col >= n_cols) return;  // no shuffles below, so lanes may leave independently
    const V ax = sg::scaled(alpha, sg::ldg(x + col));
    const I end = sg::ldg(indptr + col + 1);
    for (I j = sg::ldg(indptr + col) + (I)(thread % TPC); j < end; j += TPC)
        sg::atomic_add(y + sg::ldg(indices + j), ax * sg::ldg(data + j));
}
