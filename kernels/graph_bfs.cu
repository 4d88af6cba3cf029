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
//   small (the persistent kernel alone; see the single-block kernel below for the other scheme):
//     while the frontier is small (at most the caller's limit, itself at most
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
//
// Single-block kernel (bfs_single_block, below): while the frontier is small a level is a chain
// of dependent memory round trips, and in the persistent kernel every other block spins at a
// grid barrier meanwhile (about 7 us a level on luxembourg_osm against SciPy's 3 us; measured on
// an H200, see docs/performance.md). When the visited set fits shared memory as a bitmap (one bit
// a vertex: about 1.5M vertices), the host instead launches pairs [bfs_single_block,
// bfs_persistent] without waiting, the two kernels alternating through the control words:
//   bfs_single_block: one block of 1024 threads, alone on the device. It seeds the sources on its
//     first launch, else loads the bitmap bfs_persistent left; then runs push levels while the
//     frontier is small (single_block_level): an edge's endpoint is read from indices (one round
//     trip), offered its parent (below), claimed with a shared atomicOr on the bitmap, and the
//     first claimer writes its level
//     (a plain store), appends it to the next frontier in shared memory and the global queue and
//     fetches its out-edge start and degree (the second round trip): two round trips a level. It
//     hands the frontier over (ring counters, huge list, state words) when it outgrows the block,
//     or when it is empty (the traversal is done).
//   bfs_persistent (hand_back_limit > 0): runs levels from the state it finds until the frontier is
//     small again (after at least one level, so every pair advances), then writes the bitmap of
//     reached vertices and returns. When it finds the frontier empty it finishes the predecessors
//     and sets BFS_FINISHED, which the host reads every few pairs; later launches return at once.
// Predecessors of single-block levels: the smallest-index parent needs to know which vertices
// were reached at this level rather than before, a second bitmap that would halve the graphs
// that fit (a 1M-vertex road graph would not). Instead every edge u -> v a single-block level
// walks offers the key (level of u) << 32 | u to parent_key[v] with atomicMin (a RED: nothing
// waits for it). Every in-neighbour of v is at most one level above v, and the level that reached
// v walked all of that level's edges, so the smallest key is v's smallest in-neighbour one level
// up, whatever the order. bfs_persistent's last pass copies it into preds for the vertices that
// grid levels did not give one (vertex indices < 2^32: the bitmap holds far fewer).
// Graphs whose bitmap does not fit keep the single persistent launch with block 0 running the
// small levels (run_small_levels).
//
// This file runs past 700 lines: both kernels share the control-word protocol and the level
// helpers, and splitting them would put that protocol in two places.
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
inline constexpr int BFS_SEEDED = 22;    // bfs_single_block has put the sources at level 0
inline constexpr int BFS_FINISHED = 23;  // levels and predecessors are final (the host reads it)
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

// Exclusive scan of one value per thread over a block of WARPS warps (WARPS <= 32); returns this
// thread's prefix, the total in *total. warp_total holds WARPS values of shared memory; a caller
// scanning again first waits at a __syncthreads (the totals are read after the last barrier here).
template <int WARPS>
__device__ __forceinline__ long long block_scan(long long x, long long* total, long long* warp_total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    long long inclusive = x;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const long long y = __shfl_up_sync(0xffffffffu, inclusive, d);
        if (lane >= d) inclusive += y;
    }
    if (lane == 31) warp_total[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        long long t = lane < WARPS ? warp_total[lane] : 0;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const long long y = __shfl_up_sync(0xffffffffu, t, d);
            if (lane >= d) t += y;
        }
        if (lane < WARPS) warp_total[lane] = t;  // inclusive over warps
    }
    __syncthreads();
    const long long before = warp ? warp_total[warp - 1] : 0;
    *total = warp_total[WARPS - 1];
    return before + inclusive - x;
}

