// One PageRank step's vector work after the product y = M x (M = A^T D^-1), fused into one
// kernel (NetworkX's step, networkx.pagerank):
//   y[i] = alpha * (y[i] + dangling_sum * dangling_weights[i]) + teleport[i]
// and, in the same pass, the two sums the iteration needs next, without float atomics:
//   error            = sum |y[i] - x[i]|          (the stopping test of this step)
//   next_dangling    = sum of y[i] over the dangling vertices (this term of the next step).
// dangling_sum is read from device memory (the previous launch wrote it), so the host never
// waits between steps. The sums are grid_sums (common.cuh): thread-strided partial sums, a block
// tree, and the last block adding the block partials in block order; the grid is sized from n
// alone, so the bits do not depend on the GPU or on timing.
#include "common.cuh"

constexpr int PR_BLOCK = 256;

template <class V>
__global__ void __launch_bounds__(PR_BLOCK)
pagerank_update(V* __restrict__ y, const V* __restrict__ x, const V* __restrict__ dangling_weights,
                const V* __restrict__ teleport, const unsigned char* __restrict__ dangling, V alpha, long long n,
                const double* __restrict__ dangling_sum, double* __restrict__ partials,
                unsigned int* __restrict__ counter, double* __restrict__ error, double* __restrict__ next_dangling) {
    __shared__ double scratch[2 * (PR_BLOCK / 32)];
    const V carried = V(*dangling_sum);
    double sums[2] = {0.0, 0.0};
    const long long stride = (long long)gridDim.x * PR_BLOCK;
    for (long long i = (long long)blockIdx.x * PR_BLOCK + threadIdx.x; i < n; i += stride) {
        const V value = alpha * (y[i] + carried * dangling_weights[i]) + teleport[i];
        y[i] = value;
        sums[0] += fabs(double(value) - double(x[i]));
        if (dangling[i]) sums[1] += double(value);
    }
    if (sg::grid_sums<PR_BLOCK, 2>(sums, partials, counter, scratch) && threadIdx.x == 0) {
        *error = sums[0];
        *next_dangling = sums[1];
    }
}
