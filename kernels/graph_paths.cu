// Shortest paths: near-far delta-stepping (non-negative weights), frontier Bellman-Ford
// (negative weights allowed) and the shortest-path tree, all as one loop that runs on the device.
//
// Distances are kept as 64-bit keys: key(x) flips a double's bits so that unsigned integer order
// is the order of the doubles (negative values included), and a relaxation is one atomicMin on
// the key. A minimum does not depend on the order the updates arrive in, so the distances are
// exact minima and the same bits whatever the timing. (They are the greatest fixed point of
// d[v] = min(d[v], d[u] + w) under float rounding, which every label-correcting order, and
// Dijkstra's, reaches: the bits match SciPy's.)
//
// Near-far (Davidson et al., "Work-efficient parallel GPU methods for single-source shortest
// paths", after Meyer and Sanders' delta-stepping): the near queue holds the vertices improved
// below the threshold T; a round relaxes their out-edges, and an improved vertex goes to the next
// near queue when its distance is below T, else to the far pile. When the near queue runs dry,
// T = max(T, least distance pushed to the far pile since the last split) + delta, and the split
// moves the far vertices now below T to the near queue and keeps the rest (vertices below the old
// T were settled already). Bellman-Ford is the same loop with T = inf: every improved vertex is
// relaxed in the next round, and a frontier still busy after n rounds means a negative cycle.
//
// The loop needs no host decision: each kernel reads its sizes from the state words, and the last
// block of a launch (a ticket) does the round's bookkeeping. The host launches rounds in batches
// (paths_small, paths_expand, paths_chunks, paths_split each) and reads one word (done) between
// batches. paths_small is one block that runs round after round, with no launch between, while
// the queue stays small (a road graph's thousands of rounds of a few hundred vertices); it hands
// back to the many-block kernels, which do one round per launch, when the queue outgrows it.
//
// Work items: GROUP lanes per vertex (4, 8 or 32, by mean degree); a vertex with more than CHUNK
// = GROUP * CHUNK_STEPS out-edges relaxes its first CHUNK edges at once and queues the rest as
// chunk tasks, which a second launch spreads over all warps (a hub of a power-law graph would
// otherwise keep one group busy for the whole round).
//
// The tree (OP = TREE): a breadth-first search from the sources over the tight edges
// (d[u] + w == d[v] exactly as computed); a vertex takes the smallest-index tight in-neighbour on
// the previous hop level as predecessor (atomicMin), so the tree is acyclic even with zero-weight
// cycles, and deterministic. Nearest sources follow the tree one level behind.
#include "common.cuh"

