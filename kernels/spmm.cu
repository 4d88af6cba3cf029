// SpMM, Y = alpha * A X + beta * Y, for a dense X of k columns, over CSR, ELL and SELL-C-sigma.
//
// X and Y are addressed by element strides (row stride, column stride), so any NumPy or CuPy
// layout is read and written where it lies, without copies. Two families of kernels:
//
// Row-major X (column stride 1: C order), the *_rows kernels. A group of G lanes (a power of
// two, at most a warp) owns a row; each lane owns TILES chunks of VEC consecutive columns
// (chunk t of lane l starts at column (t * G + l) * VEC of the panel), so one pass over the
// row's entries updates up to G * VEC * TILES columns: every entry of A is read once for all
// of them (wider k loops over panels). The group loads G entries at a time, one per lane, and
// passes each to the others by shuffles (GE-SpMM's coalesced row caching, Huang et al., SC'20);
// each lane then reads X[col, chunk] with one vector load (VECTOR: 16 bytes; the host checks the
// alignment of X and Y and the unit column strides) and adds the product into its accumulators.
// Each output element is the sum of its row's terms in entry order: bitwise reproducible.
//
// Column-major X (row stride 1: F order), the *_cols kernels. A block's threads cover rows as
// SpMV does, a sub-warp of TPR lanes per row (CSR), one thread per row (ELL, SELL); the grid's
// y dimension walks tiles of TILE columns, so each entry of A is read once per tile and the TILE
// gathers X[col, c] of an entry are independent loads. Rows of a warp write Y[row, c] side by
// side (coalesced for F-order Y). Sub-warp sums use a fixed shuffle tree: reproducible too.
//
// Long rows (CSR): a row longer than `long_row` entries is left by both kernels and cut by the
// host into segments of at most that many entries. The same kernels then run over the segments
// as rows of their own (`indptr` the segment starts, `ends` their ends), writing each segment's
// sums to a row of `partials`; csr_spmm_finish adds a row's segments in order and writes Y. So a
// power-law hub is summed by many groups at once, still in a fixed order.
//
// Staging (dense_transpose): for a column-major X on a matrix whose columns are scattered, the host
// copies X into a row-major scratch and runs the *_rows kernels (see
// sparsegpu/formats/_spmm_device.py for the rule); a row-major Y scratch is copied back the same
// way, with alpha and beta applied there.
//
// The NumPy references are sparsegpu/reference/spmm.py (same layouts, same arguments).
#include "common.cuh"

inline constexpr int SPMM_BLOCK = 256;

// ---------------------------------------------------------------- vector access along k
// VEC values of V as one 16-byte load or store (VECTOR), else one value at a time.
template <class V> struct spmm_vector { static constexpr int width = 1; };
template <> struct spmm_vector<float> { static constexpr int width = 4; using type = float4; };
template <> struct spmm_vector<double> { static constexpr int width = 2; using type = double2; };
template <> struct spmm_vector<sg::complex<float>> { static constexpr int width = 2; using type = float4; };

template <class V, bool VECTOR> inline constexpr int spmm_width = VECTOR ? spmm_vector<V>::width : 1;

template <class V, int VEC>
__device__ __forceinline__ void load_chunk(const V* __restrict__ p, V (&out)[VEC]) {
    if constexpr (VEC == 1) {
        out[0] = sg::ldg(p);
    } else {
        using T = typename spmm_vector<V>::type;
        const T v = __ldg(reinterpret_cast<const T*>(p));
        static_assert(sizeof(T) == VEC * sizeof(V), "a chunk is one 16-byte vector");
        const V* parts = reinterpret_cast<const V*>(&v);
#pragma unroll
        for (int u = 0; u < VEC; ++u) out[u] = parts[u];
    }
}

// Shuffle within aligned groups of `width` lanes whose lanes are `mask` (only the group's lanes
// take part: groups of one warp loop over rows of different lengths).
template <class V> __device__ __forceinline__ V group_shfl(unsigned mask, V v, int src, int width) {
    return __shfl_sync(mask, v, src, width);
}
template <class T>
__device__ __forceinline__ sg::complex<T> group_shfl(unsigned mask, sg::complex<T> v, int src, int width) {
    return sg::complex<T>(__shfl_sync(mask, v.re, src, width), __shfl_sync(mask, v.im, src, width));
}

