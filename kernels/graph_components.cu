// Connected components (sparsegpu.csgraph._device_components). Vertex numbers and labels are int
// (labels are int32, so n < 2^31); positions in the CSR are I (int or long long).
//
// Weak components: a concurrent union-find (Afforest's neighbour sampling, ECL-CC's hooking).
// parent[v] <= v always, and a hook points a root at a SMALLER vertex with atomicCAS, so every
// tree's root is its smallest vertex. When all edges are linked each component is one tree, and
// after compression parent[v] is the smallest vertex of v's component whatever the timing: the
// partition and the numbering by smallest vertex are deterministic by construction.
//   1. cc_link_neighbour (r = 0, 1) links each vertex with its r-th neighbour; cc_compress.
//   2. cc_sample_giant: the most frequent root among CC_SAMPLES vertices (the giant component).
//   3. cc_link_rest links the remaining edges: a lane walks a row of at most CC_LIGHT edges, the
//      warp shares a longer row, rows of more than CC_HUB edges go to a list that
//      cc_link_hubs walks a block per row. With a symmetric pattern the rows of the giant
//      component are skipped (each of their edges to another tree is also stored the other way).
//   4. cc_compress (with root flags), an exclusive scan of the flags, cc_number.
//
// Strong components (forward-backward with trimming and colouring). rep[v] = -1 while v is
// unassigned, else the smallest vertex of v's SCC.
//   - scc_trim: a vertex with no unassigned in- or out-neighbour (other than itself) is an SCC.
//     Never a member of a larger SCC, whatever order vertices are trimmed in.
//   - scc_propagate: lab[w] = min(lab[w], lab[v]) along the edges v -> w between unassigned
//     vertices of the same group, driven by dirty flags (one buffer read, the other written per
//     sweep); the fixed point (the smallest lab among the vertices that reach w within its
//     group) does not depend on timing. Reachability is the case lab in {0, 1}.
#include "common.cuh"

inline constexpr int CC_BLOCK = 256;
inline constexpr int CC_LIGHT = 8;     // rows of at most this many edges: one lane walks them
inline constexpr int CC_HUB = 1024;    // rows of more than this many edges: a block shares them
inline constexpr int CC_SAMPLES = 512; // vertices sampled to find the giant component
inline constexpr int CC_NEIGHBOUR_ROUNDS = 2;

namespace cc {

__device__ __forceinline__ int load(const int* p) { return *(const volatile int*)p; }

// The root of v's tree, halving the path on the way. Every write points a non-root at one of
// its ancestors, so concurrent writes keep the forest (hooks only ever touch roots).
__device__ __forceinline__ int find_root(int* parent, int v) {
    int curr = load(parent + v);
    if (curr == v) return v;
    int prev = v, next;
    while (curr > (next = load(parent + curr))) {
        parent[prev] = next;
        prev = curr;
        curr = next;
    }
    return curr;
}

// Join the trees holding a and b: the larger root is pointed at the smaller vertex. A failed CAS
// means that root got a parent meanwhile: climb from there and try again.
__device__ __forceinline__ void unite(int* parent, int a, int b) {
    while (a != b) {
        if (a < b) { const int t = a; a = b; b = t; }
        const int old = atomicCAS(parent + a, a, b);
        if (old == a) return;
        a = find_root(parent, old);
    }
}

// Link u (whose tree root was `root_u`, perhaps no longer a root) with w; returns u's root after.
__device__ __forceinline__ int link_edge(int* parent, int root_u, int w) {
    if (load(parent + w) == root_u) return root_u;  // the common case once trees are compressed
    const int root_w = find_root(parent, w);
    if (root_w == root_u) return root_u;
    unite(parent, root_u, root_w);
    return find_root(parent, root_u);
}

// Link u (tree root `root`) with indices[k] for k = first, first + stride, ... < end, four loads
// in flight at a time; returns u's root after.
template <class I>
__device__ __forceinline__ int link_strided(int* parent, int root, const I* indices, long long first, long long end,
                                            int stride) {
    constexpr int UNROLL = 4;
    for (long long k = first; k < end; k += (long long)stride * UNROLL) {
        int w[UNROLL], pw[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) w[u] = k + u * stride < end ? (int)indices[k + u * stride] : -1;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) pw[u] = w[u] >= 0 ? load(parent + w[u]) : -1;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            if (w[u] >= 0 && pw[u] != root) root = link_edge(parent, root, w[u]);
    }
    return root;
}

