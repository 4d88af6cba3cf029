// CSR SpMV, y = alpha * A x + beta * y, adaptive to row lengths; and its semiring form,
// y[row] = S::add-fold over the row of S::mul(A[row, j], x[j]) (kernels/semiring.cuh).
//
// Rows of at most `long_row` nonzeros: a sub-warp of TPR threads per row (TPR chosen on the
// host from the row-length distribution), summed by shuffles.
// Longer rows: split into chunks of LONG_BLOCK * LONG_ITEMS nonzeros, one block per chunk,
// each writing a partial sum; csr_spmv_long_finish then adds a row's partials in chunk order.
// Every sum has a fixed order, so results are bitwise reproducible run to run.
// csr_spmv_rows can also reduce sum_row w[row] * y[row] in its epilogue (`dot` non-null; the
// host uses it only when no row is split).
//
// The semiring kernels (csr_semiring_rows, csr_spmv_long_chunks with S, csr_semiring_long_finish)
// share the row loops: one template over S, which defaults to plus-times. They add a row mask
// (rows it excludes are neither computed nor written), presence flags on x (a sparse x given
// densely) and per-row hit flags (whether any present term met the row), and take no alpha/beta.
//
// The same kernels compute the transposed product of a CSC matrix (its arrays are A^T's CSR).
#include "semiring.cuh"

inline constexpr int ROWS_BLOCK = 256;
inline constexpr int LONG_BLOCK = 256;
inline constexpr int LONG_ITEMS = 8;
inline constexpr int LONG_CHUNK = LONG_BLOCK * LONG_ITEMS;

// S::add(sum, S::mul(data[j], x[c])) for entry j of column c when c is present (`present`
// nullable), setting `found`; else sum.
template <class S, class V, class I>
__device__ __forceinline__ V fold_present(V sum, const I c, const V* __restrict__ data, const V* __restrict__ x,
                                          const I j, const unsigned char* __restrict__ present, bool& found) {
    if (!sg::present_at(present, c)) return sum;
    found = true;
    return S::add(sum, S::mul(sg::ldg(data + j), sg::ldg(x + c)));
}

// Entry j's term folded into sum; FLAGS: only when its column is present (fold_present).
template <class S, bool FLAGS, class V, class I>
__device__ __forceinline__ V fold_entry(V sum, const I* __restrict__ indices, const V* __restrict__ data,
                                        const V* __restrict__ x, const I j, const unsigned char* __restrict__ present,
                                        bool& found) {
    if constexpr (FLAGS) return fold_present<S>(sum, sg::ldg(indices + j), data, x, j, present, found);
    return S::add(sum, S::mul(sg::ldg(data + j), sg::ldg(x + sg::ldg(indices + j))));
}

// One row's fold for the lanes of its sub-warp: lane 0 gets S::add over the row's entries
// [begin, end) of S::mul(data[j], x[indices[j]]), in entry order within each lane and a fixed
// shuffle tree across lanes. FLAGS: skip entries whose column is not present (`present`
// nullable) and set `found` when any term counted.
// Four entries per step put four independent index -> x load chains in flight; the fold still
// takes them in entry order, so the result is the same as the plain loop's.
// No L2 evict-first hint on the entries: a sub-warp of TPR lanes consumes a line over several
// steps, and the hint slowed the 27-point stencil (measured on an H200, see docs/performance.md).
template <class S, int TPR, bool FLAGS, class V, class I>
__device__ __forceinline__ V csr_row_fold(const I* __restrict__ indices, const V* __restrict__ data,
                                          const V* __restrict__ x, const I begin, const I end, const int lane,
                                          const unsigned char* __restrict__ present, bool& found) {
    V sum = S::identity();
    I j = begin + lane;
    for (; j + 3 * TPR < end; j += 4 * TPR) {
        const I c0 = sg::ldg(indices + j), c1 = sg::ldg(indices + j + TPR);
        const I c2 = sg::ldg(indices + j + 2 * TPR), c3 = sg::ldg(indices + j + 3 * TPR);
        if constexpr (FLAGS) {
            const I c[4] = {c0, c1, c2, c3};
#pragma unroll
            for (int u = 0; u < 4; ++u) sum = fold_present<S>(sum, c[u], data, x, j + u * TPR, present, found);
        } else {
            const V p0 = S::mul(sg::ldg(data + j), sg::ldg(x + c0)), p1 = S::mul(sg::ldg(data + j + TPR), sg::ldg(x + c1));
            const V p2 = S::mul(sg::ldg(data + j + 2 * TPR), sg::ldg(x + c2));
            const V p3 = S::mul(sg::ldg(data + j + 3 * TPR), sg::ldg(x + c3));
            sum = S::add(S::add(S::add(S::add(sum, p0), p1), p2), p3);
        }
    }
    for (; j < end; j += TPR) sum = fold_entry<S, FLAGS>(sum, indices, data, x, j, present, found);
    return sg::subwarp_fold<TPR, S>(sum);
}