// The lanes of this thread's aligned group of G lanes, as a shuffle mask.
template <int G> __device__ __forceinline__ unsigned group_mask() {
    if constexpr (G == 32) {
        return sg::FULL_MASK;
    } else {
        return ((1u << G) - 1u) << ((threadIdx.x % 32) / G * G);
    }
}

// out = alpha * sum + beta * out, reading out only when beta is nonzero.
template <class V> __device__ __forceinline__ void store_axpby(V* p, V alpha, V sum, V beta) {
    *p = sg::is_zero(beta) ? sg::scaled(alpha, sum) : sg::scaled(alpha, sum) + beta * *p;
}

// A group's accumulators for one panel of columns: TILES chunks of VEC values per lane.
template <class V, int G, int VEC, int TILES> struct RowPanel {
    V acc[TILES][VEC];
    long long first[TILES];  // first column of each chunk (past k: not this lane's)

    __device__ __forceinline__ RowPanel(long long panel, int lane) {
#pragma unroll
        for (int t = 0; t < TILES; ++t) {
            first[t] = panel + ((long long)t * G + lane) * VEC;
#pragma unroll
            for (int u = 0; u < VEC; ++u) acc[t][u] = V(0);
        }
    }

    // acc += value * X[col, chunk] for the lane's chunks that lie below k.
    __device__ __forceinline__ void add(V value, long long col, const V* __restrict__ X, long long x_row,
                                        long long x_col, long long k) {
#pragma unroll
        for (int t = 0; t < TILES; ++t) {
            if (first[t] >= k) continue;
            V x[VEC];
            if constexpr (VEC > 1) {
                load_chunk<V, VEC>(X + col * x_row + first[t], x);
            } else {
                x[0] = sg::ldg(X + col * x_row + first[t] * x_col);
            }
#pragma unroll
            for (int u = 0; u < VEC; ++u) acc[t][u] = acc[t][u] + value * x[u];
        }
    }

    // Y[row, chunk] = alpha * acc + beta * Y[row, chunk] for the lane's chunks below k.
    __device__ __forceinline__ void store(V* __restrict__ Y, long long row, long long y_row, long long y_col,
                                          long long k, V alpha, V beta) const {
#pragma unroll
        for (int t = 0; t < TILES; ++t) {
            if (first[t] >= k) continue;
            if constexpr (VEC > 1) {
                using T = typename spmm_vector<V>::type;
                T* p = reinterpret_cast<T*>(Y + row * y_row + first[t]);
                T old = sg::is_zero(beta) ? T{} : *p;
                V* parts = reinterpret_cast<V*>(&old);
#pragma unroll
                for (int u = 0; u < VEC; ++u)
                    parts[u] = sg::is_zero(beta) ? sg::scaled(alpha, acc[t][u])
                                                 : sg::scaled(alpha, acc[t][u]) + beta * parts[u];
                *p = old;
            } else {
                store_axpby(Y + row * y_row + first[t] * y_col, alpha, acc[t][0], beta);
            }
        }
    }
};

// ---------------------------------------------------------------- CSR, row-major X
// A group of G lanes per row; panels of G * VEC * TILES columns. Grid: ceil(n_rows * G /
// SPMM_BLOCK) blocks. Groups past the last row exit as a whole (their lanes form whole groups).
// Row r's entries: [indptr[r], ends[r]) when `ends` is given (segments), else
// [indptr[r], indptr[r + 1]).
template <class I>
__device__ __forceinline__ void row_range(const I* __restrict__ indptr, const I* __restrict__ ends, long long row,
                                          I& begin, I& end) {
    begin = sg::ldg(indptr + row);
    end = ends != nullptr ? sg::ldg(ends + row) : sg::ldg(indptr + row + 1);
}