template <class I> __device__ __forceinline__ void row_range(const I* indptr, long long v, long long& start, long long& end) {
    start = (long long)indptr[v];
    end = (long long)indptr[v + 1];
}

}  // namespace cc

// ------------------------------------------------------------------------------ weak components

template <class I>
__global__ void __launch_bounds__(CC_BLOCK)
cc_link_neighbour(const I* __restrict__ indptr, const I* __restrict__ indices, const long long n, const int r,
                  int* parent) {
    const long long v = (long long)blockIdx.x * CC_BLOCK + threadIdx.x;
    if (v >= n) return;
    long long start, end;
    cc::row_range(indptr, v, start, end);
    if (end - start <= r) return;
    cc::unite(parent, cc::find_root(parent, (int)v), cc::find_root(parent, (int)indices[start + r]));
}

// parent[v] = its root; flags[v] = 1 where v is a root (the smallest vertex of its tree).
__global__ void __launch_bounds__(CC_BLOCK)
cc_compress(const long long n, int* parent, int* flags) {
    const long long v = (long long)blockIdx.x * CC_BLOCK + threadIdx.x;
    if (v >= n) return;
    const int root = cc::find_root(parent, (int)v);
    parent[v] = root;
    if (flags != nullptr) flags[v] = root == (int)v;
}

// One block of CC_SAMPLES threads: giant[0] = the root met most often at fixed pseudo-random
// vertices (ties: the smaller root). Only speed depends on it, never the result.
__global__ void __launch_bounds__(CC_SAMPLES)
cc_sample_giant(const long long n, const int* __restrict__ parent, int* giant) {
    __shared__ int roots[CC_SAMPLES];
    __shared__ long long best[CC_SAMPLES];
    const int i = threadIdx.x;
    const unsigned long long v = ((unsigned long long)i * 2654435761ull + 40503ull) % (unsigned long long)n;
    roots[i] = parent[v];
    __syncthreads();
    int count = 0;
    for (int j = 0; j < CC_SAMPLES; ++j) count += roots[j] == roots[i];
    // Larger count first, then the smaller root: one 64-bit key, maximised.
    best[i] = ((long long)count << 32) | (long long)(0x7fffffff - roots[i]);
    __syncthreads();
    for (int half = CC_SAMPLES / 2; half > 0; half /= 2) {
        if (i < half && best[i + half] > best[i]) best[i] = best[i + half];
        __syncthreads();
    }
    if (i == 0) giant[0] = 0x7fffffff - (int)(best[0] & 0xffffffffll);
}

// The edges past the first CC_NEIGHBOUR_ROUNDS of every row. A warp takes 32 consecutive
// vertices. hubs/hub_count: rows of more than CC_HUB such edges, for cc_link_hubs.
template <class I, bool SYMMETRIC>
__global__ void __launch_bounds__(CC_BLOCK)
cc_link_rest(const I* __restrict__ indptr, const I* __restrict__ indices, const long long n,
             int* parent, const int* __restrict__ giant, int* hubs, int* hub_count) {
    const long long v = (long long)blockIdx.x * CC_BLOCK + threadIdx.x;
    const int lane = threadIdx.x % 32;
    long long start = 0, end = 0;
    int root = -1;
    if (v < n) {
        cc::row_range(indptr, v, start, end);
        start += CC_NEIGHBOUR_ROUNDS;
        root = cc::load(parent + v);
        if (SYMMETRIC && root == *giant) end = start;
    }
    const long long length = end - start;
    if (length > CC_HUB) hubs[atomicAdd(hub_count, 1)] = (int)v;
    if (length > 0 && length <= CC_LIGHT) {
        cc::link_strided(parent, root, indices, start, end, 1);
    }
    unsigned shared_rows = __ballot_sync(sg::FULL_MASK, length > CC_LIGHT && length <= CC_HUB);
    while (shared_rows) {
        const int owner = __ffs(shared_rows) - 1;
        shared_rows &= shared_rows - 1;
        const long long row_start = __shfl_sync(sg::FULL_MASK, start, owner);
        const long long row_end = __shfl_sync(sg::FULL_MASK, end, owner);
        cc::link_strided(parent, __shfl_sync(sg::FULL_MASK, root, owner), indices, row_start + lane, row_end, 32);
    }
}

