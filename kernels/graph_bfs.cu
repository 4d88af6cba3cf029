// Direction-optimising breadth-first search (Beamer, Asanovic & Patterson, SC'12) in one
// persistent kernel: the whole traversal runs on the device, levels separated by a grid barrier,
// so the host never waits per level (road graphs have thousands of levels).
//
// State (all on the device):
//   levels[v]  int32, -1 until reached, written with the level number (exact whatever the order).
//   preds[v]   the smallest-index in-neighbour on the previous level; bfs_no_pred until set, then
//              turned into -9999 at the end (the source and unreached vertices).
//   two queues of frontier vertices (level L reads queue L % 2 and writes queue (L + 1) % 2);
//   two lists of the frontier's "huge" vertices (more than BFS_HUGE_DEGREE out-edges), whose
//   out-edges a push level spreads over the whole grid instead of one block;
//   control words (below): per-level counters in rings of three (level L reads slot L % 3, adds
//   into slot (L + 1) % 3 and clears slot (L + 2) % 3, which nobody reads any more), so every
//   block reads the same values after a barrier and takes the same decisions.
//
// A level runs in one of three ways, chosen by every block from the same counters:
//   push (top-down): the queue is cut into one chunk per block; a block scans the out-degrees of
//     BFS_BLOCK queued vertices and shares their out-edges evenly between its threads (a binary
//     search in the scanned degrees finds each edge's vertex). A vertex first reached claims its
//     level with atomicCAS; every frontier vertex adjacent to a vertex reached at this level
//     offers itself with atomicMin, so the predecessor is the smallest one, whatever the order.
//   pull (bottom-up): every unreached vertex scans its in-edges (sorted) and stops at the first
//     one on the frontier: the smallest-index parent. One thread writes each vertex: no atomics.
//   small: while the frontier is small (at most the caller's limit, itself at most
//     BFS_SMALL_FRONTIER, vertices and BFS_SMALL_EDGES out-edges) block 0 runs push levels
//     alone, the frontier in shared memory, separated by __syncthreads (a fraction of a grid
//     barrier's cost), while the other blocks wait at the next grid barrier; it hands the state
//     back through separate control words (see run_small_levels). Road graphs spend most of
//     their hundreds of levels here.
// Beamer's rule picks push or pull: to pull when the frontier's out-edges exceed the unexplored
// in-edges / BFS_ALPHA and the frontier grows, back to push when the frontier has fewer than
// n / BFS_BETA vertices and shrinks.
//
// The grid barrier is a counter and a generation word in the control block; the kernel is
// launched cooperatively (all blocks resident, or the launch fails) with at most as many blocks
// as fit at once. Reads of data other blocks write (levels, queues, counters) go through L2
// (__ldcg), never through the non-coherent L1.
#include "common.cuh"

inline constexpr int BFS_BLOCK = 512;
inline constexpr int BFS_WARPS = BFS_BLOCK / 32;
inline constexpr long long BFS_HUGE_DEGREE = 8 * BFS_BLOCK;
inline constexpr long long BFS_SMALL_FRONTIER = 2 * BFS_BLOCK;
// At most 4 out-edges per thread: a single block's level is a chain of dependent memory round
// trips per edge it walks, so past a few edges per thread the grid is faster (a Kronecker graph
// whose first levels ran single-block with 32 edges per thread took twice as long as grid-only;
// measured on an H200, see docs/performance.md).
inline constexpr long long BFS_SMALL_EDGES = 4 * BFS_BLOCK;
inline constexpr long long BFS_ALPHA = 14, BFS_BETA = 24;
inline constexpr int BFS_PUSH = 0, BFS_PULL = 1;

// Control words (long long; sparsegpu/csgraph/_device_bfs.py allocates BFS_CONTROL_WORDS zeros).
inline constexpr int BFS_COUNT = 0;     // [3] vertices in the frontier
inline constexpr int BFS_EDGES = 3;     // [3] their out-edges
inline constexpr int BFS_HUGE = 6;      // [3] huge vertices among them
inline constexpr int BFS_IN_EDGES = 9;  // [3] their in-edges (leave the unexplored count)
inline constexpr int BFS_LEVEL = 12, BFS_MODE = 13, BFS_PREV = 14, BFS_UNEXPLORED = 15;
inline constexpr int BFS_ARRIVE = 16, BFS_GENERATION = 17;
inline constexpr int BFS_HANDOFF = 18;  // [4] count, out-edges, huge, in-edges of the frontier
                                        // single-block levels leave