template <class V, class I, int G, int TILES, bool VECTOR>
__global__ void __launch_bounds__(SPMM_BLOCK)
csr_spmm_rows(const I* __restrict__ indptr, const I* __restrict__ ends, const I* __restrict__ indices,
              const V* __restrict__ data, const V* __restrict__ X, const long long x_row, const long long x_col,
              V* __restrict__ Y, const long long y_row, const long long y_col,
              const long long k, const V alpha, const V beta, const long long n_rows, const long long long_row) {
    constexpr int VEC = spmm_width<V, VECTOR>;
    const long long row = ((long long)blockIdx.x * SPMM_BLOCK + threadIdx.x) / G;
    if (row >= n_rows) return;  // the whole group leaves together
    const int lane = threadIdx.x % G;
    const unsigned mask = group_mask<G>();
    I begin, end;
    row_range(indptr, ends, row, begin, end);
    if (end - begin > long_row) return;  // a long row: its segments are summed apart
    for (long long panel = 0; panel < k; panel += (long long)G * VEC * TILES) {
        RowPanel<V, G, VEC, TILES> out(panel, lane);
        for (I base = begin; base < end; base += G) {
            // One entry per lane, then each of the group's entries in turn to every lane.
            const I mine = base + lane;
            const I col = mine < end ? sg::ldg(indices + mine) : I(0);
            const V value = mine < end ? sg::ldg(data + mine) : V(0);
            const int count = end - base < G ? (int)(end - base) : G;
            for (int e = 0; e < count; ++e) {
                const I c = group_shfl(mask, col, e, G);
                const V v = group_shfl(mask, value, e, G);
                out.add(v, (long long)c, X, x_row, x_col, k);
            }
        }
        out.store(Y, row, y_row, y_col, k, alpha, beta);
    }
}

// ---------------------------------------------------------------- CSR, column-major X
// A sub-warp of TPR lanes per row, as the SpMV kernel: lane l takes entries begin + l,
// begin + l + TPR, ... and keeps TILE sums, one per column of the block's tile (blockIdx.y);
// the lanes' sums are then added by a fixed shuffle tree. Rows are not split: the host sizes
// TPR from the mean row length.
template <class V, class I, int TPR, int TILE>
__global__ void __launch_bounds__(SPMM_BLOCK)
csr_spmm_cols(const I* __restrict__ indptr, const I* __restrict__ ends, const I* __restrict__ indices,
              const V* __restrict__ data, const V* __restrict__ X, const long long x_row, const long long x_col,
              V* __restrict__ Y, const long long y_row, const long long y_col,
              const long long k, const V alpha, const V beta, const long long n_rows, const long long long_row) {
    const long long row = ((long long)blockIdx.x * SPMM_BLOCK + threadIdx.x) / TPR;
    const int lane = threadIdx.x % TPR;
    const long long first = (long long)blockIdx.y * TILE;
    I begin = 0, end = 0;
    bool owns_row = row < n_rows;
    if (owns_row) row_range(indptr, ends, row, begin, end);
    if (end - begin > long_row) {  // a long row: summed apart; its lanes still join the shuffles
        owns_row = false;
        end = begin;
    }
    V sum[TILE];
#pragma unroll
    for (int t = 0; t < TILE; ++t) sum[t] = V(0);
    for (I j = begin + lane; j < end; j += TPR) {
        const long long col = (long long)sg::ldg(indices + j);
        const V value = sg::ldg(data + j);
        const V* x = X + col * x_row + first * x_col;
#pragma unroll
        for (int t = 0; t < TILE; ++t)
            if (first + t < k) sum[t] = sum[t] + value * sg::ldg(x + t * x_col);
    }
#pragma unroll
    for (int t = 0; t < TILE; ++t) sum[t] = sg::subwarp_sum<TPR>(sum[t]);
    if (lane != 0 || !owns_row) return;
#pragma unroll
    for (int t = 0; t < TILE; ++t)
        if (first + t < k) store_axpby(Y + row * y_row + (first + t) * y_col, alpha, sum[t], beta);
}

