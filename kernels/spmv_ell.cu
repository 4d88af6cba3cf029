// ELL SpMV, y = alpha * A x + beta * y, over a column-major padded layout: slot k of row r is
// at k * n_rows + r, so the 32 rows of a warp read 32 consecutive indices and values per slot
// (coalesced). Padding slots hold column -1 and trail each row's entries: the loop skips them
// without loading their values and stops at the first one.
//
// One thread per row, slots summed in order k = 0, 1, ...: bitwise reproducible run to run.
// The row loop is a template over a semiring S (kernels/semiring.cuh, default plus-times);
// ell_semiring_spmv runs it for other semirings, with an optional row mask.
// Optionally a dot product of the result with a vector in the epilogue (CG's p.Ap).
// padded_row_sum is shared with SELL-C-sigma (kernels/spmv_sell.cu), which is ELL slice by slice.
//
// csr_to_slots builds the ELL, SELL-C-sigma and JDS layouts (and HYB's ELL part) from a CSR in
// one pass: one thread per rank copies its row's entries to their slots and writes the padding.
#include "semiring.cuh"

inline constexpr int ELL_BLOCK = 256;
inline constexpr int PADDED_UNROLL = 4;  // slots in flight per thread: four independent load chains

// Sum of data[s] * x[indices[s]] over one row's slots s = first + k * stride, k < width,
// stopping at the first padding slot (column < 0); for a semiring S, the S::add-fold of
// S::mul(data[s], x[indices[s]]) in the same order.
template <class V, class I, class S = sg::PlusTimes<V>>
__device__ __forceinline__ V padded_row_sum(const I* __restrict__ indices, const V* __restrict__ data,
                                            const V* __restrict__ x, long long first, long long stride,
                                            long long width) {
    // The slots are read once: evict-first keeps them from pushing x (and a y the next kernel
    // reads, as in CG) out of L2.
    const unsigned long long read_once = sg::l2_evict_first();
    V sum = S::identity();
    for (long long k = 0; k < width; k += PADDED_UNROLL) {
        I col[PADDED_UNROLL];
#pragma unroll
        for (int u = 0; u < PADDED_UNROLL; ++u)
            col[u] = k + u < width ? sg::load_hint(indices + first + (k + u) * stride, read_once) : I(-1);
#pragma unroll
        for (int u = 0; u < PADDED_UNROLL; ++u)
            if (col[u] >= 0) sum = S::add(sum, S::mul(sg::load_hint(data + first + (k + u) * stride, read_once), sg::ldg(x + col[u])));
        if (col[PADDED_UNROLL - 1] < 0) break;  // the row's padding has begun (or its slots ended)
    }
    return sum;
}

// Grid-stride over rows. Without a dot the host gives a thread per row; with one, at most one
// wave of resident blocks (ELL_BLOCKS_PER_SM in sparsegpu/formats/ell.py), so a block's reduction, fence and ticket (which hold its slot on the
// multiprocessor while no loads are in flight) are paid once per wave, not per 256 rows. Each
// row is one thread's in-order sum either way.
//
// With `dot` non-null, also *dot = sum_r w[r] * y[r] (the y written here, in float64; w may be
// x itself: CG's p.Ap), reduced deterministically (each thread's rows in order, then
// sg::grid_sums over `partials`, one double per block, and `counter`; the grid size is a
// function of the row count and the device only, so the association is fixed). y is computed
// exactly as without it. Real V only (the host checks).
template <class V, class I>
__global__ void __launch_bounds__(ELL_BLOCK)
ell_spmv(const I* __restrict__ indices, const V* __restrict__ data, const long long width,
         const long long n_rows, const V* __restrict__ x, V* __restrict__ y, const V alpha, const V beta,
         const V* __restrict__ w, double* dot, double* partials, unsigned int* counter) {
    double term[1] = {0.0};
    // No early return: with a dot, every thread joins the block reduction.
    for (long long row = (long long)blockIdx.x * ELL_BLOCK + threadIdx.x; row < n_rows;
         row += (long long)gridDim.x * ELL_BLOCK) {
        const V sum = padded_row_sum(indices, data, x, row, n_rows, width);
        const V out = sg::axpby(alpha, sum, beta, y + row);
        y[row] = out;
        if (dot != nullptr) term[0] += sg::dot_term(sg::ldg(w + row), out);
    }
    if (dot == nullptr) return;  // uniform across the grid
    __shared__ double scratch[ELL_BLOCK / 32];
    if (sg::grid_sums<ELL_BLOCK, 1>(term, partials, counter, scratch) && threadIdx.x == 0) *dot = term[0];
}