namespace paths {

using u64 = unsigned long long;

// State words (u64), shared by host and device; sparsegpu/csgraph/_device_paths.py mirrors them.
inline constexpr int PARITY = 0;        // which near queue is current
inline constexpr int NEAR_COUNT = 1;    // two words: sizes of near queues 0 and 1
inline constexpr int FAR_PARITY = 3;    // which far pile is current
inline constexpr int FAR_COUNT = 4;     // two words
inline constexpr int CHUNK_COUNT = 6;
inline constexpr int THRESHOLD = 7;     // T, double bits
inline constexpr int PREVIOUS = 8;      // the T before the last split, double bits
inline constexpr int FAR_MIN = 9;       // least key pushed to the far pile since the last split
inline constexpr int SPLIT = 10;        // 1 while a split is due
inline constexpr int DONE = 11;
inline constexpr int ROUND = 12;
inline constexpr int EPOCH = 13;        // far-pile epoch (marks)
inline constexpr int TICKET_CHUNKS = 14;
inline constexpr int TICKET_SPLIT = 15;
inline constexpr int ROUND_LIMIT = 16;  // a frontier still busy at this round: negative cycle
inline constexpr int OVERRUN = 17;
inline constexpr int DELTA = 18;        // double bits
inline constexpr int LIMIT = 19;        // double bits: relaxations beyond it are dropped
inline constexpr int SMALL_LIMIT = 20;  // paths_small returns past this many queued items
inline constexpr int SMALL_BLOCK = 1024;

inline constexpr int RELAX = 0;
inline constexpr int TREE = 1;
inline constexpr int CHUNK_STEPS = 16;
inline constexpr u64 KEY_INF = 0xFFF0000000000000ull;  // key(+inf)

__device__ __forceinline__ u64 key_of(double x) {
    const u64 b = static_cast<u64>(__double_as_longlong(x));
    return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}
__device__ __forceinline__ double value_of(u64 k) {
    const u64 b = (k >> 63) ? (k & 0x7FFFFFFFFFFFFFFFull) : ~k;
    return __longlong_as_double(static_cast<long long>(b));
}
__device__ __forceinline__ double as_double(u64 bits) { return __longlong_as_double(static_cast<long long>(bits)); }
__device__ __forceinline__ u64 bits_of(double x) { return static_cast<u64>(__double_as_longlong(x)); }
__device__ __forceinline__ u64 load(const u64* p) { return __ldcg(p); }

// Append `item` for each lane that `wants` (the whole warp calls): one atomicAdd per warp.
template <class I>
__device__ __forceinline__ void warp_push(bool wants, I item, I* queue, u64* count) {
    const unsigned mask = __ballot_sync(0xFFFFFFFFu, wants);
    if (mask == 0) return;
    const int lane = threadIdx.x & 31, leader = __ffs(mask) - 1;
    u64 base = 0;
    if (lane == leader) base = atomicAdd(count, static_cast<u64>(__popc(mask)));
    base = __shfl_sync(0xFFFFFFFFu, base, leader);
    if (wants) queue[base + __popc(mask & ((1u << lane) - 1u))] = item;
}

// Everything a launch reads: the graph, the buffers and the state.
template <class I>
struct Arrays {
    const I* indptr;
    const I* indices;
    const double* weights;
    u64* dist;       // keys
    int* mark;       // round a vertex was last queued near for (RELAX), hop level (TREE)
    I* near0;
    I* near1;
    I* far0;
    I* far1;
    int* far_mark;   // far-pile epoch a vertex was last queued for
    I* chunk_vertex;
    I* chunk_start;
    I* parent;       // TREE: smallest tight parent (max of I until set)
    I* source_of;    // TREE: nearest source, or nullptr
    u64* state;
    // (Selected, not indexed: an indexed pair would live in local memory.)
    __device__ __forceinline__ I* near(int parity) const { return parity ? near1 : near0; }
    __device__ __forceinline__ I* far(int parity) const { return parity ? far1 : far0; }
};

// One edge u -> v of weight w from a vertex at distance du (inactive lanes too: the pushes are
// warp-wide).
template <class I, int OP>
__device__ __forceinline__ void visit(const Arrays<I>& a, bool active, I u, double du, I v, double w,
                                      int round, int epoch, double threshold, double limit, int parity,
                                      int far_parity) {
    bool near = false, far = false;
    if (active) {
        if (OP == RELAX) {
            const double nd = du + w;
            const u64 k = key_of(nd);
            if (nd <= limit && k < load(a.dist + v) && k < atomicMin(a.dist + v, k)) {
                // (A plain read first: most improved vertices are queued already.)
                if (nd < threshold) {
                    near = __ldcg(a.mark + v) != round + 1 && atomicExch(a.mark + v, round + 1) != round + 1;
                } else {
                    // (FAR_MIN bounds every far vertex's distance from below, queued before or not.)
                    far = __ldcg(a.far_mark + v) != epoch && atomicExch(a.far_mark + v, epoch) != epoch;
                    if (k < load(a.state + FAR_MIN)) atomicMin(a.state + FAR_MIN, k);
                }
            }
        } else {
            const double dv = value_of(load(a.dist + v));
            if (dv < __longlong_as_double(0x7FF0000000000000ll) && du + w == dv) {
                const int old = atomicCAS(a.mark + v, -1, round + 1);
                if (old == -1 || old == round + 1) atomicMin(a.parent + v, u);
                near = old == -1;
            }
        }
    }
    warp_push(near, v, a.near(parity ^ 1), a.state + NEAR_COUNT + (parity ^ 1));
    if (OP == RELAX) warp_push(far, v, a.far(far_parity), a.state + FAR_COUNT + far_parity);
}

// The warp's groups each take one work item (valid or not: the whole warp runs every step).
template <class I, int OP, int GROUP>
__device__ __forceinline__ void relax_range(const Arrays<I>& a, bool valid, I u, I begin, I end,
                                            int round, int epoch, double threshold, double limit,
                                            int parity, int far_parity) {
    const int lane = (threadIdx.x & 31) % GROUP;
    const double du = valid ? value_of(load(a.dist + u)) : 0.0;
    int steps = valid ? static_cast<int>((end - begin + GROUP - 1) / GROUP) : 0;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) steps = max(steps, __shfl_xor_sync(0xFFFFFFFFu, steps, offset));
    for (int step = 0; step < steps; ++step) {
        const I e = begin + static_cast<I>(step) * GROUP + lane;
        const bool active = valid && e < end;
        const I v = active ? a.indices[e] : I(0);
        const double w = active ? a.weights[e] : 0.0;
        visit<I, OP>(a, active, u, du, v, w, round, epoch, threshold, limit, parity, far_parity);
    }
}