inline constexpr int BFS_CONTROL_WORDS = 32;

template <class I> struct bfs_no_pred;
template <> struct bfs_no_pred<int> { static constexpr int value = 2147483647; };
template <> struct bfs_no_pred<long long> { static constexpr long long value = 9223372036854775807LL; };

template <class I>
struct BfsShared {
    long long offset[BFS_BLOCK];  // exclusive scan of the tile's out-degrees
    long long start[BFS_BLOCK];   // where each tile vertex's out-edges start
    I vertex[BFS_BLOCK];
    long long warp_total[BFS_WARPS];
    long long sums[BFS_WARPS];
    long long base;
};

__device__ __forceinline__ unsigned long long* bfs_word(long long* control, int i) {
    return reinterpret_cast<unsigned long long*>(control + i);
}
__device__ __forceinline__ long long bfs_read(const long long* control, int i) { return __ldcg(control + i); }

__device__ __forceinline__ void grid_barrier(long long* control) {
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned long long* generation = bfs_word(control, BFS_GENERATION);
        const unsigned long long seen = *generation;
        __threadfence();
        if (atomicAdd(bfs_word(control, BFS_ARRIVE), 1ull) == gridDim.x - 1) {
            atomicExch(bfs_word(control, BFS_ARRIVE), 0ull);
            __threadfence();
            atomicAdd(bfs_word(control, BFS_GENERATION), 1ull);
        } else {
            while (*generation == seen) __nanosleep(32);
        }
        __threadfence();
    }
    __syncthreads();
}

// Exclusive scan of one value per thread over the block; returns this thread's prefix, total in *total.
template <class I>
__device__ __forceinline__ long long block_exclusive_scan(long long x, long long* total, BfsShared<I>& sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    long long inclusive = x;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const long long y = __shfl_up_sync(0xffffffffu, inclusive, d);
        if (lane >= d) inclusive += y;
    }
    if (lane == 31) sh.warp_total[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        long long t = lane < BFS_WARPS ? sh.warp_total[lane] : 0;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const long long y = __shfl_up_sync(0xffffffffu, t, d);
            if (lane >= d) t += y;
        }
        if (lane < BFS_WARPS) sh.warp_total[lane] = t;  // inclusive over warps
    }
    __syncthreads();
    const long long before = warp ? sh.warp_total[warp - 1] : 0;
    *total = sh.warp_total[BFS_WARPS - 1];
    return before + inclusive - x;
}

// Block-wide append of the threads whose `take` is set; returns each one's slot (block-uniform call).
template <class I>
__device__ __forceinline__ long long block_append(bool take, unsigned long long* counter, BfsShared<I>& sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned mask = __ballot_sync(0xffffffffu, take);
    if (lane == 0) sh.sums[warp] = __popc(mask);
    __syncthreads();
    if (threadIdx.x == 0) {
        long long running = 0;
        for (int w = 0; w < BFS_WARPS; ++w) {
            const long long c = sh.sums[w];
            sh.sums[w] = running;
            running += c;
        }
        sh.base = running ? (long long)atomicAdd(counter, (unsigned long long)running) : 0;
    }
    __syncthreads();
    const long long slot = sh.base + sh.sums[warp] + __popc(mask & ((1u << lane) - 1u));
    __syncthreads();  // sh.sums and sh.base are reused by the next call
    return slot;
}

template <class I>
struct BfsArgs {
    const I* indptr;
    const I* indices;
    const I* in_indptr;
    const I* in_indices;
    long long n;
    int* levels;
    I* preds;
    I* queue[2];
    I* huge[2];
    long long* control;
};

// Per-thread sums of what this thread added to the next frontier, flushed once per level.
struct BfsTally {
    long long out_edges = 0, in_edges = 0;
};