template <class I>
__device__ __forceinline__ long long block_exclusive_scan(long long x, long long* total, BfsShared<I>& sh) {
    return block_scan<BFS_WARPS>(x, total, sh.warp_total);
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

// Single-block levels while the frontier has at most `limit` vertices (at most
// BFS_SINGLE_FRONTIER) and BFS_SINGLE_EDGES out-edges: bfs_persistent hands back exactly when
// bfs_single_block would run the level.
inline constexpr int BFS_SINGLE_BLOCK = 1024;
inline constexpr int BFS_SINGLE_WARPS = BFS_SINGLE_BLOCK / 32;
inline constexpr int BFS_SINGLE_FRONTIER = BFS_SINGLE_BLOCK;  // one frontier vertex per thread
inline constexpr int BFS_SINGLE_EDGES_PER_THREAD = 4;
inline constexpr long long BFS_SINGLE_EDGES = (long long)BFS_SINGLE_EDGES_PER_THREAD * BFS_SINGLE_BLOCK;

__device__ __forceinline__ bool single_block_level(int mode, long long nf, long long mf, long long limit) {
    return mode == BFS_PUSH && nf <= limit && mf <= BFS_SINGLE_EDGES;
}

// bfs_persistent's hand-back to bfs_single_block at `level` (every block calls it): the bitmap of
// reached vertices (levels final: this follows a grid barrier) and the traversal state. The
// frontier's queue and ring counters stay where the last level put them.
template <class I>
__device__ void hand_back(const BfsArgs<I>& a, unsigned* bits, long long level, int mode, long long previous,
                          long long unexplored) {
    const int lane = threadIdx.x & 31;
    const long long words = (a.n + 31) / 32, warps = (long long)gridDim.x * BFS_WARPS;
    for (long long w = ((long long)blockIdx.x * BFS_BLOCK + threadIdx.x) >> 5; w < words; w += warps) {
        const long long v = w * 32 + lane;
        const unsigned word = __ballot_sync(0xffffffffu, v < a.n && __ldcg(a.levels + v) != -1);
        if (lane == 0) bits[w] = word;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        a.control[BFS_LEVEL] = level;
        a.control[BFS_MODE] = mode;
        a.control[BFS_PREV] = previous;
        a.control[BFS_UNEXPLORED] = unexplored;
    }
}

// The predecessors' last pass: bfs_no_pred becomes -9999 (sources, unreached), except for a
// vertex reached by a single-block level, which takes the parent its smallest key names.
template <class I>
__device__ void finish_predecessors(const BfsArgs<I>& a, const unsigned long long* parent_key) {
    for (long long v = (long long)blockIdx.x * BFS_BLOCK + threadIdx.x; v < a.n; v += (long long)gridDim.x * BFS_BLOCK) {
        if (__ldcg(a.preds + v) != bfs_no_pred<I>::value) continue;
        const bool single = parent_key && __ldcg(a.levels + v) > 0;
        a.preds[v] = single ? I(__ldcg(parent_key + v) & 0xffffffffull) : I(-9999);
    }
}

// `small_limit`: block 0's levels (run_small_levels; 0 off). `hand_back_limit` > 0: alternate with
// bfs_single_block (`bits`: its bitmap; `parent_key`: its predecessor offers, null without
// predecessors), returning when a frontier has at most that many vertices. `seed`: this launch
// puts the sources at level 0 (else bfs_single_block did).
// The state (BFS_LEVEL, BFS_MODE, BFS_PREV, BFS_UNEXPLORED) starts from the control words: the
// host sets BFS_UNEXPLORED to the in-edge count, the rest zero.
template <class I>
__global__ void __launch_bounds__(BFS_BLOCK)
bfs_persistent(const I* __restrict__ indptr, const I* __restrict__ indices, const I* __restrict__ in_indptr,
               const I* __restrict__ in_indices, const long long n, const I* __restrict__ sources,
               const long long n_sources, int* levels, I* preds, I* queue0, I* queue1, I* huge0, I* huge1,
               long long* control, const long long small_limit, unsigned* bits, const long long hand_back_limit,
               const unsigned long long* parent_key, const int seed) {
    __shared__ BfsShared<I> sh;
    __shared__ BfsSmallShared<I> ss;
    const BfsArgs<I> a{indptr, indices, in_indptr, in_indices, n, levels, preds, {queue0, queue1}, {huge0, huge1},
                       control};
    if (bfs_read(control, BFS_FINISHED)) return;
    if (seed) {
        if (blockIdx.x == 0) seed_frontier(a, sources, n_sources, sh);
        grid_barrier(control);
    }
    long long level = bfs_read(control, BFS_LEVEL), previous = bfs_read(control, BFS_PREV);
    long long unexplored = bfs_read(control, BFS_UNEXPLORED);
    int mode = (int)bfs_read(control, BFS_MODE);
    bool ran = false;  // a level run in this launch: only then may it hand back, so every pair advances
    for (;;) {
        const int cur = (int)(level % 3);
        const long long nf = bfs_read(control, BFS_COUNT + cur), mf = bfs_read(control, BFS_EDGES + cur);
        const long long nh = bfs_read(control, BFS_HUGE + cur);
        if (nf == 0) break;
        const long long unexplored_now = unexplored - bfs_read(control, BFS_IN_EDGES + cur);
        const int direction = choose_direction(mode, nf, mf, unexplored_now, previous, n);
        if (hand_back_limit > 0 && ran && single_block_level(direction, nf, mf, hand_back_limit)) {
            hand_back(a, bits, level, mode, previous, unexplored);
            return;
        }
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
        ran = true;
        grid_barrier(control);
    }
    if (preds) finish_predecessors(a, parent_key);
    if (blockIdx.x == 0 && threadIdx.x == 0) control[BFS_FINISHED] = 1;
}

// ---------------------------------------------------------------- the single-block kernel

// A frontier in shared memory: where each vertex's out-edges start and how many (clamped to
// BFS_SINGLE_EDGES + 1: a larger one already ends the single-block levels, and the clamp keeps
// the scan in int), fetched when the vertex is appended; the sum of their in-degrees (directed
// graphs); how many were appended (more than BFS_SINGLE_FRONTIER: only the global queue holds them).
template <class I>
struct BfsSingleQueue {
    unsigned vertex[BFS_SINGLE_FRONTIER];  // < 2^32: the bitmap holds far fewer vertices
    long long start[BFS_SINGLE_FRONTIER];
    int degree[BFS_SINGLE_FRONTIER];
    unsigned long long in_edges;
    unsigned count;
};

template <class I>
struct BfsSingleShared {
    BfsSingleQueue<I> queue[2];
    int offset[BFS_SINGLE_FRONTIER];  // exclusive scan of the current frontier's degrees
    long long warp_total[BFS_SINGLE_WARPS];
    unsigned long long huge;
};

// Exclusive scan of one value per thread over the 1024 threads; the total in *total; ends at a
// barrier, so the next scan may follow at once.
template <class I>
__device__ long long single_block_scan(long long x, long long* total, BfsSingleShared<I>& ss) {
    const long long prefix = block_scan<BFS_SINGLE_WARPS>(x, total, ss.warp_total);
    __syncthreads();  // warp_total is reused by the next scan
    return prefix;
}

// The frontier of `level`, nf <= BFS_SINGLE_FRONTIER vertices in the global queue, into `q`.
template <class I>
__device__ void single_load_frontier(const BfsArgs<I>& a, long long level, long long nf, BfsSingleQueue<I>& q) {
    if (threadIdx.x == 0) {
        q.in_edges = 0;
        q.count = (unsigned)nf;
    }
    __syncthreads();
    if (threadIdx.x < nf) {
        const I v = __ldcg(a.queue[level & 1] + threadIdx.x);
        q.vertex[threadIdx.x] = (unsigned)v;
        const long long start = __ldg(a.indptr + v), degree = (long long)__ldg(a.indptr + v + 1) - start;
        q.start[threadIdx.x] = start;
        q.degree[threadIdx.x] = (int)(degree <= BFS_SINGLE_EDGES ? degree : BFS_SINGLE_EDGES + 1);
        if (a.in_indptr != a.indptr)
            atomicAdd(&q.in_edges, (unsigned long long)(__ldg(a.in_indptr + v + 1) - __ldg(a.in_indptr + v)));
    }
    __syncthreads();
}

// One push level: the frontier's `total` (<= BFS_SINGLE_EDGES) out-edges, BFS_SINGLE_EDGES_PER_THREAD
// per thread. Round trip one: each edge's endpoint (then its parent key offered); a shared
// atomicOr claims it; round trip two: the first claimer writes its level and fetches its
// out-edges' start and degree.
template <class I>
__device__ void single_push_level(const BfsArgs<I>& a, long long level, long long nf, long long total,
                                  const BfsSingleQueue<I>& cur, BfsSingleQueue<I>& next, const int* offset,
                                  unsigned* seen, unsigned long long* parent_key) {
    constexpr int K = BFS_SINGLE_EDGES_PER_THREAD;
    I v[K];
    unsigned u[K];
    bool fresh[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const long long e = (long long)k * BFS_SINGLE_BLOCK + threadIdx.x;
        v[k] = I(0);
        u[k] = 0;
        if (e < total) {
            int lo = 0, hi = (int)nf - 1;  // last frontier vertex whose offset <= e
            while (lo < hi) {
                const int mid = (lo + hi + 1) >> 1;
                if (offset[mid] <= e) lo = mid; else hi = mid - 1;
            }
            u[k] = cur.vertex[lo];
            v[k] = __ldg(a.indices + cur.start[lo] + (e - offset[lo]));
        }
    }
    if (parent_key) {
        const unsigned long long here = (unsigned long long)level << 32;
#pragma unroll
        for (int k = 0; k < K; ++k)
            if ((long long)k * BFS_SINGLE_BLOCK + threadIdx.x < total) atomicMin(parent_key + v[k], here | u[k]);
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
        fresh[k] = false;
        if ((long long)k * BFS_SINGLE_BLOCK + threadIdx.x < total) {
            const unsigned bit = 1u << (unsigned)((long long)v[k] & 31);
            fresh[k] = !(atomicOr(seen + ((long long)v[k] >> 5), bit) & bit);
        }
    }
    const bool directed = a.in_indptr != a.indptr;
    I* global_next = a.queue[(level + 1) & 1];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        if (!fresh[k]) continue;
        a.levels[v[k]] = (int)(level + 1);
        const unsigned slot = atomicAdd(&next.count, 1u);
        global_next[slot] = v[k];
        if (slot >= (unsigned)BFS_SINGLE_FRONTIER) continue;  // the level after runs on the grid
        next.vertex[slot] = (unsigned)v[k];
        const long long start = __ldg(a.indptr + v[k]), degree = (long long)__ldg(a.indptr + v[k] + 1) - start;
        next.start[slot] = start;
        next.degree[slot] = (int)(degree <= BFS_SINGLE_EDGES ? degree : BFS_SINGLE_EDGES + 1);
        if (directed)
            atomicAdd(&next.in_edges, (unsigned long long)(__ldg(a.in_indptr + v[k] + 1) - __ldg(a.in_indptr + v[k])));
    }
}

