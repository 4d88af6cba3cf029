// CSR SpMV, y = alpha * A x + beta * y, adaptive to row lengths.
//
// Rows of at most `long_row` nonzeros: a sub-warp of TPR threads per row (TPR chosen on the
// host from the row-length distribution), summed by shuffles.
// Longer rows: split into chunks of LONG_BLOCK * LONG_ITEMS nonzeros, one block per chunk,
// each writing a partial sum; csr_spmv_long_finish then adds a row's partials in chunk order.
// Every sum has a fixed order, so results are bitwise reproducible run to run.
// csr_spmv_rows can also reduce sum_row w[row] * y[row] in its epilogue (`dot` non-null; the
// host uses it only when no row is split).
//
// The same kernels compute the transposed product of a CSC matrix (its arrays are A^T's CSR).
#include "common.cuh"

inline constexpr int ROWS_BLOCK = 256;
inline constexpr int LONG_BLOCK = 256;
inline constexpr int LONG_ITEMS = 8;
inline constexpr int LONG_CHUNK = LONG_BLOCK * LONG_ITEMS;

// With `dot` non-null, also *dot = sum over owned rows of w[row] * y[row] (the y written here,
// in float64), reduced deterministically (sg::grid_sums; `partials` one double per block). y is
// computed exactly as without it. Real V only (the host checks).
template <class V, class I, int TPR>
__global__ void __launch_bounds__(ROWS_BLOCK)
csr_spmv_rows(const I* __restrict__ indptr, const I* __restrict__ indices, const V* __restrict__ data,
              const V* __restrict__ x, V* __restrict__ y, const V alpha, const V beta,
              const I n_rows, const I long_row,
              const V* __restrict__ w, double* dot, double* partials, unsigned int* counter) {
    const long long thread = (long long)blockIdx.x * ROWS_BLOCK + threadIdx.x;
    const I row = (I)(thread / TPR);
    const int lane = threadIdx.x % TPR;
    // Lanes past the last row, and rows left to the long-row kernels, still join the shuffles.
    I begin = 0, end = 0;
    bool owns_row = false;
    if (row < n_rows) {
        begin = sg::ldg(indptr + row);
        end = sg::ldg(indptr + row + 1);
        owns_row = end - begin <= long_row;
        if (!owns_row) end = begin;
    }
    V sum = V(0);
    I j = begin + lane;
    // Four entries per step put four independent index -> x load chains in flight; the sum
    // still adds them in entry order, so the result is the same as the plain loop's.
    // No L2 evict-first hint on the entries: a sub-warp of TPR lanes consumes a line over several
    // steps, and the hint slowed the 27-point stencil (measured on an H200, see docs/performance.md).
    for (; j + 3 * TPR < end; j += 4 * TPR) {
        const I c0 = sg::ldg(indices + j), c1 = sg::ldg(indices + j + TPR);
        const I c2 = sg::ldg(indices + j + 2 * TPR), c3 = sg::ldg(indices + j + 3 * TPR);
        const V p0 = sg::ldg(data + j) * sg::ldg(x + c0), p1 = sg::ldg(data + j + TPR) * sg::ldg(x + c1);
        const V p2 = sg::ldg(data + j + 2 * TPR) * sg::ldg(x + c2), p3 = sg::ldg(data + j + 3 * TPR) * sg::ldg(x + c3);
        sum = sum + p0 + p1 + p2 + p3;
    }
    for (; j < end; j += TPR) sum = sum + sg::ldg(data + j) * sg::ldg(x + sg::ldg(indices + j));
    sum = sg::subwarp_sum<TPR>(sum);
    double term[1] = {0.0};
    if (lane == 0 && owns_row) {
        const V out = sg::axpby(alpha, sum, beta, y + row);
        y[row] = out;
        if (dot != nullptr) term[0] = sg::dot_term(sg::ldg(w + row), out);
    }
    if (dot == nullptr) return;  // uniform across the grid
    __shared__ double scratch[ROWS_BLOCK / 32];
    if (sg::grid_sums<ROWS_BLOCK, 1>(term, partials, counter, scratch) && threadIdx.x == 0) *dot = term[0];
}

// One block per chunk of a long row: partials[chunk] = sum of the chunk's products.
template <class V, class I>
__global__ void __launch_bounds__(LONG_BLOCK)
csr_spmv_long_chunks(const I* __restrict__ indptr, const I* __restrict__ indices, const V* __restrict__ data,
                     const V* __restrict__ x, const I* __restrict__ long_rows, const I* __restrict__ chunk_first,
                     const I* __restrict__ chunk_slot, V* __restrict__ partials) {
    __shared__ sg::uninitialised_array<V, LONG_BLOCK / 32> scratch;
    const I chunk = blockIdx.x;
    const I slot = chunk_slot[chunk];
    const I row = long_rows[slot];
    const I row_end = indptr[row + 1];
    const I begin = indptr[row] + (chunk - chunk_first[slot]) * (I)LONG_CHUNK;
    const I end = begin + LONG_CHUNK < row_end ? begin + (I)LONG_CHUNK : row_end;
    V sum = V(0);
    for (I j = begin + threadIdx.x; j < end; j += LONG_BLOCK) sum = sum + sg::ldg(data + j) * sg::ldg(x + sg::ldg(indices + j));
    sum = sg::block_sum<LONG_BLOCK>(sum, scratch.data());
    if (threadIdx.x == 0) partials[chunk] = sum;
}

// One warp per long row: y[row] = alpha * (sum of its partials, in chunk order) + beta * y[row].
template <class V, class I>
__global__ void csr_spmv_long_finish(const I* __restrict__ long_rows, const I* __restrict__ chunk_first,
                                     const V* __restrict__ partials, V* __restrict__ y,
                                     const V alpha, const V beta, const I n_long) {
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (warp >= n_long) return;  // warp-uniform exit
    V sum = V(0);
    for (I c = chunk_first[warp] + lane; c < chunk_first[warp + 1]; c += 32) sum = sum + partials[c];
    sum = sg::subwarp_sum<32>(sum);
    if (lane == 0) {
        const I row = long_rows[warp];
        y[row] = sg::axpby(alpha, sum, beta, y + row);
    }
}
