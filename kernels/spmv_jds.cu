// JDS (jagged diagonal) SpMV, y = alpha * A x + beta * y. Rows are sorted by length, longest
// first (perm[i] is the row at rank i); jagged diagonal d holds entry d of every row longer
// than d, in rank order, at jd_ptr[d] .. jd_ptr[d + 1] (int64). Diagonal lengths never grow, so the
// thread of rank i stops at the first diagonal shorter than i + 1. No padding is stored.
//
// One thread per rank: a warp reads consecutive entries of each diagonal (coalesced); the
// diagonal pointers are the same for the whole warp (broadcast loads, one new pointer per
// diagonal). The thread writes y[perm[i]]. Entries are summed in diagonal order: bitwise
// reproducible run to run.
//
// What the global sort costs against SELL-C-sigma (sorted inside windows of 256 rows): the 32
// rows of a warp are far apart in the original order, so y[perm[i]] writes a 32-byte sector per
// row, partially, and the sector's other rows are written much later by warps of other lengths;
// x entries near the diagonal are no longer shared by a block either. The extra L2 requests
// account for JDS's gap to SELL (measured on an H200, see docs/performance.md). With CACHE_HINTS the once-read arrays (indices, data, perm) are
// marked evict-first in L2 and y evict-last, so x and y's partial sectors stay in L2 (no
// write-back per partial write, no x refetched from DRAM while a matrix larger than L2 streams
// through it); L1 is used as without hints.
//
// Also here: the permutation that sorts rows by length inside windows (JDS: one window; SELL-C-
// sigma: windows of sigma rows), a stable counting sort on the device:
//  - windows of at most RANK_BLOCK rows: rank_small_windows, one block sorts whole windows in
//    shared memory (a bitonic network over (window, descending length, row) keys): one launch;
//  - larger windows: LSD radix passes over the "shortness" key longest - length, DIGIT_BITS at a
//    time, each a count (radix_pass<..., false>), an exclusive scan of the per-tile counts laid
//    out window-major, digit-major, tile-minor (so the scan gives every (window, digit, tile) its
//    first output position), and a stable scatter (radix_pass<..., true>).
// jds_diagonal_lengths then turns the sorted lengths into the diagonal lengths jd_ptr scans.
#include "common.cuh"

inline constexpr int JDS_BLOCK = 256;
inline constexpr int JDS_UNROLL = 4;  // diagonals in flight per thread

template <class V, class I, bool CACHE_HINTS>
__global__ void __launch_bounds__(JDS_BLOCK)
jds_spmv(const long long* __restrict__ jd_ptr, const I* __restrict__ indices, const V* __restrict__ data,
         const I* __restrict__ perm, const long long n_rows, const long long n_diagonals,
         const V* __restrict__ x, V* __restrict__ y, const V alpha, const V beta) {
    const long long rank = (long long)blockIdx.x * JDS_BLOCK + threadIdx.x;
    if (rank >= n_rows) return;
    const unsigned long long once = CACHE_HINTS ? sg::l2_evict_first() : 0;
    // indices, data and perm are read once: evict-first in L2 with CACHE_HINTS.
    auto load_once = [once](const auto* p) { return CACHE_HINTS ? sg::load_hint(p, once) : sg::ldg(p); };
    V sum = V(0);
    long long start = sg::ldg(jd_ptr);  // carried: each diagonal's end is the next one's start
    for (long long d = 0; d < n_diagonals; d += JDS_UNROLL) {
        long long slot[JDS_UNROLL];
        I col[JDS_UNROLL];
#pragma unroll
        for (int u = 0; u < JDS_UNROLL; ++u) {
            // Past the last diagonal, `end` repeats `start`: an empty diagonal ends the row.
            const long long end = d + u < n_diagonals ? sg::ldg(jd_ptr + d + u + 1) : start;
            slot[u] = rank < end - start ? start + rank : -1;
            start = end;
        }
#pragma unroll
        for (int u = 0; u < JDS_UNROLL; ++u) col[u] = slot[u] >= 0 ? load_once(indices + slot[u]) : I(-1);
#pragma unroll
        for (int u = 0; u < JDS_UNROLL; ++u)
            if (slot[u] >= 0) sum = sum + load_once(data + slot[u]) * sg::ldg(x + col[u]);
        if (slot[JDS_UNROLL - 1] < 0) break;
    }
    const I row = load_once(perm + rank);
    const V value = sg::axpby(alpha, sum, beta, y + row);
    if constexpr (CACHE_HINTS) sg::store_hint(y + row, value, sg::l2_evict_last());
    else y[row] = value;
}

// ---------------------------------------------------------------- sorting rows by length

inline constexpr int RANK_BLOCK = 256;  // rows per block of the ranking kernels (a power of two)
inline constexpr int RANK_WARPS = RANK_BLOCK / 32;
inline constexpr int DIGIT_BITS = 8;    // radix digit: at most 1 << DIGIT_BITS = RANK_BLOCK bins
static_assert((1 << DIGIT_BITS) <= RANK_BLOCK, "one thread per bin");
// Sort keys of rank_small_windows: (window in block: 8 bits | maximal length - length: 48 bits |
// thread: 8 bits); a thread without a row holds ~0, which sorts last. Lengths stay below 2^48 - 2.
inline constexpr unsigned long long LENGTH_FIELD = (1ull << 48) - 2;
inline constexpr unsigned long long NO_ROW = ~0ull;

template <class I> __device__ __forceinline__ long long row_length(const I* __restrict__ indptr, long long row) {
    return (long long)sg::ldg(indptr + row + 1) - (long long)sg::ldg(indptr + row);
}