// ---------------------------------------------------------------- long rows' segments
// Y[row, c] = alpha * (sum of the row's segment sums, in segment order) + beta * Y[row, c] for
// long row i = blockIdx.x (rows[i]; segments seg_first[i] .. seg_first[i + 1] - 1, segment s's
// sums in partials[s * p_row + c * p_col]), a thread per column c (grid y walks the columns).
template <class V, class I>
__global__ void __launch_bounds__(SPMM_BLOCK)
csr_spmm_finish(const I* __restrict__ rows, const I* __restrict__ seg_first, const V* __restrict__ partials,
                const long long p_row, const long long p_col, V* __restrict__ Y, const long long y_row,
                const long long y_col, const long long k, const V alpha, const V beta) {
    const long long i = blockIdx.x;
    const long long c = (long long)blockIdx.y * SPMM_BLOCK + threadIdx.x;
    if (c >= k) return;
    V sum = V(0);
    for (I s = seg_first[i]; s < seg_first[i + 1]; ++s) sum = sum + partials[s * p_row + c * p_col];
    store_axpby(Y + (long long)rows[i] * y_row + c * y_col, alpha, sum, beta);
}

// ---------------------------------------------------------------- ELL and SELL-C-sigma
// A padded row: slot j of the row at rank `rank` is at first + j * stride, j < width, its
// padding (column -1) trailing its entries. ELL (slice_ptr null): rank = row, first = row,
// stride = n_rows, width = the layout's. SELL (direct layouts: no split slices, no hot
// columns): rank s * C + l is lane l of slice s, first = slice_ptr[s] + l, stride = C, width =
// (slice_ptr[s + 1] - slice_ptr[s]) / C, row = perm[rank].
template <class I> struct PaddedRow {
    long long first, stride, width, row;

    __device__ __forceinline__ PaddedRow(long long rank, const long long* __restrict__ slice_ptr,
                                         const I* __restrict__ perm, long long C, long long ell_width,
                                         long long n_rows) {
        if (slice_ptr == nullptr) {
            first = rank, stride = n_rows, width = ell_width, row = rank;
        } else {
            const long long slice = rank / C, begin = sg::ldg(slice_ptr + slice);
            first = begin + rank % C, stride = C, width = (sg::ldg(slice_ptr + slice + 1) - begin) / C;
            row = sg::ldg(perm + rank);
        }
    }
};

// Row-major X: a group of G lanes per padded row, as csr_spmm_rows, every lane reading the
// row's slot itself (the group's lanes read one address; the warp's groups, neighbouring ranks,
// read neighbouring slots). The walk stops at the row's first padding slot.
template <class V, class I, int G, int TILES, bool VECTOR>
__global__ void __launch_bounds__(SPMM_BLOCK)
padded_spmm_rows(const I* __restrict__ indices, const V* __restrict__ data, const long long* __restrict__ slice_ptr,
                 const I* __restrict__ perm, const long long C, const long long ell_width,
                 const V* __restrict__ X, const long long x_row, const long long x_col,
                 V* __restrict__ Y, const long long y_row, const long long y_col,
                 const long long k, const V alpha, const V beta, const long long n_rows) {
    constexpr int VEC = spmm_width<V, VECTOR>;
    const long long rank = ((long long)blockIdx.x * SPMM_BLOCK + threadIdx.x) / G;
    if (rank >= n_rows) return;  // the whole group leaves together
    const int lane = threadIdx.x % G;
    const PaddedRow<I> at(rank, slice_ptr, perm, C, ell_width, n_rows);
    for (long long panel = 0; panel < k; panel += (long long)G * VEC * TILES) {
        RowPanel<V, G, VEC, TILES> out(panel, lane);
        for (long long j = 0; j < at.width; ++j) {
            const long long slot = at.first + j * at.stride;
            const I col = sg::ldg(indices + slot);
            if (col < 0) break;  // padding from here on
            out.add(sg::ldg(data + slot), (long long)col, X, x_row, x_col, k);
        }
        out.store(Y, at.row, y_row, y_col, k, alpha, beta);
    }
}