// A block per listed row, its threads striding the row's edges.
template <class I>
__global__ void __launch_bounds__(CC_BLOCK)
cc_link_hubs(const I* __restrict__ indptr, const I* __restrict__ indices, int* parent, const int* __restrict__ hubs,
             const int* __restrict__ hub_count) {
    const int count = *hub_count;
    for (int h = blockIdx.x; h < count; h += gridDim.x) {
        const int v = hubs[h];
        long long start, end;
        cc::row_range(indptr, v, start, end);
        cc::link_strided(parent, cc::find_root(parent, v), indices, start + CC_NEIGHBOUR_ROUNDS + threadIdx.x, end,
                         CC_BLOCK);
    }
}

// labels[v] = first[rep[v]] where first is the exclusive scan of the root flags (rep[v] == v);
// count[0] = the number of roots.
__global__ void __launch_bounds__(CC_BLOCK)
cc_number(const long long n, const int* __restrict__ rep, const int* __restrict__ first, int* labels, int* count) {
    const long long v = (long long)blockIdx.x * CC_BLOCK + threadIdx.x;
    if (v >= n) return;
    const int r = rep[v];
    labels[v] = first[r];
    if (v == n - 1) count[0] = first[v] + (r == (int)v);
}

// flags[v] = 1 where rep[v] == v.
__global__ void __launch_bounds__(CC_BLOCK)
cc_flag_roots(const long long n, const int* __restrict__ rep, int* flags) {
    const long long v = (long long)blockIdx.x * CC_BLOCK + threadIdx.x;
    if (v < n) flags[v] = rep[v] == (int)v;
}

// ---------------------------------------------------------------------------- strong components

namespace cc {
// Whether row v (positions start..end) has an unassigned neighbour other than v. Lane-serial
// when `alone`, else the whole warp (every lane must call it with the same row then).
template <class I>
__device__ __forceinline__ bool any_unassigned(const I* indices, long long start, long long end, int v,
                                               const int* rep, bool alone, int lane) {
    if (alone) {
        for (long long k = start; k < end; ++k) {
            const int w = (int)indices[k];
            if (w != v && load(rep + w) < 0) return true;
        }
        return false;
    }
    for (long long base = start; base < end; base += 32) {
        const long long k = base + lane;
        bool found = false;
        if (k < end) {
            const int w = (int)indices[k];
            found = w != v && load(rep + w) < 0;
        }
        if (__any_sync(sg::FULL_MASK, found)) return true;
    }
    return false;
}
}  // namespace cc

// One sweep of trimming; changed[0] = 1 when a vertex was assigned, changed[1] = 1 when a vertex
// is left unassigned.
template <class I>
__global__ void __launch_bounds__(CC_BLOCK)
scc_trim(const I* __restrict__ out_ptr, const I* __restrict__ out_idx, const I* __restrict__ in_ptr,
         const I* __restrict__ in_idx, const long long n, int* rep, int* changed) {
    const long long v = (long long)blockIdx.x * CC_BLOCK + threadIdx.x;
    const int lane = threadIdx.x % 32;
    long long os = 0, oe = 0, is = 0, ie = 0;
    const bool active = v < n && rep[v] < 0;
    if (active) {
        cc::row_range(out_ptr, v, os, oe);
        cc::row_range(in_ptr, v, is, ie);
    }
    const bool light = oe - os <= CC_LIGHT && ie - is <= CC_LIGHT;
    bool trimmed = false;
    if (active && light)
        trimmed = !cc::any_unassigned(out_idx, os, oe, (int)v, rep, true, lane) ||
                  !cc::any_unassigned(in_idx, is, ie, (int)v, rep, true, lane);
    unsigned heavy = __ballot_sync(sg::FULL_MASK, active && !light);
    while (heavy) {
        const int owner = __ffs(heavy) - 1;
        heavy &= heavy - 1;
        const int u = __shfl_sync(sg::FULL_MASK, (int)v, owner);
        const bool has_out = cc::any_unassigned(out_idx, __shfl_sync(sg::FULL_MASK, os, owner),
                                                __shfl_sync(sg::FULL_MASK, oe, owner), u, rep, false, lane);
        const bool has_in = has_out && cc::any_unassigned(in_idx, __shfl_sync(sg::FULL_MASK, is, owner),
                                                          __shfl_sync(sg::FULL_MASK, ie, owner), u, rep, false, lane);
        if (lane == owner) trimmed = !(has_out && has_in);
    }
    if (trimmed) {
        rep[v] = (int)v;
        changed[0] = 1;
    } else if (active) {
        changed[1] = 1;
    }
}