// Windows of `window` <= RANK_BLOCK rows: block b sorts the RANK_BLOCK / window whole windows from
// row b * (RANK_BLOCK / window) * window. Writes perm[rank] for every rank of those windows.
template <class I>
__global__ void __launch_bounds__(RANK_BLOCK)
rank_small_windows(const I* __restrict__ indptr, const long long n_rows, const long long window,
                   I* __restrict__ perm) {
    __shared__ unsigned long long keys[RANK_BLOCK];
    const int t = threadIdx.x;
    const long long per_block = (RANK_BLOCK / window) * window;
    const long long first = (long long)blockIdx.x * per_block;
    const long long row = first + t;
    const bool has_row = t < per_block && row < n_rows;
    const unsigned long long shortness = has_row ? LENGTH_FIELD - (unsigned long long)row_length(indptr, row) : 0;
    keys[t] = has_row ? ((unsigned long long)(t / window) << 56) | (shortness << 8) | (unsigned long long)t : NO_ROW;
    __syncthreads();
    // Bitonic sort, ascending; keys are distinct (the thread number is part of each), so the
    // order among equal lengths is the rows' order: stable.
    for (int size = 2; size <= RANK_BLOCK; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            const int partner = t ^ stride;
            if (partner > t) {
                const unsigned long long a = keys[t], b = keys[partner];
                if ((a > b) == ((t & size) == 0)) {
                    keys[t] = b;
                    keys[partner] = a;
                }
            }
            __syncthreads();
        }
    }
    // Windows are full except the matrix's last, so the sorted rows of window w are at w * window.
    const unsigned long long key = keys[t];
    if (key != NO_ROW) perm[first + t] = (I)(first + (long long)(key & 0xff));
}

// One LSD radix pass over the key longest - length(row), digit (key >> shift) & (bins - 1), over
// tiles of RANK_BLOCK positions that never cross a window (tiles_per_window of them per window,
// the last one short). Position p holds row p on the first pass (identity) and perm_in[p] after.
// SCATTER false: counts[(w * bins + digit) * tiles_per_window + tile] = rows of that digit in the
// tile, every entry written. SCATTER true: `counts` holds the exclusive scan of those counts, and
// the row goes to perm_out at its (window, digit, tile)'s first position plus the number of rows
// before it in the tile with the same digit (stable).
template <class I, bool SCATTER>
__global__ void __launch_bounds__(RANK_BLOCK)
radix_pass(const I* __restrict__ indptr, const I* __restrict__ perm_in, const long long first_pass,
           const long long n_rows, const long long window, const long long tiles_per_window, const long long longest,
           const long long shift, const long long bins, I* __restrict__ counts, I* __restrict__ perm_out) {
    __shared__ int warp_counts[RANK_WARPS][RANK_BLOCK];  // rows per (warp, digit), then their prefixes
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    const long long w = blockIdx.x / tiles_per_window, tile = blockIdx.x % tiles_per_window;
    const long long within = tile * RANK_BLOCK + t;  // position inside the window
    const long long position = w * window + within;
    const bool has_row = within < window && position < n_rows;
    long long row = 0;
    unsigned digit = RANK_BLOCK;  // threads without a row share a key no digit has
    if (has_row) {
        row = first_pass ? position : (long long)sg::ldg(perm_in + position);
        digit = (unsigned)(((longest - row_length(indptr, row)) >> shift) & (bins - 1));
    }
#pragma unroll
    for (int k = 0; k < RANK_WARPS; ++k) warp_counts[k][t] = 0;
    __syncthreads();
    const unsigned peers = __match_any_sync(sg::FULL_MASK, digit);
    const int before = __popc(peers & ((1u << lane) - 1u));  // same digit, lower lane
    if (has_row && before == 0) warp_counts[warp][digit] = __popc(peers);
    __syncthreads();
    if (t < bins) {  // thread t owns digit t: exclusive prefix over the warps, in warp order
        int total = 0;
#pragma unroll
        for (int k = 0; k < RANK_WARPS; ++k) {
            const int c = warp_counts[k][t];
            warp_counts[k][t] = total;
            total += c;
        }
        if constexpr (!SCATTER) counts[(w * bins + t) * tiles_per_window + tile] = (I)total;
    }
    if constexpr (SCATTER) {
        __syncthreads();
        if (has_row) {
            const long long base = (long long)counts[(w * bins + digit) * tiles_per_window + tile];
            perm_out[base + warp_counts[warp][digit] + before] = (I)row;
        }
    }
}

// Rows longer than d, for d < longest (= the length at rank 0), from the lengths in rank order
// (non-increasing): rank i is the last row longer than d for d in [length(i + 1), length(i)).
// rows_longer has longest + 1 entries; the last is 0, so its exclusive scan is jd_ptr. Every
// entry is written once (rank 0 also writes the last).
template <class I>
__global__ void __launch_bounds__(RANK_BLOCK)
jds_diagonal_lengths(const I* __restrict__ indptr, const I* __restrict__ perm, const long long n_rows,
                     long long* __restrict__ rows_longer) {
    const long long rank = (long long)blockIdx.x * RANK_BLOCK + threadIdx.x;
    if (rank >= n_rows) return;
    const long long length = row_length(indptr, (long long)sg::ldg(perm + rank));
    const long long next = rank + 1 < n_rows ? row_length(indptr, (long long)sg::ldg(perm + rank + 1)) : 0;
    for (long long d = next; d < length; ++d) rows_longer[d] = rank + 1;
    if (rank == 0) rows_longer[length] = 0;
}