template <class I>
__device__ __forceinline__ void add_to_next(const BfsArgs<I>& a, bool fresh, I v, long long level, BfsTally& tally,
                                            BfsShared<I>& sh) {
    const int nxt = (int)((level + 1) % 3);
    const long long slot = block_append(fresh, bfs_word(a.control, BFS_COUNT + nxt), sh);
    if (fresh) {
        a.queue[(level + 1) & 1][slot] = v;
        const long long out_degree = (long long)__ldg(a.indptr + v + 1) - (long long)__ldg(a.indptr + v);
        tally.out_edges += out_degree;
        tally.in_edges += (long long)__ldg(a.in_indptr + v + 1) - (long long)__ldg(a.in_indptr + v);
        if (out_degree > BFS_HUGE_DEGREE) {
            const unsigned long long h = atomicAdd(bfs_word(a.control, BFS_HUGE + nxt), 1ull);
            a.huge[(level + 1) & 1][h] = v;
        }
    }
}

template <class I>
__device__ __forceinline__ void flush_tally(const BfsArgs<I>& a, long long level, BfsTally& tally, BfsShared<I>& sh) {
    const int nxt = (int)((level + 1) % 3);
    long long total_out, total_in;
    block_exclusive_scan(tally.out_edges, &total_out, sh);
    __syncthreads();
    block_exclusive_scan(tally.in_edges, &total_in, sh);
    if (threadIdx.x == 0) {
        if (total_out) atomicAdd(bfs_word(a.control, BFS_EDGES + nxt), (unsigned long long)total_out);
        if (total_in) atomicAdd(bfs_word(a.control, BFS_IN_EDGES + nxt), (unsigned long long)total_in);
    }
    __syncthreads();
    tally = BfsTally{};
}

// The edge u -> v seen from the frontier at `level`.
template <class I>
__device__ __forceinline__ bool push_edge(const BfsArgs<I>& a, bool valid, I u, I v, int next) {
    if (!valid) return false;
    int old = __ldcg(a.levels + v);
    bool fresh = false;
    if (old == -1) {
        old = atomicCAS(a.levels + v, -1, next);
        fresh = old == -1;
    }
    if (a.preds && (fresh || old == next)) atomicMin(a.preds + v, u);
    return fresh;
}

// One push level over the participating blocks [block, block + blocks).
template <class I>
__device__ void push_level(const BfsArgs<I>& a, long long level, long long nf, long long nh, int block, int blocks,
                           BfsShared<I>& sh) {
    const I* queue = a.queue[level & 1];
    const int next = (int)(level + 1);
    BfsTally tally;
    const long long chunk = (nf + blocks - 1) / blocks;
    const long long begin = block * chunk, end = begin + chunk < nf ? begin + chunk : nf;
    for (long long tile = begin; tile < end; tile += BFS_BLOCK) {
        const long long i = tile + threadIdx.x;
        I u = 0;
        long long start = 0, degree = 0;
        if (i < end) {
            u = __ldcg(queue + i);
            start = __ldg(a.indptr + u);
            degree = (long long)__ldg(a.indptr + u + 1) - start;
            if (degree > BFS_HUGE_DEGREE) degree = 0;  // spread over the grid below
        }
        long long total;
        const long long offset = block_exclusive_scan(degree, &total, sh);
        sh.offset[threadIdx.x] = offset;
        sh.start[threadIdx.x] = start;
        sh.vertex[threadIdx.x] = u;
        __syncthreads();
        for (long long e0 = 0; e0 < total; e0 += BFS_BLOCK) {
            const long long e = e0 + threadIdx.x;
            const bool valid = e < total;
            I parent = 0, v = 0;
            if (valid) {
                int lo = 0, hi = BFS_BLOCK - 1;  // last entry whose offset <= e
                while (lo < hi) {
                    const int mid = (lo + hi + 1) >> 1;
                    if (sh.offset[mid] <= e) lo = mid; else hi = mid - 1;
                }
                parent = sh.vertex[lo];
                v = __ldg(a.indices + sh.start[lo] + (e - sh.offset[lo]));
            }
            add_to_next(a, push_edge(a, valid, parent, v, next), v, level, tally, sh);
        }
        __syncthreads();
    }
    const I* huge = a.huge[level & 1];
    const long long stride = (long long)blocks * BFS_BLOCK, me = (long long)block * BFS_BLOCK + threadIdx.x;
    for (long long k = 0; k < nh; ++k) {
        const I u = __ldcg(huge + k);
        const long long start = __ldg(a.indptr + u), stop = __ldg(a.indptr + u + 1);
        for (long long e0 = start; e0 < stop; e0 += stride) {
            const long long e = e0 + me;
            const bool valid = e < stop;
            const I v = valid ? __ldg(a.indices + e) : I(0);
            add_to_next(a, push_edge(a, valid, u, v, next), v, level, tally, sh);
        }
    }
    flush_tally(a, level, tally, sh);
}