// The frontier of `level` (nf vertices in the global queue) handed to bfs_persistent: its exact
// counters into ring slot level % 3 (the other two cleared), its huge vertices listed, and the
// state. nf == 0 (the traversal is done) lets bfs_persistent finish the predecessors.
template <class I>
__device__ void single_hand_over(const BfsArgs<I>& a, long long level, long long nf, int mode, long long previous,
                                 long long unexplored, BfsSingleShared<I>& ss) {
    const I* frontier = a.queue[level & 1];
    I* huge = a.huge[level & 1];
    if (threadIdx.x == 0) ss.huge = 0;
    __syncthreads();
    long long out_sum = 0, in_sum = 0;
    for (long long i = threadIdx.x; i < nf; i += BFS_SINGLE_BLOCK) {
        const I u = __ldcg(frontier + i);
        const long long degree = (long long)__ldg(a.indptr + u + 1) - (long long)__ldg(a.indptr + u);
        out_sum += degree;
        in_sum += (long long)__ldg(a.in_indptr + u + 1) - (long long)__ldg(a.in_indptr + u);
        if (degree > BFS_HUGE_DEGREE) huge[atomicAdd(&ss.huge, 1ull)] = u;
    }
    long long out_edges, in_edges;
    single_block_scan(out_sum, &out_edges, ss);
    single_block_scan(in_sum, &in_edges, ss);
    if (threadIdx.x == 0) {
        const int now = (int)(level % 3);
        for (int k = 0; k < 3; ++k) {
            const bool here = k == now;
            a.control[BFS_COUNT + k] = here ? nf : 0;
            a.control[BFS_EDGES + k] = here ? out_edges : 0;
            a.control[BFS_HUGE + k] = here ? (long long)ss.huge : 0;
            a.control[BFS_IN_EDGES + k] = here ? in_edges : 0;
        }
        a.control[BFS_LEVEL] = level;
        a.control[BFS_MODE] = mode;
        a.control[BFS_PREV] = previous;
        a.control[BFS_UNEXPLORED] = unexplored;
        a.control[BFS_SEEDED] = 1;
    }
}

