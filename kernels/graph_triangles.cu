// Common neighbours of vertex pairs over a CSR pattern with sorted rows and no duplicates
// (sparsegpu.csgraph._device_triangles; NumPy reference: sparsegpu/reference/graph_triangles.py).
// Vertex numbers, pointers and pair entries are I (int or long long); counts are 64-bit.
//
// For pair p = (u, v) the shorter of the two sorted neighbour lists is walked and each entry w
// binary searched in the longer one; common[p] = how many are found. With corners != nullptr
// each w found adds 1 to corners[w] and the pair adds common[p] to corners[u] and corners[v]:
// over the degree-oriented graph with its edges as the pairs, each triangle counts once at each
// of its corners. With edge_counts != nullptr each w found adds 1 at the CSR positions of the
// entries (short, w) and (long, w) (the searched entry and the one found): with common[], the
// triangles through each oriented edge. Integer atomics: the sums are exact whatever the order, so deterministic.
//   - tri_common_thread: a thread per pair whose shorter list has at most warp_work entries
//     (it skips the others);
//   - tri_common_warp: a warp per listed pair (those of more than warp_work entries), the lanes
//     striding over the shorter list, the count summed by shuffles.
// Every pair's common[p] is written by exactly one thread (or one warp's lane 0).
#include "common.cuh"

inline constexpr int TRI_BLOCK = 256;

namespace tri {

// The first position in [lo, hi) whose entry is >= key (hi when none).
template <class I>
__device__ __forceinline__ long long lower_bound(const I* __restrict__ indices, long long lo, long long hi, const I key) {
    while (lo < hi) {
        const long long mid = lo + (hi - lo) / 2;
        if (indices[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// The row ranges of u and v, the shorter one first (u's on a tie).
template <class I>
__device__ __forceinline__ void shorter_first(const I* __restrict__ indptr, const long long u, const long long v,
                                              long long& short_begin, long long& short_end,
                                              long long& long_begin, long long& long_end) {
    const long long u_begin = indptr[u], u_end = indptr[u + 1];
    const long long v_begin = indptr[v], v_end = indptr[v + 1];
    const bool u_shorter = u_end - u_begin <= v_end - v_begin;
    short_begin = u_shorter ? u_begin : v_begin;
    short_end = u_shorter ? u_end : v_end;
    long_begin = u_shorter ? v_begin : u_begin;
    long_end = u_shorter ? v_end : u_end;
}

__device__ __forceinline__ void add_corners(unsigned long long* corners, const long long u, const long long v,
                                            const long long count) {
    if (corners != nullptr && count > 0) {
        atomicAdd(corners + u, (unsigned long long)count);
        atomicAdd(corners + v, (unsigned long long)count);
    }
}

// A common neighbour w found at CSR position `found` while searching the entry at `searched`.
template <class I>
__device__ __forceinline__ void add_found(unsigned long long* corners, unsigned long long* edge_counts, const I w,
                                          const long long searched, const long long found) {
    if (corners != nullptr) atomicAdd(corners + (long long)w, 1ull);
    if (edge_counts != nullptr) {
        atomicAdd(edge_counts + searched, 1ull);
        atomicAdd(edge_counts + found, 1ull);
    }
}

}  // namespace tri

template <class I>
__global__ void __launch_bounds__(TRI_BLOCK)
tri_common_thread(const I* __restrict__ indptr, const I* __restrict__ indices, const I* __restrict__ first,
                  const I* __restrict__ second, const long long k, const long long warp_work,
                  long long* __restrict__ common, unsigned long long* corners, unsigned long long* edge_counts) {
    const long long p = (long long)blockIdx.x * TRI_BLOCK + threadIdx.x;
    if (p >= k) return;
    const long long u = first[p], v = second[p];
    long long short_begin, short_end, long_begin, long_end;
    tri::shorter_first(indptr, u, v, short_begin, short_end, long_begin, long_end);
    if (short_end - short_begin > warp_work) return;  // tri_common_warp's pair
    long long count = 0, lo = long_begin;
    // Both lists increase, so each search starts where the previous one stopped.
    for (long long j = short_begin; j < short_end && lo < long_end; ++j) {
        const I w = indices[j];
        lo = tri::lower_bound(indices, lo, long_end, w);
        if (lo < long_end && indices[lo] == w) {
            ++count;
            tri::add_found(corners, edge_counts, w, j, lo);
        }
    }
    common[p] = count;
    tri::add_corners(corners, u, v, count);
}

template <class I>
__global__ void __launch_bounds__(TRI_BLOCK)
tri_common_warp(const I* __restrict__ indptr, const I* __restrict__ indices, const I* __restrict__ first,
                const I* __restrict__ second, const long long* __restrict__ long_pairs, const long long n_long,
                long long* __restrict__ common, unsigned long long* corners, unsigned long long* edge_counts) {
    const long long warp = ((long long)blockIdx.x * TRI_BLOCK + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (warp >= n_long) return;  // the same for all 32 lanes: the shuffles below see a full warp
    const long long p = long_pairs[warp];
    const long long u = first[p], v = second[p];
    long long short_begin, short_end, long_begin, long_end;
    tri::shorter_first(indptr, u, v, short_begin, short_end, long_begin, long_end);
    long long count = 0;
    for (long long j = short_begin + lane; j < short_end; j += 32) {
        const I w = indices[j];
        const long long at = tri::lower_bound(indices, long_begin, long_end, w);
        if (at < long_end && indices[at] == w) {
            ++count;
            tri::add_found(corners, edge_counts, w, j, at);
        }
    }
    for (int offset = 16; offset > 0; offset /= 2) count += __shfl_down_sync(0xffffffffu, count, offset);
    if (lane == 0) {
        common[p] = count;
        tri::add_corners(corners, u, v, count);
    }
}
