// Minimum spanning forest, Boruvka's algorithm (sparsegpu/csgraph/_device_mst.py drives the rounds).
//
// The undirected edges are taken once each (the upper triangle, row < col, in CSR order, so
// sorted by (row, col)); an edge is lighter than another when (weight, row, col) is smaller, a
// total order, so the lightest edge out of every component is unique and the forest does not
// depend on timing. The edges still crossing between components ("alive" edges) keep that
// (row, col) order, so among edges of equal weight the smaller position in the alive list is
// the lighter: a component's lightest edge is found by two integer atomicMin passes, the
// smallest weight (its bits mapped to an order-preserving unsigned key), then the smallest
// position among the edges of that weight. No sort is needed.
//
// One round:
//   lightest_weights  best_weight[c] = the smallest weight key of an alive edge at component c
//   lightest_edges    best[c] = the smallest alive position of that weight at c
//   hook_components   each component c links to the component across its best edge and marks
//                     that edge; the lightest-edge graph has no cycles but mutual pairs (both
//                     picked the same edge), whose smaller component stays the root
//   shortcut_links    pointer jumping until every link names its root
//   relabel_alive     alive edges take their endpoints' roots, in place; an edge inside one
//                     component is dead (flag 0, skipped by the next rounds); counts the
//                     crossing edges (integer atomics, exact)
//   compact_crossing  (when enough edges died; positions = inclusive scan of the flags) writes
//                     the crossing edges, in the same order, to the other buffer
// Components are named by their root vertex; the alive list holds component names, never
// vertices, so a round touches only the alive edges and the per-vertex arrays.
#include "common.cuh"

inline constexpr int MST_BLOCK = 256;

// Grid-stride loop over [0, n).
#define MST_FOR_EACH(i, n)                                                                 \
    for (long long i = (long long)blockIdx.x * MST_BLOCK + threadIdx.x; i < (n);          \
         i += (long long)gridDim.x * MST_BLOCK)

// flags[e] = 1 for the stored entries above the diagonal (each undirected edge once; self loops
// and the lower copies dropped).
template <class I>
__global__ void __launch_bounds__(MST_BLOCK)
mark_upper(const I* __restrict__ rows, const I* __restrict__ cols, const long long nnz, I* __restrict__ flags) {
    MST_FOR_EACH(e, nnz) flags[e] = cols[e] > rows[e] ? I(1) : I(0);
}

// Stream compaction of (src, dst, w) by flags, keeping order: positions is the inclusive scan
// of flags, so a kept entry goes to positions[e] - 1.
template <class I>
__global__ void __launch_bounds__(MST_BLOCK)
select_edges(const I* __restrict__ flags, const I* __restrict__ positions, const I* __restrict__ src,
             const I* __restrict__ dst, const double* __restrict__ w, const long long m, I* __restrict__ out_src,
             I* __restrict__ out_dst, double* __restrict__ out_w) {
    MST_FOR_EACH(e, m) {
        if (flags[e]) {
            const I at = positions[e] - 1;
            out_src[at] = src[e];
            out_dst[at] = dst[e];
            out_w[at] = w[e];
        }
    }
}

// Unsigned key with the order of the doubles (-0.0 reads as +0.0; NaN never comes here).
__device__ __forceinline__ unsigned long long weight_key(double w) {
    const unsigned long long bits = (unsigned long long)__double_as_longlong(w == 0.0 ? 0.0 : w);
    return (bits >> 63) ? ~bits : bits | 0x8000000000000000ull;
}

// *slot = min(*slot, value). A plain read first skips the atomic when the slot already holds
// no more: slots only decrease, and hub components see most of their edges skipped this way.
template <class T>
__device__ __forceinline__ void lower_to(T* slot, const T value) {
    if (value < *(volatile T*)slot) atomicMin(slot, value);
}

template <class I>
__global__ void __launch_bounds__(MST_BLOCK)
lightest_weights(const I* __restrict__ eu, const I* __restrict__ ev, const double* __restrict__ w, const long long m,
                 unsigned long long* best_weight) {
    MST_FOR_EACH(p, m) {
        const I u = eu[p], v = ev[p];
        if (u == v) continue;  // dead
        const unsigned long long key = weight_key(w[p]);
        lower_to(best_weight + u, key);
        lower_to(best_weight + v, key);
    }
}