template <class I>
__device__ __forceinline__ Arrays<I> arrays(const I* indptr, const I* indices, const double* weights, u64* dist,
                                            int* mark, I* near0, I* near1, I* far0, I* far1, int* far_mark,
                                            I* chunk_vertex, I* chunk_start, I* parent, I* source_of, u64* state) {
    return Arrays<I>{indptr, indices, weights, dist, mark, near0, near1, far0, far1, far_mark,
                     chunk_vertex, chunk_start, parent, source_of, state};
}

#define PATHS_PARAMETERS                                                                              \
    const I *indptr, const I *indices, const double *weights, u64 *dist, int *mark, I *near0, I *near1, \
        I *far0, I *far1, int *far_mark, I *chunk_vertex, I *chunk_start, I *parent, I *source_of, u64 *state
#define PATHS_ARGUMENTS \
    indptr, indices, weights, dist, mark, near0, near1, far0, far1, far_mark, chunk_vertex, chunk_start, parent, source_of, state

// The last block to finish a launch (after every other block's writes are visible) returns true.
__device__ __forceinline__ bool last_block(u64* ticket) {
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(ticket, 1ull) == gridDim.x - 1;
        if (last) {
            *ticket = 0;
            __threadfence();
        }
    }
    __syncthreads();
    return last;
}

// End of a round (one thread): the next near queue becomes current; a split is due when it is empty.
template <int OP>
__device__ void end_round(u64* words) {
    volatile u64* state = words;  // (other blocks' atomics: read from L2, not this SM's L1)
    const u64 parity = state[PARITY];
    state[NEAR_COUNT + parity] = 0;
    state[CHUNK_COUNT] = 0;
    state[PARITY] = parity ^ 1;
    const u64 round = state[ROUND] + 1;
    state[ROUND] = round;
    if (state[NEAR_COUNT + (parity ^ 1)] != 0) {
        if (round >= state[ROUND_LIMIT]) {
            state[OVERRUN] = 1;
            state[DONE] = 1;
        }
        return;
    }
    if (OP == TREE || state[FAR_COUNT + state[FAR_PARITY]] == 0) {
        state[DONE] = 1;
        return;
    }
    const double threshold = as_double(state[THRESHOLD]);
    const double base = fmax(threshold, value_of(state[FAR_MIN]));
    double next = base + as_double(state[DELTA]);
    if (!(next > base)) next = as_double(bits_of(base) + 1);  // delta below base's precision
    state[PREVIOUS] = bits_of(threshold);
    state[THRESHOLD] = bits_of(next);
    state[FAR_MIN] = KEY_INF;
    state[EPOCH] = state[EPOCH] + 1;
    state[SPLIT] = 1;
}