// One pull level over the whole grid: every unreached vertex looks for its first in-neighbour
// on the frontier.
template <class I>
__device__ void pull_level(const BfsArgs<I>& a, long long level, BfsShared<I>& sh) {
    BfsTally tally;
    const int current = (int)level;
    for (long long v0 = (long long)blockIdx.x * BFS_BLOCK; v0 < a.n; v0 += (long long)gridDim.x * BFS_BLOCK) {
        const long long v = v0 + threadIdx.x;
        bool found = false;
        if (v < a.n && __ldcg(a.levels + v) == -1) {
            const long long stop = __ldg(a.in_indptr + v + 1);
            for (long long e = __ldg(a.in_indptr + v); e < stop; ++e) {
                const I u = __ldg(a.in_indices + e);
                if (__ldcg(a.levels + u) == current) {
                    found = true;
                    a.levels[v] = current + 1;
                    if (a.preds) a.preds[v] = u;
                    break;
                }
            }
        }
        add_to_next(a, found, (I)v, level, tally, sh);
    }
    flush_tally(a, level, tally, sh);
}

__device__ __forceinline__ int choose_direction(int mode, long long nf, long long mf, long long unexplored,
                                                long long previous, long long n) {
    if (mode == BFS_PUSH) return (mf * BFS_ALPHA > unexplored && nf > previous) ? BFS_PULL : BFS_PUSH;
    return (nf * BFS_BETA < n && nf < previous) ? BFS_PUSH : BFS_PULL;
}

// `limit`: the caller's bound on small frontiers (at most BFS_SMALL_FRONTIER; 0 turns the
// single-block levels off).
__device__ __forceinline__ bool small_frontier(int mode, long long nf, long long mf, long long limit) {
    return mode == BFS_PUSH && nf <= limit && mf <= BFS_SMALL_EDGES;
}

// The sources (distinct) at level 0; block 0 only.
template <class I>
__device__ void seed_frontier(const BfsArgs<I>& a, const I* sources, long long n_sources, BfsShared<I>& sh) {
    BfsTally tally;
    for (long long s0 = 0; s0 < n_sources; s0 += BFS_BLOCK) {
        const long long s = s0 + threadIdx.x;
        const bool valid = s < n_sources;
        const I v = valid ? sources[s] : I(0);
        if (valid) a.levels[v] = 0;
        add_to_next(a, valid, v, -1, tally, sh);  // level -1 writes slot 0 and queue 0
    }
    flush_tally(a, -1, tally, sh);
}

// Block 0 runs push levels alone while the frontier stays small, the frontier in shared memory.
// A level: each thread reads the degrees of BFS_SMALL_PER_THREAD frontier vertices, a block scan
// shares the level's out-edges evenly between the threads (a binary search in the scanned
// degrees gives each edge's vertex), and one __syncthreads ends it: a few dependent memory round
// trips per level, whatever the degrees. Every new vertex also goes to the global queue, so the
// grid can take over at any level. Returns with the state in the hand-off words.
inline constexpr int BFS_SMALL_PER_THREAD = (int)(BFS_SMALL_FRONTIER / BFS_BLOCK);

template <class I>
struct BfsSmallShared {
    I queue[2][BFS_SMALL_FRONTIER];
    long long start[BFS_SMALL_FRONTIER];  // where each frontier vertex's out-edges start
    int offset[BFS_SMALL_FRONTIER];       // exclusive scan of the out-degrees (< BFS_SMALL_EDGES)
    unsigned long long count[2], huge;
};

