// Reverse Cuthill-McKee helpers (sparsegpu/csgraph/_device_rcm.py drives them; the level
// structure comes from the BFS kernel, kernels/graph_bfs.cu). The scheme is documented in
// sparsegpu/reference/graph_rcm.py, the NumPy reference:
//   rcm_degrees        SciPy's degree (row length, plus one when the row holds its diagonal);
//   rcm_hook / rcm_compress   components by min-label hooking and full path compression,
//                      repeated until no edge joins two trees: each component is named by its
//                      smallest vertex;
//   rcm_scatter_min / rcm_scatter_max   per-component minimum / maximum of a 64-bit value;
//   cm_parent_keys     for the vertices of one level, the smallest key of a neighbour one level up;
//   cm_small_levels    one block places a run of consecutive small levels (at most CM_SMALL
//                      vertices each): parent keys, then a rank sort by (parent key, degree,
//                      vertex) in shared memory, one launch for the whole run (large levels
//                      grouped by parent first, so a vertex ranks among its siblings only);
//   rcm_component_bandwidth   per component, the largest |position(i) - position(j)| of its edges.
#include "common.cuh"

inline constexpr int RCM_BLOCK = 256;
inline constexpr int CM_SMALL = 1024;  // sparsegpu/csgraph/_device_rcm.py CM_SMALL
inline constexpr long long RCM_NONE = 9223372036854775807LL;

template <class I>
__global__ void __launch_bounds__(RCM_BLOCK)
rcm_degrees(const I* __restrict__ indptr, const I* __restrict__ indices, const long long n, I* __restrict__ degree) {
    const long long v = (long long)blockIdx.x * RCM_BLOCK + threadIdx.x;
    if (v >= n) return;
    long long lo = indptr[v], hi = indptr[v + 1];
    const long long length = hi - lo;
    while (lo < hi) {  // sorted row: is v in it?
        const long long mid = (lo + hi) >> 1;
        if ((long long)indices[mid] < v) lo = mid + 1; else hi = mid;
    }
    degree[v] = (I)(length + (lo < indptr[v + 1] && (long long)indices[lo] == v ? 1 : 0));
}

template <class I>
__device__ __forceinline__ I rcm_find(const I* parent, I x) {
    for (;;) {
        const I p = __ldcg(parent + x);
        if (p == x) return x;
        x = p;
    }
}

template <class I>
__global__ void __launch_bounds__(RCM_BLOCK)
rcm_hook(const I* __restrict__ indptr, const I* __restrict__ indices, const long long n, I* parent, int* changed) {
    const long long v = (long long)blockIdx.x * RCM_BLOCK + threadIdx.x;
    if (v >= n) return;
    const long long stop = indptr[v + 1];
    for (long long e = indptr[v]; e < stop; ++e) {
        const I u = indices[e];
        if ((long long)u <= v) continue;  // symmetric: each edge once
        const I ru = rcm_find(parent, (I)v), rv = rcm_find(parent, u);
        if (ru == rv) continue;
        const I hi = ru > rv ? ru : rv, lo = ru > rv ? rv : ru;
        atomicMin(parent + hi, lo);
        *changed = 1;
    }
}

template <class I>
__global__ void __launch_bounds__(RCM_BLOCK) rcm_compress(const long long n, I* parent) {
    const long long v = (long long)blockIdx.x * RCM_BLOCK + threadIdx.x;
    if (v >= n) return;
    parent[v] = rcm_find(parent, (I)v);
}

template <class I>
__global__ void __launch_bounds__(RCM_BLOCK)
rcm_scatter_min(const I* __restrict__ labels, const long long* __restrict__ values, const long long n,
                long long* target) {
    const long long v = (long long)blockIdx.x * RCM_BLOCK + threadIdx.x;
    if (v < n && values[v] != RCM_NONE) atomicMin(target + labels[v], values[v]);
}

