// SELL-C-sigma SpMV, y = alpha * A x + beta * y. Rows are permuted (sorted by length inside
// windows of sigma rows) and cut into slices of C consecutive permuted rows; slice s is an ELL
// block of C rows and width (slice_ptr[s + 1] - slice_ptr[s]) / C, stored column-major from
// slice_ptr[s] (slot k of lane l at slice_ptr[s] + k * C + l), padding marked by column -1.
//
// One thread per permuted row: C = 32 makes a slice one warp, whose loads per slot are 32
// consecutive entries. The thread writes y[perm[rank]], undoing the permutation. Slots are
// summed in order: bitwise reproducible run to run.
#include "spmv_ell.cu"

constexpr int SELL_BLOCK = 256;  // a multiple of every C, so no slice straddles two blocks

template <class V, class I, int C>
__global__ void __launch_bounds__(SELL_BLOCK)
sell_spmv(const long long* __restrict__ slice_ptr, const I* __restrict__ indices, const V* __restrict__ data,
          const I* __restrict__ perm, const long long n_rows, const V* __restrict__ x, V* __restrict__ y,
          const V alpha, const V beta) {
    static_assert(SELL_BLOCK % C == 0, "C must divide the block");
    const long long rank = (long long)blockIdx.x * SELL_BLOCK + threadIdx.x;
    if (rank >= n_rows) return;  // the last slice's padding rows
    const long long slice = rank / C;
    const long long begin = sg::ldg(slice_ptr + slice);
    const long long width = (sg::ldg(slice_ptr + slice + 1) - begin) / C;
    const V sum = padded_row_sum(indices, data, x, begin + rank % C, (long long)C, width);
    const I row = sg::ldg(perm + rank);
    y[row] = sg::axpby(alpha, sum, beta, y + row);
}

// Slice widths times C, from the rows in rank order (perm sorted by length, longest first, inside
// windows of sigma ranks): the longest row of slice s is at its first rank or at the start of a
// window inside it, so a thread per slice reads 1 + C / sigma lengths. widths has n_slices + 1
// entries, the last 0, so its exclusive scan is slice_ptr.
template <class I>
__global__ void __launch_bounds__(SELL_BLOCK)
sell_slice_widths(const I* __restrict__ indptr, const I* __restrict__ perm, const long long n_rows,
                  const long long C, const long long sigma, const long long n_slices, long long* __restrict__ widths) {
    const long long slice = (long long)blockIdx.x * SELL_BLOCK + threadIdx.x;
    if (slice > n_slices) return;
    long long width = 0;
    if (slice < n_slices) {
        const long long first = slice * C, end = first + C < n_rows ? first + C : n_rows;
        for (long long rank = first; rank < end; rank = (rank / sigma + 1) * sigma) {
            const long long row = (long long)sg::ldg(perm + rank);
            const long long length = (long long)sg::ldg(indptr + row + 1) - (long long)sg::ldg(indptr + row);
            width = length > width ? length : width;
        }
    }
    widths[slice] = width * C;
}