// The frontier's out-degrees scanned into ss.offset / ss.start; returns the out-edge total and
// sets *in_total (in-edges) and ss.huge (its huge vertices, also listed in `huge_list`). A
// frontier larger than the shared queue (the level that ends the single-block run) is read from
// `global_frontier` and only counted.
template <class I>
__device__ long long scan_small_frontier(const BfsArgs<I>& a, const I* frontier, const I* global_frontier,
                                         long long nf, I* huge_list, long long* in_total, BfsSmallShared<I>& ss,
                                         BfsShared<I>& sh) {
    long long start[BFS_SMALL_PER_THREAD] = {}, degree[BFS_SMALL_PER_THREAD] = {}, sum = 0, in_sum = 0;
    const bool symmetric = a.in_indptr == a.indptr, fits = nf <= BFS_SMALL_FRONTIER;
    if (threadIdx.x == 0) ss.huge = 0;
    __syncthreads();
    for (long long base = 0; base < nf; base += BFS_SMALL_FRONTIER) {  // one pass when it fits
#pragma unroll
        for (int k = 0; k < BFS_SMALL_PER_THREAD; ++k) {
            const long long j = base + (long long)threadIdx.x * BFS_SMALL_PER_THREAD + k;
            start[k] = degree[k] = 0;
            if (j < nf) {
                const I u = fits ? frontier[j] : __ldcg(global_frontier + j);
                start[k] = __ldg(a.indptr + u);
                degree[k] = (long long)__ldg(a.indptr + u + 1) - start[k];
                if (!symmetric) in_sum += (long long)__ldg(a.in_indptr + u + 1) - (long long)__ldg(a.in_indptr + u);
                if (degree[k] > BFS_HUGE_DEGREE) huge_list[atomicAdd(&ss.huge, 1ull)] = u;
            }
            sum += degree[k];
        }
    }
    long long total;
    long long offset = block_exclusive_scan(sum, &total, sh);
    if (fits) {
#pragma unroll
        for (int k = 0; k < BFS_SMALL_PER_THREAD; ++k) {
            const int j = threadIdx.x * BFS_SMALL_PER_THREAD + k;
            ss.start[j] = start[k];
            ss.offset[j] = (int)(offset < BFS_SMALL_EDGES ? offset : BFS_SMALL_EDGES);
            offset += degree[k];
        }
    }
    if (symmetric) {
        *in_total = total;
    } else {
        __syncthreads();
        long long in_all;
        block_exclusive_scan(in_sum, &in_all, sh);
        *in_total = in_all;
    }
    __syncthreads();
    return total;
}

template <class I>
__device__ void run_small_levels(const BfsArgs<I>& a, long long level, int mode, long long previous,
                                 long long unexplored, long long limit, BfsSmallShared<I>& ss, BfsShared<I>& sh) {
    const int slot = (int)(level % 3);
    long long nf = bfs_read(a.control, BFS_COUNT + slot), mf = bfs_read(a.control, BFS_EDGES + slot);
    long long in_cur = bfs_read(a.control, BFS_IN_EDGES + slot), nh = 0;
    for (long long i = threadIdx.x; i < nf && i < BFS_SMALL_FRONTIER; i += BFS_BLOCK)
        ss.queue[0][i] = __ldcg(a.queue[level & 1] + i);
    int b = 0;
    bool first = true;
    for (;;) {
        long long in_total;
        const long long total = scan_small_frontier(a, ss.queue[b], a.queue[level & 1], nf, a.huge[level & 1],
                                                    &in_total, ss, sh);
        nh = (long long)ss.huge;
        if (!first) {  // the first level's counters are the ones bfs_persistent decided with
            mf = total;
            in_cur = in_total;
        }
        first = false;
        const long long unexplored_now = unexplored - in_cur;
        const int direction = choose_direction(mode, nf, mf, unexplored_now, previous, a.n);
        if (nf == 0 || !small_frontier(direction, nf, mf, limit)) break;
        if (threadIdx.x == 0) ss.count[b ^ 1] = 0;
        __syncthreads();
        const int next = (int)(level + 1);
        I* global_next = a.queue[(level + 1) & 1];
        for (long long e = threadIdx.x; e < total; e += BFS_BLOCK) {
            int lo = 0, hi = (int)nf - 1;  // last frontier vertex whose offset <= e
            while (lo < hi) {
                const int mid = (lo + hi + 1) >> 1;
                if (ss.offset[mid] <= e) lo = mid; else hi = mid - 1;
            }
            const I u = ss.queue[b][lo];
            const I v = __ldg(a.indices + ss.start[lo] + (e - ss.offset[lo]));
            if (!push_edge(a, true, u, v, next)) continue;
            const unsigned long long at = atomicAdd(&ss.count[b ^ 1], 1ull);
            if (at < (unsigned long long)BFS_SMALL_FRONTIER) ss.queue[b ^ 1][at] = v;
            global_next[at] = v;
        }
        __syncthreads();
        unexplored = unexplored_now;
        previous = nf;
        mode = direction;
        ++level;
        b ^= 1;
        nf = (long long)ss.count[b];
    }
    // The frontier reached goes to hand-off words, not to the counter rings: a block slower than
    // block 0 may still be reading this level's ring slot; bfs_persistent copies them into the
    // ring after the next grid barrier.
    __syncthreads();
    if (threadIdx.x == 0) {
        a.control[BFS_HANDOFF + 0] = nf;
        a.control[BFS_HANDOFF + 1] = mf;
        a.control[BFS_HANDOFF + 2] = nh;
        a.control[BFS_HANDOFF + 3] = in_cur;
        a.control[BFS_LEVEL] = level;
        a.control[BFS_MODE] = mode;
        a.control[BFS_PREV] = previous;
        a.control[BFS_UNEXPLORED] = unexplored;
    }
}