// A round's queued vertices, spread over `warps` warps (this one `warp`): each group relaxes the
// first CHUNK out-edges of its vertex and queues the rest as chunk tasks.
template <class I, int OP, int GROUP>
__device__ __forceinline__ void expand_round(const Arrays<I>& a, long long warp, long long warps) {
    volatile const u64* state = a.state;
    const int parity = static_cast<int>(state[PARITY]), far_parity = static_cast<int>(state[FAR_PARITY]);
    const long long count = static_cast<long long>(state[NEAR_COUNT + parity]);
    const int round = static_cast<int>(state[ROUND]), epoch = static_cast<int>(state[EPOCH]);
    const double threshold = as_double(state[THRESHOLD]), limit = as_double(state[LIMIT]);
    constexpr int PER_WARP = 32 / GROUP;
    constexpr long long CHUNK = static_cast<long long>(GROUP) * CHUNK_STEPS;
    const int group = (threadIdx.x & 31) / GROUP, lane = (threadIdx.x & 31) % GROUP;
    const I* queue = a.near(parity);
    for (long long first = warp * PER_WARP; first < count; first += warps * PER_WARP) {
        const long long item = first + group;
        const bool valid = item < count;
        I u = 0, begin = 0, end = 0;
        long long chunks = 0;  // chunk tasks beyond the first CHUNK edges
        if (valid) {
            u = __ldcg(queue + item);
            begin = a.indptr[u];
            end = a.indptr[u + 1];
            if (OP == TREE && a.source_of != nullptr && round > 0 && lane == 0)
                a.source_of[u] = __ldcg(a.source_of + __ldcg(a.parent + u));  // parent's level is done
            if (end - begin > CHUNK) chunks = (end - begin - 1) / CHUNK;
        }
        u64 base = 0;
        if (chunks > 0 && lane == 0) base = atomicAdd(a.state + CHUNK_COUNT, static_cast<u64>(chunks));
        base = __shfl_sync(0xFFFFFFFFu, base, (threadIdx.x & 31) - lane);
        if (chunks > 0) {
            for (long long c = lane; c < chunks; c += GROUP) {
                a.chunk_vertex[base + c] = u;
                a.chunk_start[base + c] = begin + static_cast<I>((c + 1) * CHUNK);
            }
            end = begin + static_cast<I>(CHUNK);
        }
        relax_range<I, OP, GROUP>(a, valid, u, begin, end, round, epoch, threshold, limit, parity, far_parity);
    }
}

// The round's chunk tasks.
template <class I, int OP, int GROUP>
__device__ __forceinline__ void chunk_round(const Arrays<I>& a, long long warp, long long warps) {
    volatile const u64* state = a.state;
    const int parity = static_cast<int>(state[PARITY]), far_parity = static_cast<int>(state[FAR_PARITY]);
    const long long count = static_cast<long long>(state[CHUNK_COUNT]);
    const int round = static_cast<int>(state[ROUND]), epoch = static_cast<int>(state[EPOCH]);
    const double threshold = as_double(state[THRESHOLD]), limit = as_double(state[LIMIT]);
    constexpr int PER_WARP = 32 / GROUP;
    constexpr long long CHUNK = static_cast<long long>(GROUP) * CHUNK_STEPS;
    const int group = (threadIdx.x & 31) / GROUP;
    for (long long first = warp * PER_WARP; first < count; first += warps * PER_WARP) {
        const long long item = first + group;
        const bool valid = item < count;
        I u = 0, begin = 0, end = 0;
        if (valid) {
            u = __ldcg(a.chunk_vertex + item);
            begin = __ldcg(a.chunk_start + item);
            end = a.indptr[u + 1];
            if (end - begin > CHUNK) end = begin + static_cast<I>(CHUNK);
        }
        relax_range<I, OP, GROUP>(a, valid, u, begin, end, round, epoch, threshold, limit, parity, far_parity);
    }
}

// The split over threads `thread` of `threads`: far vertices below the new threshold join the
// (empty) current near queue; those above it move, once each, to the other far pile.
template <class I>
__device__ __forceinline__ void split_far(const Arrays<I>& a, long long thread, long long threads) {
    volatile const u64* state = a.state;
    const int parity = static_cast<int>(state[PARITY]), far_parity = static_cast<int>(state[FAR_PARITY]);
    const long long count = static_cast<long long>(state[FAR_COUNT + far_parity]);
    const int round = static_cast<int>(state[ROUND]), epoch = static_cast<int>(state[EPOCH]);
    const u64 below = key_of(as_double(state[PREVIOUS])), threshold = key_of(as_double(state[THRESHOLD]));
    const I* far = a.far(far_parity);
    I* const kept = a.far(far_parity ^ 1);
    I* const near = a.near(parity);
    const long long lane = threadIdx.x & 31;
    for (long long first = thread - lane; first < count; first += threads) {
        const long long item = first + lane;
        bool to_near = false, to_keep = false;
        I v = 0;
        if (item < count) {
            v = __ldcg(far + item);
            const u64 k = load(a.dist + v);
            if (k >= below && k < threshold) {
                to_near = atomicExch(a.mark + v, round) != round;
            } else if (k >= threshold) {
                to_keep = atomicExch(a.far_mark + v, epoch) != epoch;
                if (to_keep) atomicMin(a.state + FAR_MIN, k);
            }
        }
        warp_push(to_near, v, near, a.state + NEAR_COUNT + parity);
        warp_push(to_keep, v, kept, a.state + FAR_COUNT + (far_parity ^ 1));
    }
}

