// Minimum spanning forest, Boruvka's algorithm (sparsegpu/csgraph/_device_mst.py drives the rounds).
//
// The undirected edges are taken once each (the upper triangle, row < col) and sorted once by
// (weight, row, col); an edge's place in that order is its rank, a total order with no ties, so
// the lightest edge out of every component is unique and the forest does not depend on timing.
// The edges still crossing between components ("alive" edges) are kept in rank order, so an
// edge's position in the alive list orders edges as its rank does, and the lightest edge of a
// component is the smallest position: one integer atomicMin per endpoint.
//
// One round:
//   lightest_edges   best[c] = the smallest alive position touching component c
//   hook_components  each component c links to the component across its best edge and marks
//                    that edge; the lightest-edge graph has no cycles but mutual pairs (both
//                    picked the same edge), whose smaller component stays the root
//   shortcut_links   pointer jumping until every link names its root
//   mark_crossing    an alive edge stays alive when its relabelled endpoints differ
//   compact_crossing (after an inclusive scan of the flags on the host's side) writes the
//                    survivors, relabelled, in the same order
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

// best[c] = min position of an alive edge with an endpoint in component c (best preset to the
// largest I). A plain read first skips the atomic when a smaller position is already there:
// positions only decrease, and hub components see most of their edges skipped this way.
template <class I>
__device__ __forceinline__ void lower_to(I* best, const I c, const I p) {
    if (p < *(volatile I*)(best + c)) atomicMin(best + c, p);
}

template <class I>
__global__ void __launch_bounds__(MST_BLOCK)
lightest_edges(const I* __restrict__ eu, const I* __restrict__ ev, const long long m, I* best) {
    MST_FOR_EACH(p, m) {
        lower_to(best, eu[p], (I)p);
        lower_to(best, ev[p], (I)p);
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

// flags[p] = 1 when alive edge p still joins two components after the round's linking.
template <class I>
__global__ void __launch_bounds__(MST_BLOCK)
mark_crossing(const I* __restrict__ eu, const I* __restrict__ ev, const I* __restrict__ link, const long long m,
              I* __restrict__ flags) {
    MST_FOR_EACH(p, m) flags[p] = link[eu[p]] != link[ev[p]] ? I(1) : I(0);
}

// The crossing edges, relabelled to their roots, in the same (rank) order.
template <class I>
__global__ void __launch_bounds__(MST_BLOCK)
compact_crossing(const I* __restrict__ flags, const I* __restrict__ positions, const I* __restrict__ eu,
                 const I* __restrict__ ev, const I* __restrict__ ek, const I* __restrict__ link, const long long m,
                 I* __restrict__ out_eu, I* __restrict__ out_ev, I* __restrict__ out_ek) {
    MST_FOR_EACH(p, m) {
        if (flags[p]) {
            const I at = positions[p] - 1;
            out_eu[at] = link[eu[p]];
            out_ev[at] = link[ev[p]];
            out_ek[at] = ek[p];
        }
    }
}

#undef MST_FOR_EACH
