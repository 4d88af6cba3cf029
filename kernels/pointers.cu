// Rows from pointers (sparsegpu.primitives.expand_pointers): each non-empty row writes its number at
// its first entry of an array preset to -1 (a driver memset); an inclusive max-scan then carries it
// over the row. Line lengths from pointers (sparsegpu.primitives.line_lengths): a thread per line.
#include "common.cuh"

inline constexpr int POINTERS_BLOCK = 256;

template <class I>
__global__ void __launch_bounds__(POINTERS_BLOCK)
mark_row_starts(const I* __restrict__ indptr, const long long n_major, const long long nnz, I* __restrict__ marks) {
    const long long r = (long long)blockIdx.x * POINTERS_BLOCK + threadIdx.x;
    if (r >= n_major) return;
    const I start = indptr[r], end = indptr[r + 1];
    // Checked, so pointers that are not monotone never write out of bounds.
    if (end > start && start >= 0 && start < nnz) marks[start] = (I)r;
}

template <class I>
__global__ void __launch_bounds__(POINTERS_BLOCK)
line_lengths(const I* __restrict__ indptr, const long long n_major, I* __restrict__ lengths) {
    const long long r = (long long)blockIdx.x * POINTERS_BLOCK + threadIdx.x;
    if (r < n_major) lengths[r] = indptr[r + 1] - indptr[r];
}