// Semiring form: y[row] = the row's fold for rows the mask allows (others untouched).
template <class V, class I, class S>
__global__ void __launch_bounds__(ELL_BLOCK)
ell_semiring_spmv(const I* __restrict__ indices, const V* __restrict__ data, const long long width,
                  const long long n_rows, const V* __restrict__ x, V* __restrict__ y,
                  const unsigned char* __restrict__ mask, const int complement) {
    const long long row = (long long)blockIdx.x * ELL_BLOCK + threadIdx.x;
    if (row >= n_rows || !sg::mask_allows(mask, complement, row)) return;
    y[row] = padded_row_sum<V, I, S>(indices, data, x, row, n_rows, width);
}

// Where csr_to_slots puts slot k of the row at `rank` (perm[rank]; the identity for ELL):
// LAYOUT_ELL: rank + k * n_rows, for k < width; entries past width are left out (HYB sends them
//   to its COO part).
// LAYOUT_SELL: offsets[rank / C] + k * C + rank % C, for k below the slice's width
//   (offsets[s + 1] - offsets[s]) / C.
// LAYOUT_JDS: offsets[k] + rank, for k below the row's length (no padding).
inline constexpr int LAYOUT_ELL = 0;
inline constexpr int LAYOUT_SELL = 1;
inline constexpr int LAYOUT_JDS = 2;

// Every slot of the layout is written (padding: column -1, value 0), so the outputs need no
// initialisation. n_ranks threads: n_rows, or for SELL every lane of every slice (the last
// slice's lanes past n_rows write padding only). Each slot is written by one thread, once.
template <class V, class I, int LAYOUT>
__global__ void __launch_bounds__(ELL_BLOCK)
csr_to_slots(const I* __restrict__ indptr, const I* __restrict__ indices, const V* __restrict__ data,
             const I* __restrict__ perm, const long long* __restrict__ offsets, const long long C,
             const long long width, const long long n_rows, const long long n_ranks,
             I* __restrict__ out_indices, V* __restrict__ out_data) {
    const long long rank = (long long)blockIdx.x * ELL_BLOCK + threadIdx.x;
    if (rank >= n_ranks) return;
    long long begin = 0, length = 0;
    if (rank < n_rows) {
        const I row = LAYOUT == LAYOUT_ELL ? (I)rank : sg::ldg(perm + rank);
        begin = sg::ldg(indptr + row);
        length = sg::ldg(indptr + row + 1) - begin;
    }
    long long first = rank, stride = n_rows, slots = width;
    if (LAYOUT == LAYOUT_SELL) {
        const long long slice = rank / C;
        first = sg::ldg(offsets + slice) + rank % C;
        stride = C;
        slots = (sg::ldg(offsets + slice + 1) - sg::ldg(offsets + slice)) / C;
    }
    if (LAYOUT == LAYOUT_JDS) slots = length;
    for (long long k = 0; k < slots; ++k) {
        const long long slot = LAYOUT == LAYOUT_JDS ? sg::ldg(offsets + k) + rank : first + k * stride;
        const bool stored = k < length;
        out_indices[slot] = stored ? sg::ldg(indices + begin + k) : I(-1);
        out_data[slot] = stored ? sg::ldg(data + begin + k) : V(0);
    }
}