namespace cc {
// Offer lab value l from v to w; mark w dirty when it lowered w's value.
__device__ __forceinline__ bool offer(int w, int l, int g, const int* rep, const int* group, int* lab,
                                      unsigned char* dirty_out) {
    if (load(rep + w) >= 0 || group[w] != g || load(lab + w) <= l) return false;
    if (atomicMin(lab + w, l) <= l) return false;
    dirty_out[w] = 1;
    return true;
}
}  // namespace cc

// One sweep of min-propagation along the edges (ptr, idx) from the vertices flagged in
// dirty_in (cleared here) to unassigned vertices of the same group; dirty_out flags those
// lowered, changed[0] = 1 when any was.
template <class I>
__global__ void __launch_bounds__(CC_BLOCK)
scc_propagate(const I* __restrict__ ptr, const I* __restrict__ idx, const long long n, const int* __restrict__ rep,
              const int* __restrict__ group, int* lab, unsigned char* dirty_in, unsigned char* dirty_out,
              int* changed) {
    const long long v = (long long)blockIdx.x * CC_BLOCK + threadIdx.x;
    const int lane = threadIdx.x % 32;
    long long start = 0, end = 0;
    int l = 0, g = 0;
    const bool dirty = v < n && dirty_in[v];
    if (dirty) {
        dirty_in[v] = 0;
        cc::row_range(ptr, v, start, end);
        l = cc::load(lab + v);
        g = group[v];
    }
    bool lowered = false;
    if (dirty && end - start <= CC_LIGHT)
        for (long long k = start; k < end; ++k) lowered |= cc::offer((int)idx[k], l, g, rep, group, lab, dirty_out);
    unsigned shared_rows = __ballot_sync(sg::FULL_MASK, dirty && end - start > CC_LIGHT);
    while (shared_rows) {
        const int owner = __ffs(shared_rows) - 1;
        shared_rows &= shared_rows - 1;
        const long long row_end = __shfl_sync(sg::FULL_MASK, end, owner);
        const int row_lab = __shfl_sync(sg::FULL_MASK, l, owner), row_group = __shfl_sync(sg::FULL_MASK, g, owner);
        for (long long k = __shfl_sync(sg::FULL_MASK, start, owner) + lane; k < row_end; k += 32)
            lowered |= cc::offer((int)idx[k], row_lab, row_group, rep, group, lab, dirty_out);
    }
    if (__any_sync(sg::FULL_MASK, lowered) && lane == 0) changed[0] = 1;
}

// key[v] = (min(in-degree * out-degree, 2^32 - 1) << 31) | (2^31 - 1 - v) for unassigned v, else
// -1: its maximum names the pivot (largest degree product, then the smallest vertex).
template <class I>
__global__ void __launch_bounds__(CC_BLOCK)
scc_pivot_keys(const I* __restrict__ out_ptr, const I* __restrict__ in_ptr, const long long n,
               const int* __restrict__ rep, long long* keys) {
    const long long v = (long long)blockIdx.x * CC_BLOCK + threadIdx.x;
    if (v >= n) return;
    if (rep[v] >= 0) {
        keys[v] = -1;
        return;
    }
    const unsigned long long out_degree = (unsigned long long)(out_ptr[v + 1] - out_ptr[v]);
    const unsigned long long in_degree = (unsigned long long)(in_ptr[v + 1] - in_ptr[v]);
    unsigned long long product = out_degree * in_degree;
    if (out_degree > 0xffffffffull || in_degree > 0xffffffffull || product > 0xffffffffull) product = 0xffffffffull;
    keys[v] = (long long)((product << 31) | (unsigned long long)(0x7fffffffll - v));
}