template <class I>
__global__ void __launch_bounds__(MST_BLOCK)
lightest_edges(const I* __restrict__ eu, const I* __restrict__ ev, const double* __restrict__ w, const long long m,
               const unsigned long long* __restrict__ best_weight, I* best) {
    MST_FOR_EACH(p, m) {
        const I u = eu[p], v = ev[p];
        if (u == v) continue;
        const unsigned long long key = weight_key(w[p]);
        if (key == best_weight[u]) lower_to(best + u, (I)p);
        if (key == best_weight[v]) lower_to(best + v, (I)p);
    }
}

// link[c] for every vertex c: the component across c's best edge, or c itself (a non-root, a
// component with no alive edge, or the smaller of a mutual pair). The edge a component links
// along joins the forest (flag in forest[], indexed by the edge's upper-triangle position ek).
template <class I>
__global__ void __launch_bounds__(MST_BLOCK)
hook_components(const I* __restrict__ best, const I* __restrict__ eu, const I* __restrict__ ev,
                const I* __restrict__ ek, const long long n, const I none, I* __restrict__ link,
                unsigned char* __restrict__ forest) {
    MST_FOR_EACH(c, n) {
        const I p = best[c];
        I target = (I)c;
        if (p != none) {
            const I u = eu[p], v = ev[p];
            const I other = u == (I)c ? v : u;
            const bool mutual = best[other] == p;
            if (!mutual || (I)c > other) {
                target = other;
                forest[ek[p]] = 1;
            }
        }
        link[c] = target;
    }
}

// Pointer jumping in place: link[c] <- link[link[c]] until it names a root (link[r] == r).
// Concurrent updates only ever replace a link by one of its ancestors, so any value read is an
// ancestor and the loop ends at the one root, whatever the interleaving.
template <class I>
__global__ void __launch_bounds__(MST_BLOCK)
shortcut_links(const long long n, I* link) {
    volatile I* links = link;  // re-read every time: other threads shorten the chain
    MST_FOR_EACH(c, n) {
        I p = links[c];
        while (true) {
            const I pp = links[p];
            if (pp == p) break;
            links[c] = pp;
            p = pp;
        }
    }
}

// Alive edges take their endpoints' roots in place; flags[p] = 1 while the edge still crosses.
// *crossing (zero at launch) gets the count: one integer atomicAdd per block.
template <class I>
__global__ void __launch_bounds__(MST_BLOCK)
relabel_alive(I* __restrict__ eu, I* __restrict__ ev, const I* __restrict__ link, const long long m,
              I* __restrict__ flags, unsigned long long* crossing) {
    __shared__ unsigned long long scratch[MST_BLOCK / 32];
    unsigned long long count = 0;
    MST_FOR_EACH(p, m) {
        const I u = link[eu[p]], v = link[ev[p]];
        eu[p] = u;
        ev[p] = v;
        flags[p] = u != v ? I(1) : I(0);
        count += u != v;
    }
    count = sg::block_sum<MST_BLOCK>(count, scratch);
    if (threadIdx.x == 0 && count) atomicAdd(crossing, count);
}

// The crossing edges, in the same order, into the other buffer.
template <class I>
__global__ void __launch_bounds__(MST_BLOCK)
compact_crossing(const I* __restrict__ flags, const I* __restrict__ positions, const I* __restrict__ eu,
                 const I* __restrict__ ev, const I* __restrict__ ek, const double* __restrict__ w,
                 const long long m, I* __restrict__ out_eu, I* __restrict__ out_ev, I* __restrict__ out_ek,
                 double* __restrict__ out_w) {
    MST_FOR_EACH(p, m) {
        if (flags[p]) {
            const I at = positions[p] - 1;
            out_eu[at] = eu[p];
            out_ev[at] = ev[p];
            out_ek[at] = ek[p];
            out_w[at] = w[p];
        }
    }
}

#undef MST_FOR_EACH