template <class I>
__global__ void __launch_bounds__(RCM_BLOCK)
rcm_scatter_max(const I* __restrict__ labels, const long long* __restrict__ values, const long long n,
                long long* target) {
    const long long v = (long long)blockIdx.x * RCM_BLOCK + threadIdx.x;
    if (v < n) atomicMax(target + labels[v], values[v]);
}

// The smallest key among v's neighbours on `level - 1` (RCM_NONE if none).
template <class I>
__device__ __forceinline__ long long cm_parent_key(const I* indptr, const I* indices, const int* levels,
                                                   const long long* key, long long v, int level) {
    long long best = RCM_NONE;
    const long long stop = indptr[v + 1];
    for (long long e = indptr[v]; e < stop; ++e) {
        const I u = indices[e];
        if (levels[u] == level - 1) {
            const long long k = __ldcg(key + u);
            best = k < best ? k : best;
        }
    }
    return best;
}

template <class I>
__global__ void __launch_bounds__(RCM_BLOCK)
cm_parent_keys(const I* __restrict__ indptr, const I* __restrict__ indices, const int* __restrict__ levels,
               const long long* __restrict__ key, const int* __restrict__ members, const long long count,
               const int level, long long* __restrict__ parent) {
    const long long i = (long long)blockIdx.x * RCM_BLOCK + threadIdx.x;
    if (i < count) parent[i] = cm_parent_key(indptr, indices, levels, key, members[i], level);
}

// For each of the `count` vertices of `members` (count <= CM_SMALL), its parent key
// (cm_parent_key), degree and index into shared memory. A group of lanes shares each vertex's
// edges, as many lanes as the block holds for the level (a power of two, at most a warp), and
// loads a neighbour's level and key together: a level's latency is one edge's loads, not its
// longest row's. Every thread of the block must call it (the groups reduce by shuffles).
template <class I>
__device__ __forceinline__ void cm_level_parents(const I* indptr, const I* indices, const int* levels,
                                                 const I* degree, const int* members, const int count,
                                                 const int level, const long long* key, long long* parent,
                                                 long long* deg, int* vertex) {
    int lanes = 32;
    while (lanes > 1 && lanes * count > CM_SMALL) lanes >>= 1;
    const int slot = threadIdx.x / lanes, lane = threadIdx.x % lanes;
    long long best = RCM_NONE;
    int v = 0;
    if (slot < count) {
        v = members[slot];
        const long long stop = indptr[v + 1];
        for (long long e = indptr[v] + lane; e < stop; e += lanes) {
            const I u = indices[e];
            const int u_level = levels[u];
            const long long k = __ldcg(key + u);  // read with the level; used only on level - 1
            best = u_level == level - 1 && k < best ? k : best;
        }
    }
    for (int offset = lanes >> 1; offset > 0; offset >>= 1) {
        const long long other = __shfl_xor_sync(0xffffffffu, best, offset);
        best = other < best ? other : best;
    }
    if (slot < count && lane == 0) {
        vertex[slot] = v;
        deg[slot] = (long long)degree[v];
        parent[slot] = best;
    }
}

// The block's exclusive prefix sum of counts[0, n) in place (n <= CM_SMALL), by warp shuffles
// and one pass over the warps' totals; returns the sum. Every thread of the block must call it.
__device__ __forceinline__ int cm_block_exclusive_scan(int* counts, const int n, int* warp_totals) {
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const int own = t < n ? counts[t] : 0;
    int inclusive = own;
    for (int d = 1; d < 32; d <<= 1) {
        const int up = __shfl_up_sync(0xffffffffu, inclusive, d);
        inclusive += lane >= d ? up : 0;
    }
    if (lane == 31) warp_totals[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        int total = lane < CM_SMALL / 32 ? warp_totals[lane] : 0;
        for (int d = 1; d < 32; d <<= 1) {
            const int up = __shfl_up_sync(0xffffffffu, total, d);
            total += lane >= d ? up : 0;
        }
        if (lane < CM_SMALL / 32) warp_totals[lane] = total;  // inclusive over the warps
    }
    __syncthreads();
    if (t < n) counts[t] = inclusive - own + (warp ? warp_totals[warp - 1] : 0);
    const int sum = warp_totals[CM_SMALL / 32 - 1];
    __syncthreads();
    return sum;
}