// After a split (one thread): the kept pile becomes current.
__device__ __forceinline__ void end_split(u64* words) {
    volatile u64* state = words;
    const u64 far_parity = state[FAR_PARITY];
    state[FAR_COUNT + far_parity] = 0;
    state[FAR_PARITY] = far_parity ^ 1;
    state[SPLIT] = 0;
}

}  // namespace paths

// The kernels (global names, as the loader's expressions spell them).
using namespace paths;

// A round's queued vertices (nothing while a split is due: paths_split runs it first).
template <class I, int OP, int GROUP>
__global__ void __launch_bounds__(256) paths_expand(PATHS_PARAMETERS) {
    if (state[DONE] || state[SPLIT]) return;
    const long long warp = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    expand_round<I, OP, GROUP>(arrays(PATHS_ARGUMENTS), warp, static_cast<long long>(gridDim.x) * blockDim.x / 32);
}

// The round's chunk tasks; the last block then ends the round.
template <class I, int OP, int GROUP>
__global__ void __launch_bounds__(256) paths_chunks(PATHS_PARAMETERS) {
    if (state[DONE] || state[SPLIT]) return;
    const long long warp = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    chunk_round<I, OP, GROUP>(arrays(PATHS_ARGUMENTS), warp, static_cast<long long>(gridDim.x) * blockDim.x / 32);
    if (last_block(state + TICKET_CHUNKS) && threadIdx.x == 0) end_round<OP>(state);
}

// The split, when due; the last block swaps the piles.
template <class I>
__global__ void __launch_bounds__(256) paths_split(PATHS_PARAMETERS) {
    if (state[DONE] || !state[SPLIT]) return;
    split_far(arrays(PATHS_ARGUMENTS), static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x,
              static_cast<long long>(gridDim.x) * blockDim.x);
    if (last_block(state + TICKET_SPLIT) && threadIdx.x == 0) end_split(state);
}

// Rounds in one block while they are small: no launch, no host, between rounds (a road graph's
// thousands of rounds of a few hundred vertices each). Returns when the near queue (or a far
// pile to split) outgrows SMALL_LIMIT items, leaving the state at the start of a round or of a
// split, for the many-block kernels; or when done.
template <class I, int OP, int GROUP>
__global__ void __launch_bounds__(SMALL_BLOCK) paths_small(PATHS_PARAMETERS) {
    const Arrays<I> a = arrays(PATHS_ARGUMENTS);
    volatile u64* words = state;
    const long long warp = threadIdx.x / 32, warps = blockDim.x / 32;
    const u64 small = words[SMALL_LIMIT];
    while (true) {
        __syncthreads();  // (every thread has read the state words of the last round)
        if (words[DONE]) return;
        if (words[SPLIT]) {
            if (words[FAR_COUNT + words[FAR_PARITY]] > small) return;
            split_far(a, threadIdx.x, blockDim.x);
            __syncthreads();
            if (threadIdx.x == 0) end_split(state);
            continue;
        }
        if (words[NEAR_COUNT + words[PARITY]] > small) return;
        expand_round<I, OP, GROUP>(a, warp, warps);
        __syncthreads();
        chunk_round<I, OP, GROUP>(a, warp, warps);
        __syncthreads();
        if (threadIdx.x == 0) end_round<OP>(state);
    }
}

// Keys back to doubles, in place.
template <class I>
__global__ void paths_keys_to_distances(u64* dist, I n) {
    for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < n; i += static_cast<I>(gridDim.x) * blockDim.x)
        dist[i] = bits_of(value_of(dist[i]));
}

// Predecessors and nearest sources: unset parents (max of I) become -9999.
template <class I>
__global__ void paths_finish_tree(I* parent, I* source_of, const int* level, I n) {
    for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < n; i += static_cast<I>(gridDim.x) * blockDim.x) {
        const bool tree = level[i] > 0;
        if (!tree) parent[i] = I(-9999);
        if (source_of != nullptr && level[i] < 0) source_of[i] = I(-9999);
    }
}