// The row this thread's sub-warp owns: [begin, end) of its entries, empty for lanes past the
// last row and for rows left to the long-row kernels (which still join the shuffles).
template <class I>
__device__ __forceinline__ bool csr_row_range(const I* __restrict__ indptr, const I row, const I n_rows,
                                              const I long_row, I& begin, I& end) {
    begin = 0, end = 0;
    if (row >= n_rows) return false;
    begin = sg::ldg(indptr + row);
    end = sg::ldg(indptr + row + 1);
    const bool owns_row = end - begin <= long_row;
    if (!owns_row) end = begin;
    return owns_row;
}

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
    I begin, end;
    const bool owns_row = csr_row_range(indptr, row, n_rows, long_row, begin, end);
    bool unused = false;
    const V sum = csr_row_fold<sg::PlusTimes<V>, TPR, false>(indices, data, x, begin, end, lane, nullptr, unused);
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

// Semiring rows: y[row] = the row's fold, for rows the mask allows (others untouched: the host
// fills or keeps them). `hit` (nullable): 1 where a present term met the row, else 0 (rows the
// mask excludes: 0).
template <class V, class I, int TPR, class S>
__global__ void __launch_bounds__(ROWS_BLOCK)
csr_semiring_rows(const I* __restrict__ indptr, const I* __restrict__ indices, const V* __restrict__ data,
                  const V* __restrict__ x, V* __restrict__ y, const I n_rows, const I long_row,
                  const unsigned char* __restrict__ mask, const int complement,
                  const unsigned char* __restrict__ present, unsigned char* __restrict__ hit) {
    const long long thread = (long long)blockIdx.x * ROWS_BLOCK + threadIdx.x;
    const I row = (I)(thread / TPR);
    const int lane = threadIdx.x % TPR;
    I begin, end;
    bool owns_row = csr_row_range(indptr, row, n_rows, long_row, begin, end);
    const bool allowed = row < n_rows && sg::mask_allows(mask, complement, row);
    if (!allowed) end = begin;  // not computed
    bool found = false;
    const V sum = csr_row_fold<S, TPR, true>(indices, data, x, begin, end, lane, present, found);
    // The sub-warp's lanes agree on whether any found a term (aligned groups of TPR lanes).
    const unsigned group = (unsigned)(threadIdx.x % 32) / TPR * TPR;
    const unsigned votes = __ballot_sync(sg::FULL_MASK, found);
    const bool any_found = ((votes >> group) & (TPR == 32 ? 0xffffffffu : ((1u << TPR) - 1u))) != 0u;
    if (lane == 0 && owns_row && allowed) y[row] = sum;
    if (lane == 0 && owns_row && hit != nullptr) hit[row] = allowed && any_found ? 1 : 0;
}

// One block's chunk of a long row: thread 0 gets the fold of the chunk's terms (the sum for
// plus-times). FLAGS: only present columns count, `found` set for any that does.
template <class S, bool FLAGS, class V, class I>
__device__ __forceinline__ V long_chunk_fold(const I* __restrict__ indptr, const I* __restrict__ indices,
                                             const V* __restrict__ data, const V* __restrict__ x,
                                             const I* __restrict__ long_rows, const I* __restrict__ chunk_first,
                                             const I* __restrict__ chunk_slot, const unsigned char* present,
                                             bool& found, V* scratch) {
    const I chunk = blockIdx.x;
    const I slot = chunk_slot[chunk];
    const I row = long_rows[slot];
    const I row_end = indptr[row + 1];
    const I begin = indptr[row] + (chunk - chunk_first[slot]) * (I)LONG_CHUNK;
    const I end = begin + LONG_CHUNK < row_end ? begin + (I)LONG_CHUNK : row_end;
    V sum = S::identity();
    for (I j = begin + threadIdx.x; j < end; j += LONG_BLOCK)
        sum = fold_entry<S, FLAGS>(sum, indices, data, x, j, present, found);
    return sg::block_fold<LONG_BLOCK, S>(sum, scratch);
}