// Levels at most this large are ranked by comparing every pair of the level (count^2 / 32
// warp steps); larger ones group their vertices by parent first, so a vertex compares only with
// its siblings (the same order, about count steps).
inline constexpr int CM_PAIRWISE = 128;

// Levels [first, last) of `order` (vertices sorted by (level, vertex); level L at
// order[offsets[L] : offsets[L + 1]], at most CM_SMALL each), placed one after the other: each
// vertex's rank in (parent key, degree, vertex) order.
template <class I>
__global__ void __launch_bounds__(CM_SMALL)
cm_small_levels(const I* __restrict__ indptr, const I* __restrict__ indices, const int* __restrict__ levels,
                const I* __restrict__ degree, const int* __restrict__ order, const long long* __restrict__ offsets,
                const int first, const int last, long long* key) {
    __shared__ long long parent[CM_SMALL];
    __shared__ long long deg[CM_SMALL];
    __shared__ int vertex[CM_SMALL];
    __shared__ int group[CM_SMALL];    // per parent (offset in the previous level): size, then start
    __shared__ int cursor[CM_SMALL];   // per parent: members placed so far
    __shared__ short member[CM_SMALL]; // the level's vertices (slots t) grouped by parent
    __shared__ int warp_totals[CM_SMALL / 32];
    const int t = threadIdx.x;
    for (int level = first; level < last; ++level) {
        const long long begin = offsets[level], count = offsets[level + 1] - begin;
        const long long previous = offsets[level - 1], previous_count = begin - previous;
        cm_level_parents(indptr, indices, levels, degree, order + begin, (int)count, level, key, parent, deg, vertex);
        const bool grouped = count > CM_PAIRWISE && previous_count <= CM_SMALL;
        if (grouped) {
            if (t < previous_count) group[t] = cursor[t] = 0;
            __syncthreads();
            if (t < count) atomicAdd(group + (parent[t] - previous), 1);
            __syncthreads();
            cm_block_exclusive_scan(group, (int)previous_count, warp_totals);
            if (t < count) {
                const int p = (int)(parent[t] - previous);
                member[group[p] + atomicAdd(cursor + p, 1)] = (short)t;
            }
        }
        __syncthreads();
        if (t < count) {
            const long long p = parent[t], d = deg[t];
            const int v = vertex[t];
            // Pairwise: rank among the whole level. Grouped: the siblings' group starts at the
            // number of vertices with a smaller parent; rank within it by (degree, vertex).
            int from = 0, to = (int)count;
            long long rank = 0;
            if (grouped) {
                const int g = (int)(p - previous);
                from = group[g];
                to = from + cursor[g];
                rank = from;
            }
            for (int i = from; i < to; ++i) {
                const int j = grouped ? member[i] : i;
                const long long pj = parent[j], dj = deg[j];
                rank += (pj < p) || (pj == p && (dj < d || (dj == d && vertex[j] < v)));
            }
            key[v] = begin + rank;
        }
        __syncthreads();
    }
}

template <class I>
__global__ void __launch_bounds__(RCM_BLOCK)
rcm_component_bandwidth(const I* __restrict__ indptr, const I* __restrict__ indices, const I* __restrict__ labels,
                        const long long* __restrict__ position, const long long n, long long* width) {
    const long long v = (long long)blockIdx.x * RCM_BLOCK + threadIdx.x;
    if (v >= n) return;
    long long widest = 0;
    const long long here = position[v], stop = indptr[v + 1];
    for (long long e = indptr[v]; e < stop; ++e) {
        const long long d = here - position[indices[e]];
        widest = (d < 0 ? -d : d) > widest ? (d < 0 ? -d : d) : widest;
    }
    if (widest) atomicMax(width + labels[v], widest);
}
