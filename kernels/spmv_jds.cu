// JDS (jagged diagonal) SpMV, y = alpha * A x + beta * y. Rows are sorted by length, longest
// first (perm[i] is the row at rank i); jagged diagonal d holds entry d of every row longer
// than d, in rank order, at jd_ptr[d] .. jd_ptr[d + 1] (int64). Diagonal lengths never grow, so the
// thread of rank i stops at the first diagonal shorter than i + 1. No padding is stored.
//
// One thread per rank: a warp reads consecutive entries of each diagonal (coalesced); the
// diagonal pointers are the same for the whole warp (broadcast loads). The thread writes
// y[perm[i]]. Entries are summed in diagonal order: bitwise reproducible run to run.
#include "common.cuh"

constexpr int JDS_BLOCK = 256;
constexpr int JDS_UNROLL = 4;  // diagonals in flight per thread

template <class V, class I>
__global__ void __launch_bounds__(JDS_BLOCK)
jds_spmv(const long long* __restrict__ jd_ptr, const I* __restrict__ indices, const V* __restrict__ data,
         const I* __restrict__ perm, const long long n_rows, const long long n_diagonals,
         const V* __restrict__ x, V* __restrict__ y, const V alpha, const V beta) {
    const long long rank = (long long)blockIdx.x * JDS_BLOCK + threadIdx.x;
    if (rank >= n_rows) return;
    V sum = V(0);
    for (long long d = 0; d < n_diagonals; d += JDS_UNROLL) {
        long long slot[JDS_UNROLL];
        I col[JDS_UNROLL];
        long long start = sg::ldg(jd_ptr + d);
#pragma unroll
        for (int u = 0; u < JDS_UNROLL; ++u) {
            // Past the last diagonal, `end` repeats `start`: an empty diagonal ends the row.
            const long long end = d + u < n_diagonals ? sg::ldg(jd_ptr + d + u + 1) : start;
            slot[u] = rank < end - start ? start + rank : -1;
            start = end;
        }
#pragma unroll
        for (int u = 0; u < JDS_UNROLL; ++u) col[u] = slot[u] >= 0 ? sg::ldg(indices + slot[u]) : I(-1);
#pragma unroll
        for (int u = 0; u < JDS_UNROLL; ++u)
            if (slot[u] >= 0) sum = sum + sg::ldg(data + slot[u]) * sg::ldg(x + col[u]);
        if (slot[JDS_UNROLL - 1] < 0) break;
    }
    const I row = sg::ldg(perm + rank);
    y[row] = sg::axpby(alpha, sum, beta, y + row);
}
