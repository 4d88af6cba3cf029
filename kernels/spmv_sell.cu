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