// After the single-block levels: every block has read the hand-off (so nothing reads the rings
// now); one thread puts the frontier's counters into the ring slot of `level` and clears the
// others, and a second barrier publishes them.
__device__ __forceinline__ void take_handoff(long long* control, long long level) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        const int now = (int)(level % 3);
        for (int k = 0; k < 3; ++k) {
            const bool here = k == now;
            control[BFS_COUNT + k] = here ? control[BFS_HANDOFF + 0] : 0;
            control[BFS_EDGES + k] = here ? control[BFS_HANDOFF + 1] : 0;
            control[BFS_HUGE + k] = here ? control[BFS_HANDOFF + 2] : 0;
            control[BFS_IN_EDGES + k] = here ? control[BFS_HANDOFF + 3] : 0;
        }
    }
    grid_barrier(control);
}

template <class I>
__global__ void __launch_bounds__(BFS_BLOCK)
bfs_persistent(const I* __restrict__ indptr, const I* __restrict__ indices, const I* __restrict__ in_indptr,
               const I* __restrict__ in_indices, const long long n, const long long in_edges,
               const I* __restrict__ sources, const long long n_sources, int* levels, I* preds, I* queue0,
               I* queue1, I* huge0, I* huge1, long long* control, const long long small_limit) {
    __shared__ BfsShared<I> sh;
    __shared__ BfsSmallShared<I> ss;
    const BfsArgs<I> a{indptr, indices, in_indptr, in_indices, n, levels, preds, {queue0, queue1}, {huge0, huge1},
                       control};
    if (blockIdx.x == 0) seed_frontier(a, sources, n_sources, sh);
    grid_barrier(control);
    long long level = 0, previous = 0, unexplored = in_edges;
    int mode = BFS_PUSH;
    for (;;) {
        const int cur = (int)(level % 3);
        const long long nf = bfs_read(control, BFS_COUNT + cur), mf = bfs_read(control, BFS_EDGES + cur);
        const long long nh = bfs_read(control, BFS_HUGE + cur);
        if (nf == 0) break;
        const long long unexplored_now = unexplored - bfs_read(control, BFS_IN_EDGES + cur);
        const int direction = choose_direction(mode, nf, mf, unexplored_now, previous, n);
        if (gridDim.x > 1 && small_frontier(direction, nf, mf, small_limit)) {
            if (blockIdx.x == 0) run_small_levels(a, level, mode, previous, unexplored, small_limit, ss, sh);
            grid_barrier(control);
            level = bfs_read(control, BFS_LEVEL);
            mode = (int)bfs_read(control, BFS_MODE);
            previous = bfs_read(control, BFS_PREV);
            unexplored = bfs_read(control, BFS_UNEXPLORED);
            take_handoff(control, level);
            continue;
        }
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            const int old = (int)((level + 2) % 3);
            control[BFS_COUNT + old] = control[BFS_EDGES + old] = 0;
            control[BFS_HUGE + old] = control[BFS_IN_EDGES + old] = 0;
        }
        if (direction == BFS_PUSH) push_level(a, level, nf, nh, blockIdx.x, gridDim.x, sh);
        else pull_level(a, level, sh);
        unexplored = unexplored_now;
        previous = nf;
        mode = direction;
        ++level;
        grid_barrier(control);
    }
    if (preds) {
        for (long long v = (long long)blockIdx.x * BFS_BLOCK + threadIdx.x; v < n; v += (long long)gridDim.x * BFS_BLOCK)
            if (__ldcg(preds + v) == bfs_no_pred<I>::value) preds[v] = I(-9999);
    }
}