// One block per chunk of a long row: partials[chunk] = sum of the chunk's products.
template <class V, class I>
__global__ void __launch_bounds__(LONG_BLOCK)
csr_spmv_long_chunks(const I* __restrict__ indptr, const I* __restrict__ indices, const V* __restrict__ data,
                     const V* __restrict__ x, const I* __restrict__ long_rows, const I* __restrict__ chunk_first,
                     const I* __restrict__ chunk_slot, V* __restrict__ partials) {
    __shared__ sg::uninitialised_array<V, LONG_BLOCK / 32> scratch;
    bool unused = false;
    const V sum = long_chunk_fold<sg::PlusTimes<V>, false>(indptr, indices, data, x, long_rows, chunk_first,
                                                           chunk_slot, nullptr, unused, scratch.data());
    if (threadIdx.x == 0) partials[(I)blockIdx.x] = sum;
}

// Semiring form; `chunk_hit` (nullable): 1 where any present term met the chunk, else 0.
template <class V, class I, class S>
__global__ void __launch_bounds__(LONG_BLOCK)
csr_semiring_long_chunks(const I* __restrict__ indptr, const I* __restrict__ indices, const V* __restrict__ data,
                         const V* __restrict__ x, const I* __restrict__ long_rows, const I* __restrict__ chunk_first,
                         const I* __restrict__ chunk_slot, V* __restrict__ partials,
                         const unsigned char* __restrict__ present, unsigned char* __restrict__ chunk_hit) {
    __shared__ sg::uninitialised_array<V, LONG_BLOCK / 32> scratch;
    bool found = false;
    const V sum = long_chunk_fold<S, true>(indptr, indices, data, x, long_rows, chunk_first, chunk_slot, present,
                                           found, scratch.data());
    const bool any_found = __syncthreads_or(found);
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = sum;
        if (chunk_hit != nullptr) chunk_hit[blockIdx.x] = any_found ? 1 : 0;
    }
}

// A long row's partials folded in chunk order by one warp (lane 0 gets the result).
template <class S, class V, class I>
__device__ __forceinline__ V long_row_total(const I* __restrict__ chunk_first, const V* __restrict__ partials,
                                            const long long warp, const int lane) {
    V sum = S::identity();
    for (I c = chunk_first[warp] + lane; c < chunk_first[warp + 1]; c += 32) sum = S::add(sum, partials[c]);
    return sg::subwarp_fold<32, S>(sum);
}

// One warp per long row: y[row] = alpha * (sum of its partials, in chunk order) + beta * y[row].
template <class V, class I>
__global__ void csr_spmv_long_finish(const I* __restrict__ long_rows, const I* __restrict__ chunk_first,
                                     const V* __restrict__ partials, V* __restrict__ y,
                                     const V alpha, const V beta, const I n_long) {
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (warp >= n_long) return;  // warp-uniform exit
    const V sum = long_row_total<sg::PlusTimes<V>>(chunk_first, partials, warp, lane);
    if (lane == 0) {
        const I row = long_rows[warp];
        y[row] = sg::axpby(alpha, sum, beta, y + row);
    }
}

// Semiring form: y[row] = the fold of its partials, for long rows the mask allows; `hit`
// (nullable) from the chunks' flags (`chunk_hit`).
template <class V, class I, class S>
__global__ void csr_semiring_long_finish(const I* __restrict__ long_rows, const I* __restrict__ chunk_first,
                                         const V* __restrict__ partials, V* __restrict__ y, const I n_long,
                                         const unsigned char* __restrict__ mask, const int complement,
                                         const unsigned char* __restrict__ chunk_hit,
                                         unsigned char* __restrict__ hit) {
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (warp >= n_long) return;  // warp-uniform exit
    const V sum = long_row_total<S>(chunk_first, partials, warp, lane);
    bool found = false;
    if (chunk_hit != nullptr)
        for (I c = chunk_first[warp] + lane; c < chunk_first[warp + 1]; c += 32) found = found || chunk_hit[c] != 0;
    const bool any_found = __any_sync(sg::FULL_MASK, found);
    if (lane == 0) {
        const I row = long_rows[warp];
        const bool allowed = sg::mask_allows(mask, complement, row);
        if (allowed) y[row] = sum;
        if (hit != nullptr) hit[row] = allowed && any_found ? 1 : 0;
    }
}