// The visited bitmap (dynamic shared memory, (n + 31) / 32 words) and the first frontier: the
// sources at level 0 on the first launch, else what bfs_persistent handed back. Returns nf.
template <class I>
__device__ long long single_start(const BfsArgs<I>& a, const I* sources, long long n_sources, const unsigned* bits,
                                  long long level, bool seeded, unsigned* seen) {
    const long long words = (a.n + 31) / 32;
    for (long long w = threadIdx.x; w < words; w += BFS_SINGLE_BLOCK) seen[w] = seeded ? __ldcg(bits + w) : 0u;
    if (seeded) return bfs_read(a.control, BFS_COUNT + (int)(level % 3));
    __syncthreads();
    for (long long s = threadIdx.x; s < n_sources; s += BFS_SINGLE_BLOCK) {
        const I v = sources[s];
        a.levels[v] = 0;
        a.queue[0][s] = v;
        atomicOr(seen + ((long long)v >> 5), 1u << (unsigned)((long long)v & 31));
    }
    return n_sources;
}

// One block of BFS_SINGLE_BLOCK threads, launched alone (grid of one block), with (n + 31) / 32
// words of dynamic shared memory; `limit` as bfs_persistent's hand_back_limit; `parent_key` (all
// ones at first; null without predecessors): the predecessor offers.
template <class I>
__global__ void __launch_bounds__(BFS_SINGLE_BLOCK)
bfs_single_block(const I* __restrict__ indptr, const I* __restrict__ indices, const I* __restrict__ in_indptr,
                 const I* __restrict__ in_indices, const long long n, const I* __restrict__ sources,
                 const long long n_sources, int* levels, I* queue0, I* queue1, I* huge0, I* huge1,
                 long long* control, const unsigned* bits, unsigned long long* parent_key, const long long limit) {
    extern __shared__ unsigned bfs_seen[];
    __shared__ BfsSingleShared<I> ss;
    const BfsArgs<I> a{indptr, indices, in_indptr, in_indices, n, levels, nullptr, {queue0, queue1}, {huge0, huge1},
                       control};
    if (bfs_read(control, BFS_FINISHED)) return;
    const bool seeded = bfs_read(control, BFS_SEEDED) != 0;
    long long level = bfs_read(control, BFS_LEVEL), previous = bfs_read(control, BFS_PREV);
    long long unexplored = bfs_read(control, BFS_UNEXPLORED);
    int mode = (int)bfs_read(control, BFS_MODE);
    long long nf = single_start(a, sources, n_sources, bits, level, seeded, bfs_seen);
    __syncthreads();
    int b = 0;
    if (nf <= BFS_SINGLE_FRONTIER) single_load_frontier(a, level, nf, ss.queue[0]);
    const bool symmetric = in_indptr == indptr;
    for (;;) {
        if (nf == 0 || nf > BFS_SINGLE_FRONTIER) break;
        long long total;
        const long long degree = threadIdx.x < nf ? ss.queue[b].degree[threadIdx.x] : 0;
        ss.offset[threadIdx.x] = (int)single_block_scan(degree, &total, ss);
        const long long in_edges = symmetric ? total : (long long)ss.queue[b].in_edges;
        const long long unexplored_now = unexplored - in_edges;
        const int direction = choose_direction(mode, nf, total, unexplored_now, previous, n);
        if (!single_block_level(direction, nf, total, limit)) break;
        if (threadIdx.x == 0) {
            ss.queue[b ^ 1].count = 0;
            ss.queue[b ^ 1].in_edges = 0;
        }
        __syncthreads();
        single_push_level(a, level, nf, total, ss.queue[b], ss.queue[b ^ 1], ss.offset, bfs_seen, parent_key);
        __syncthreads();
        unexplored = unexplored_now;
        previous = nf;
        mode = direction;
        ++level;
        b ^= 1;
        nf = ss.queue[b].count;
    }
    single_hand_over(a, level, nf, mode, previous, unexplored, ss);
}