// Column-major X: a thread per padded row and TILE columns of the block's tile (blockIdx.y).
template <class V, class I, int TILE>
__global__ void __launch_bounds__(SPMM_BLOCK)
padded_spmm_cols(const I* __restrict__ indices, const V* __restrict__ data, const long long* __restrict__ slice_ptr,
                 const I* __restrict__ perm, const long long C, const long long ell_width,
                 const V* __restrict__ X, const long long x_row, const long long x_col,
                 V* __restrict__ Y, const long long y_row, const long long y_col,
                 const long long k, const V alpha, const V beta, const long long n_rows) {
    const long long rank = (long long)blockIdx.x * SPMM_BLOCK + threadIdx.x;
    if (rank >= n_rows) return;
    const long long first = (long long)blockIdx.y * TILE;
    const PaddedRow<I> at(rank, slice_ptr, perm, C, ell_width, n_rows);
    V sum[TILE];
#pragma unroll
    for (int t = 0; t < TILE; ++t) sum[t] = V(0);
    for (long long j = 0; j < at.width; ++j) {
        const long long slot = at.first + j * at.stride;
        const I col = sg::ldg(indices + slot);
        if (col < 0) break;
        const V value = sg::ldg(data + slot);
        const V* x = X + (long long)col * x_row + first * x_col;
#pragma unroll
        for (int t = 0; t < TILE; ++t)
            if (first + t < k) sum[t] = sum[t] + value * sg::ldg(x + t * x_col);
    }
#pragma unroll
    for (int t = 0; t < TILE; ++t)
        if (first + t < k) store_axpby(Y + at.row * y_row + (first + t) * y_col, alpha, sum[t], beta);
}

// ---------------------------------------------------------------- dense transpose (staging)
// dst(r, c) = alpha * src(r, c) + beta * dst(r, c) over a rows x cols matrix, src(r, c) at
// src[r * s_r + c * s_c] and dst(r, c) at dst[r * d_r + c * d_c] (element strides): a change of
// layout between an array contiguous along r (s_r = 1) and one contiguous along c (d_c = 1).
// A block of 32 x 8 threads moves one 32 x 32 tile through shared memory: it reads the tile with
// consecutive lanes on consecutive r and writes it with consecutive lanes on consecutive c, so
// both sides are coalesced; the tile's rows are padded to 33 values, so reading it across is
// free of bank conflicts (for 4-, 8- and 16-byte values). Grid: one block per tile, tile t at
// (t % tiles along r, t / tiles along r). With alpha one and beta zero it is a plain copy; the
// update is the one the *_rows kernels make (store_axpby), so a staged product's Y equals theirs
// bit for bit.
inline constexpr int TRANSPOSE_TILE = 32;
inline constexpr int TRANSPOSE_STEPS = 8;  // rows of threads: each thread moves 4 values of a tile

template <class V>
__global__ void __launch_bounds__(TRANSPOSE_TILE * TRANSPOSE_STEPS)
dense_transpose(const V* __restrict__ src, const long long s_r, const long long s_c, V* __restrict__ dst,
                const long long d_r, const long long d_c, const long long rows, const long long cols,
                const V alpha, const V beta) {
    constexpr int PITCH = TRANSPOSE_TILE + 1;
    // Raw storage: sg::complex has a constructor, which __shared__ variables may not run.
    __shared__ __align__(16) unsigned char raw[TRANSPOSE_TILE * PITCH * sizeof(V)];
    V* tile = reinterpret_cast<V*>(raw);  // tile[c_local * PITCH + r_local]
    const long long tiles_r = (rows + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE;
    const long long r0 = (long long)(blockIdx.x % tiles_r) * TRANSPOSE_TILE;
    const long long c0 = (long long)(blockIdx.x / tiles_r) * TRANSPOSE_TILE;
    const int x = threadIdx.x % TRANSPOSE_TILE, y0 = threadIdx.x / TRANSPOSE_TILE;
#pragma unroll
    for (int y = y0; y < TRANSPOSE_TILE; y += TRANSPOSE_STEPS) {
        const long long r = r0 + x, c = c0 + y;
        if (r < rows && c < cols) tile[y * PITCH + x] = sg::ldg(src + r * s_r + c * s_c);
    }
    __syncthreads();
#pragma unroll
    for (int y = y0; y < TRANSPOSE_TILE; y += TRANSPOSE_STEPS) {
        const long long r = r0 + y, c = c0 + x;
        if (r < rows && c < cols) store_axpby(dst + r * d_r + c * d_c, alpha, tile[x * PITCH + y], beta);
    }
}
