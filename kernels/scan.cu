// Prefix scans (inclusive and exclusive), plain or segmented, for any operator object
// (sg::Sum<V>, sg::Min<V>, sg::Max<V>).
//
// Tiles: SCAN_BLOCK threads, ITEMS consecutive elements per thread (SCAN_THREAD_BYTES of values
// plain, SCAN_SEGMENTED_THREAD_BYTES of values segmented). A plain tile lives in dynamic shared
// memory (SCAN_BLOCK * SCAN_THREAD_BYTES bytes, passed at launch by sparsegpu/primitives.py,
// which opts in past 48 KiB) from its load to its store, so registers do not grow with the
// tile: each warp copies its 32 * ITEMS elements into its slice (cp.async 16-byte copies
// striped across the lanes when the tile is whole and 16-byte aligned (VEC), else element by
// element), each thread then reads its ITEMS consecutive elements from there (an XOR swizzle,
// TileSwizzle, keeps both access patterns free of bank conflicts), and the outputs go back the
// same way. Segmented tiles stay in registers. A tile is scanned by a serial fold per thread, a
// warp-shuffle scan of the thread totals and a scan of the warp totals.
//
// Two ways to cover many tiles:
//  - scan_single_pass: one pass (reads n, writes n), decoupled look-back (Merrill & Garland):
//    each tile publishes its aggregate, then its inclusive prefix, and gets its own prefix from
//    its predecessors' published values. The first WARPS warps of the block (a template
//    parameter, LOOKBACK_WARPS unless named; any of 1 ... SCAN_BLOCK / 32) poll at once, one
//    predecessor per thread: a span of SPAN = 32 * WARPS tiles per L2 round trip (with a single
//    warp, the prefixes could not advance faster than 32 tiles per round trip).
//    ORDERED = false (integers, and floats when not deterministic): the nearest inclusive prefix
//    in the span, joined with the aggregates after it; if the span has none, its aggregates are
//    joined and the next span is polled. Exact for integers; for floats the association
//    depends on timing.
//    ORDERED = true (the default float path, bitwise reproducible): a fixed association. The
//    exclusive prefix of tile t is
//        E_t = fold of [P_{t-SPAN}, a_{t-SPAN+1}, ..., a_{t-1}]        (P_{<0}, a_{<0}: identity)
//    with P_t = E_t op a_t (P_0 = a_0) and a_t the tile aggregates, folded by a fixed tree: a
//    balanced pairwise tree over each 32 consecutive entries (a warp's shuffle tree), then those
//    SPAN / 32 partial results left to right. So each tile waits for exactly one inclusive
//    prefix, SPAN tiles back, plus the aggregates in between (which every tile publishes as
//    soon as it is loaded), and never for a serial fold: the prefixes advance SPAN tiles per
//    round trip, and the bits do not depend on timing. The float error grows with
//    t / SPAN + log2(SPAN) additions instead of t.
//    The NumPy reference, ordered_lookback_scan in sparsegpu/reference/primitives.py, computes
//    the same bits when told the same SPAN and tile (sparsegpu/primitives.py passes this file's).
//  - reduce-then-scan, reproducible: scan_chunk_totals (each block folds a fixed range of tiles),
//    scan_totals (one block scans the chunk totals), scan_chunks (each block scans its range again,
//    starting from its chunk's prefix). Reads x twice: about 2/3 of the single pass's throughput.
//
// Look-back state (one buffer of 64-bit words, kept by the caller between launches, zeroed when
// first allocated, never reset by the host):
//   state[0] = (epoch << 32) | ticket. Each block takes a ticket with one atomicAdd: its tile
//     number (tiles start in ticket order, so a tile only ever waits on tiles with smaller
//     tickets, already running: no deadlock whatever the scheduling) and the launch's epoch.
//     The block holding the last ticket writes (epoch + 1) << 32: the next launch finds ticket 0
//     and a new epoch, with no memset and no extra launch (also under graph replay).
//   Tile t's two descriptors: its aggregate at state[1 + 2 t WORDS + k] and its inclusive
//     prefix at state[1 + (2 t + 1) WORDS + k] (separate, so the ordered look-back can still
//     read a predecessor's aggregate after that predecessor has finished), each value cut into
//     WORDS 32-bit chunks, every chunk stored with a status in the upper half of the same
//     64-bit word (one relaxed 64-bit store, single-copy atomic): status = (epoch << 2) |
//     AGGREGATE or INCLUSIVE_PREFIX. A reader takes a value only when every word carries the
//     expected status of this launch's epoch; anything else (a word of an older launch, or a
//     value caught half written) reads as "not yet" and is polled again. Status and value
//     travel in the same words, so no fence is needed between them.
//
// Segmented scans run the same kernels over (value, head) pairs with the operator
// Segmented<V, Op>: (a, b) -> b.head ? b : (op(a.v, b.v), a.head | b.head), which is associative
// (not commutative: every fold here keeps tile order, earlier on the left).
#include "common.cuh"

// ---------------------------------------------------------------- tuning (compile-time knobs)
// sparsegpu/primitives.py mirrors SCAN_BLOCK, SCAN_THREAD_BYTES, SCAN_SEGMENTED_THREAD_BYTES and
// LOOKBACK_WARPS (tile sizes, look-back state size and the ordered association), and
// tests/test_primitives.py checks that it does.
inline constexpr int SCAN_BLOCK = 256;
// Bytes of values per thread, multiples of 16: a plain tile is SCAN_BLOCK * 256 B = 64 KiB of
// (dynamic) shared memory, so 3 blocks fit on an SM (228 KiB); a segmented tile is held in
// registers. scan_single_pass also takes the plain size as a template parameter (the tests try
// 128, 192 and 256). 256 B with 2 polling warps is the fastest of those (measured on an H200,
// see docs/performance.md): fewer, larger tiles leave fewer look-back round trips, and two
// warps poll less L2 than eight.
inline constexpr int SCAN_THREAD_BYTES = 256;
inline constexpr int SCAN_SEGMENTED_THREAD_BYTES = 32;
// Shared memory of an SM (H100 and H200: 228 KiB) and what the driver keeps of it per block.
inline constexpr int SCAN_SM_SHARED_BYTES = 228 * 1024, SCAN_BLOCK_RESERVED_SHARED_BYTES = 1024;
// Blocks per SM a single-pass kernel with plain tiles of THREAD_BYTES per thread is compiled for:
// as many as the tiles' shared memory lets reside (plus the driver's reservation and up to 1 KiB
// of static shared variables per block), at most 2048 threads (caps registers at
// 65536 / (256 * 6) = 42 for 128-byte threads, 64 for 192, 85 for 256). Segmented tiles are held in
// registers and get more of them.
template <int THREAD_BYTES> __host__ __device__ constexpr int scan_min_blocks() {
    constexpr int fit = SCAN_SM_SHARED_BYTES / (SCAN_BLOCK * THREAD_BYTES + SCAN_BLOCK_RESERVED_SHARED_BYTES + 1024);
    return fit < 2048 / SCAN_BLOCK ? fit : 2048 / SCAN_BLOCK;
}
inline constexpr int SCAN_SEGMENTED_MIN_BLOCKS = 4;
// Reduce-then-scan: blocks per SM, all resident (primitives.py SCAN_CHUNKS_PER_SM).
inline constexpr int SCAN_CHUNKS_PER_SM = 3;  // three 64 KiB tiles fit an SM
// Warps that poll predecessors (one each per thread): the look-back span is 32 * LOOKBACK_WARPS
// tiles. Any of 1 ... SCAN_BLOCK / 32 is correct (scan_single_pass's WARPS parameter; the GPU
// tests cover them all); primitives.py mirrors it and hands the span 32 * LOOKBACK_WARPS to the
// NumPy reference, whose association depends on it.
inline constexpr int LOOKBACK_WARPS = 2;
// Nanoseconds a polling thread sleeps after finding a predecessor not yet published (0: spin).
// Spinning threads re-read the same few L2 lines; a pause leaves L2 to the loads and stores.
inline constexpr int LOOKBACK_BACKOFF_NS = 0;
// Copy whole tiles into shared memory with cp.async (no registers in flight) rather than
// through registers with streaming loads. Off: through registers is faster (measured on an
// H200, see docs/performance.md).
inline constexpr bool SCAN_CP_ASYNC = false;

static_assert(SCAN_BLOCK % 32 == 0 && LOOKBACK_WARPS >= 1 && LOOKBACK_WARPS <= SCAN_BLOCK / 32,
              "the look-back warps are warps of the block");
static_assert(SCAN_THREAD_BYTES % 16 == 0 && SCAN_SEGMENTED_THREAD_BYTES % 16 == 0, "whole 16-byte vectors");

namespace sg {

// An element of a segmented scan: a value and whether a segment starts at or inside it.
template <class V> struct Flagged {
    V v;
    int head;
};

template <class V, class Op> struct Segmented {
    using T = Flagged<V>;
    static __device__ __forceinline__ T identity() { return T{Op::identity(), 0}; }
    __device__ __forceinline__ T operator()(T a, T b) const {
        return T{b.head ? b.v : Op{}(a.v, b.v), a.head | b.head};
    }
};

template <class V> __device__ __forceinline__ Flagged<V> shfl_up(Flagged<V> a, int delta) {
    return Flagged<V>{shfl_up(a.v, delta), __shfl_up_sync(FULL_MASK, a.head, delta)};
}
template <class V> __device__ __forceinline__ Flagged<V> shfl_down(Flagged<V> a, int delta, int width = 32) {
    return Flagged<V>{shfl_down(a.v, delta, width), __shfl_down_sync(FULL_MASK, a.head, delta, width)};
}

// ---------------------------------------------------------------- tile descriptors
__device__ __forceinline__ void store_relaxed(unsigned long long* p, unsigned long long v) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long load_relaxed(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

inline constexpr unsigned AGGREGATE = 1, INCLUSIVE_PREFIX = 2;

template <class T> struct Descriptor {
    static constexpr int WORDS = (int)((sizeof(T) + 3) / 4);
    union Chunks {
        T value;
        unsigned word[WORDS];
    };
    // Tile t's descriptor of `kind` (its aggregate, or its inclusive prefix).
    static __device__ __forceinline__ unsigned long long* of(unsigned long long* descriptors, long long t, unsigned kind) {
        return descriptors + (2 * t + (kind == INCLUSIVE_PREFIX ? 1 : 0)) * WORDS;
    }
    // Status word of `kind` for this launch's epoch (30 bits of it; the host renews the buffer
    // long before the epoch wraps).
    static __device__ __forceinline__ unsigned status(unsigned long long epoch, unsigned kind) {
        return ((unsigned)epoch << 2) | kind;
    }
    static __device__ __forceinline__ void publish(unsigned long long* descriptors, long long t, unsigned kind,
                                                   unsigned long long epoch, T value) {
        unsigned long long* const d = of(descriptors, t, kind);
        const unsigned long long tag = (unsigned long long)status(epoch, kind) << 32;
        Chunks c;
        c.value = value;
#pragma unroll
        for (int k = 0; k < WORDS; ++k) store_relaxed(d + k, tag | c.word[k]);
    }
    // Whether tile t's descriptor of `kind` is published in this launch (then `value` is set).
    static __device__ __forceinline__ bool read(unsigned long long* descriptors, long long t, unsigned kind,
                                                unsigned long long epoch, T& value) {
        const unsigned long long* const d = of(descriptors, t, kind);
        unsigned long long w[WORDS];
#pragma unroll
        for (int k = 0; k < WORDS; ++k) w[k] = load_relaxed(d + k);
        const unsigned tag = status(epoch, kind);
        bool current = true;
        Chunks c;
#pragma unroll
        for (int k = 0; k < WORDS; ++k) {
            current = current && (unsigned)(w[k] >> 32) == tag;
            c.word[k] = (unsigned)w[k];
        }
        value = c.value;
        return current;
    }
};

__device__ __forceinline__ void backoff() {
    if (LOOKBACK_BACKOFF_NS > 0) __nanosleep(LOOKBACK_BACKOFF_NS);
}

// ---------------------------------------------------------------- streaming 16-byte accesses
// Evict-first: the data passes once, so the look-back descriptors keep their place in L2.
template <class V> __device__ __forceinline__ vec16<V> load_stream(const vec16<V>* p) {
    union {
        int4 raw;
        vec16<V> vec;
    } u;
    u.raw = __ldcs(reinterpret_cast<const int4*>(p));
    return u.vec;
}
template <class V> __device__ __forceinline__ void store_stream(vec16<V>* p, const vec16<V>& v) {
    union {
        int4 raw;
        vec16<V> vec;
    } u;
    u.vec = v;
    __stcs(reinterpret_cast<int4*>(p), u.raw);
}
// 16 bytes from global to shared memory: cp.async (L2 only, evict-first; completes at
// copy_to_shared_wait) where the device has it and SCAN_CP_ASYNC asks for it, else through a
// register.
template <class V>
__device__ __forceinline__ void copy_to_shared(vec16<V>* dst, const vec16<V>* src, unsigned long long policy) {
#if __CUDA_ARCH__ >= 800
    if (SCAN_CP_ASYNC) {
        unsigned shared_address;
        asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(shared_address) : "l"(dst));
        asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(shared_address), "l"(src),
                     "l"(policy) : "memory");
        return;
    }
#endif
    *dst = load_stream(src);
}
__device__ __forceinline__ void copy_to_shared_wait() {
#if __CUDA_ARCH__ >= 800
    if (SCAN_CP_ASYNC) asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// Exclusive scan of one value per thread over the block, in thread order; `total` gets the
// block's fold. `warp_sums` holds BLOCK / 32 values; ends with a barrier so it can be reused.
template <int BLOCK, class Op, class T>
__device__ __forceinline__ T block_exclusive_scan(T v, Op op, T* warp_sums, T& total) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    T inclusive = v;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        const T up = shfl_up(inclusive, d);
        if (lane >= d) inclusive = op(up, inclusive);
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        T w = lane < BLOCK / 32 ? warp_sums[lane] : Op::identity();
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
            const T up = shfl_up(w, d);
            if (lane >= d) w = op(up, w);
        }
        if (lane < BLOCK / 32) warp_sums[lane] = w;
    }
    __syncthreads();
    total = warp_sums[BLOCK / 32 - 1];
    const T before_in_warp = shfl_up(inclusive, 1);
    T exclusive;
    if (warp == 0) exclusive = lane == 0 ? Op::identity() : before_in_warp;
    else exclusive = lane == 0 ? warp_sums[warp - 1] : op(warp_sums[warp - 1], before_in_warp);
    __syncthreads();
    return exclusive;
}

// Where vector i of a warp's shared tile of 32 * QUADS 16-byte vectors is stored (lane i / QUADS's
// vector i % QUADS): within each row of 8 vectors (128 bytes, all the banks) the column is XORed
// with a function of the row number r = i / 8 alone, so each row is permuted in place. With
// QUADS = 2^s * odd that is (r >> max(s - 3, 0)) & (min(2^s, 8) - 1): nothing for odd QUADS (a
// thread's own vectors already fall in distinct columns), the low s bits of r for s < 3, and r
// counted in rows of 2^(s-3) for s >= 3 (the owner lane when QUADS is a power of two). The 8
// lanes of a phase then hit 8 different columns both when storing striped vectors
// (q * 32 + lane) and when reading a thread's own (lane * QUADS + q), for any QUADS (12 too):
// conflict_free() checks it at compile time.
template <int QUADS> struct TileSwizzle {
    static constexpr int POW2 = QUADS & -QUADS;  // 2^s
    static_assert(QUADS >= 1 && POW2 <= 64, "1 to 64 (times odd) vectors per thread");
    static constexpr int ROW_SHIFT = POW2 == 64 ? 3 : POW2 == 32 ? 2 : POW2 == 16 ? 1 : 0;
    static constexpr int COLUMN_MASK = (POW2 < 8 ? POW2 : 8) - 1;
    static __host__ __device__ __forceinline__ constexpr int swizzled(int i) {
        return i ^ (((i >> 3) >> ROW_SHIFT) & COLUMN_MASK);
    }
    // Whether every phase (8 lanes, 16 bytes each) of both access patterns covers all 8 columns.
    static __host__ __device__ constexpr bool conflict_free() {
        for (int phase = 0; phase < 4; ++phase)
            for (int q = 0; q < QUADS; ++q) {
                unsigned striped = 0, own = 0;
                for (int lane = 8 * phase; lane < 8 * phase + 8; ++lane) {
                    striped |= 1u << (swizzled(q * 32 + lane) % 8);
                    own |= 1u << (swizzled(lane * QUADS + q) % 8);
                }
                if (striped != 0xffu || own != 0xffu) return false;
            }
        return true;
    }
};

// What a scan kernel reads and writes, as two steps around the tile's scan:
//   load_fold(first, n, full): stage the thread's ITEMS items (elements first, first + 1, ...;
//     past n: the identity) and return their fold, left to right;
//   scan_store(prefix, first, n, full): write the thread's outputs given the fold of everything
//     before its first item, adding the items one by one.
// `full`: the whole tile lies below n. Every thread of a warp calls both.
//
// Dense: y[i] = inclusive or exclusive prefix. The items live in the calling warp's slice of
// shared memory (`buffer`, BUFFER vectors) between the two steps.
template <class V, class Op, int ITEMS, bool INCLUSIVE, bool VEC>
struct DenseIO {
    using T = V;
    using ScanOp = Op;
    using Vec = vec16<V>;
    static constexpr int QUADS = ITEMS / Vec::N;  // 16-byte vectors per thread
    static_assert(QUADS * Vec::N == ITEMS, "a thread's items are whole 16-byte vectors");
    static constexpr int BUFFER = 32 * QUADS;
    // Vector i of the warp's tile (lane i / QUADS's vector i % QUADS) is stored at swizzled(i).
    static_assert(TileSwizzle<QUADS>::conflict_free(), "the swizzle leaves bank conflicts for this many vectors per thread");
    static __device__ __forceinline__ int swizzled(int i) { return TileSwizzle<QUADS>::swizzled(i); }
    const V* __restrict__ x;
    V* __restrict__ y;
    Vec* buffer;

    __device__ __forceinline__ V& item(int lane, int k) const {
        return buffer[swizzled(lane * QUADS + k / Vec::N)].v[k % Vec::N];
    }

    __device__ __forceinline__ T load_fold(long long first, long long n, bool full) const {
        const int lane = threadIdx.x % 32;
        const long long warp_first = first - (long long)lane * ITEMS;
        __syncwarp();  // the buffer's previous readers (an earlier tile) are done
        if (VEC && full) {
            const unsigned long long policy = l2_evict_first();
            const Vec* src = reinterpret_cast<const Vec*>(x + warp_first);
#pragma unroll
            for (int q = 0; q < QUADS; ++q) copy_to_shared(buffer + swizzled(q * 32 + lane), src + q * 32 + lane, policy);
            copy_to_shared_wait();
        } else {
            // Striped, so a warp's accesses stay contiguous at any alignment; 4 loads in flight
            // per thread bound the registers of this (misaligned or last-tile) path.
#pragma unroll 4
            for (int j = 0; j < ITEMS; ++j) {
                const int e = j * 32 + lane;
                item(e / ITEMS, e % ITEMS) = warp_first + e < n ? x[warp_first + e] : Op::identity();
            }
        }
        __syncwarp();
        const Op op{};
        T acc = Op::identity();
#pragma unroll
        for (int q = 0; q < QUADS; ++q) {
            const Vec chunk = buffer[swizzled(lane * QUADS + q)];
#pragma unroll
            for (int e = 0; e < Vec::N; ++e) acc = q == 0 && e == 0 ? chunk.v[0] : op(acc, chunk.v[e]);
        }
        return acc;
    }

    __device__ __forceinline__ void scan_store(T running, long long first, long long n, bool full) const {
        const int lane = threadIdx.x % 32;
        const long long warp_first = first - (long long)lane * ITEMS;
        const Op op{};
#pragma unroll
        for (int q = 0; q < QUADS; ++q) {
            Vec chunk = buffer[swizzled(lane * QUADS + q)];
#pragma unroll
            for (int e = 0; e < Vec::N; ++e) {
                const T before = running;
                running = op(running, chunk.v[e]);
                chunk.v[e] = INCLUSIVE ? running : before;
            }
            buffer[swizzled(lane * QUADS + q)] = chunk;
        }
        __syncwarp();
        if (VEC && full) {
            Vec* dst = reinterpret_cast<Vec*>(y + warp_first);
#pragma unroll
            for (int q = 0; q < QUADS; ++q) store_stream(dst + q * 32 + lane, buffer[swizzled(q * 32 + lane)]);
        } else {
#pragma unroll 4
            for (int j = 0; j < ITEMS; ++j) {
                const int e = j * 32 + lane;
                if (warp_first + e < n) y[warp_first + e] = item(e / ITEMS, e % ITEMS);
            }
        }
    }
};

// Segmented: T = (x[i], heads[i] != 0); element 0 always starts a segment. The exclusive
// output at a segment's head is the operator's identity. Items in registers, element-wise.
template <class V, class Op, int ITEMS, bool INCLUSIVE>
struct SegmentedIO {
    using T = Flagged<V>;
    using ScanOp = Segmented<V, Op>;
    using Vec = vec16<V>;
    static constexpr int BUFFER = 0;  // no shared tile
    const V* __restrict__ x;
    const unsigned char* __restrict__ heads;
    V* __restrict__ y;
    Vec* buffer;  // unused
    T items[ITEMS];

    __device__ __forceinline__ T load_fold(long long first, long long n, bool) {
        const ScanOp op{};
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const long long i = first + k;
            items[k] = i < n ? T{x[i], i == 0 || heads[i] != 0} : ScanOp::identity();
        }
        T acc = items[0];
#pragma unroll
        for (int k = 1; k < ITEMS; ++k) acc = op(acc, items[k]);
        return acc;
    }
    __device__ __forceinline__ void scan_store(T running, long long first, long long n, bool) const {
        const ScanOp op{};
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const T before = running;
            running = op(running, items[k]);
            if (first + k < n) y[first + k] = INCLUSIVE ? running.v : (items[k].head ? Op::identity() : before.v);
        }
    }
};

template <bool SEGMENTED, class Dense, class Seg> struct pick { using type = Dense; };
template <class Dense, class Seg> struct pick<true, Dense, Seg> { using type = Seg; };

// Elements per thread (THREAD_BYTES of values plain). primitives.py mirrors this (_items_per_thread).
template <class V, bool SEGMENTED, int THREAD_BYTES = SCAN_THREAD_BYTES> __host__ __device__ constexpr int scan_items() {
    static_assert(THREAD_BYTES % 16 == 0, "whole 16-byte vectors");
    return (SEGMENTED ? SCAN_SEGMENTED_THREAD_BYTES : THREAD_BYTES) / (int)sizeof(V);
}

template <class V, class Op, bool INCLUSIVE, bool SEGMENTED, bool VEC, int THREAD_BYTES = SCAN_THREAD_BYTES>
using ScanIO = typename pick<SEGMENTED, DenseIO<V, Op, scan_items<V, SEGMENTED, THREAD_BYTES>(), INCLUSIVE, VEC>,
                             SegmentedIO<V, Op, scan_items<V, SEGMENTED>(), INCLUSIVE>>::type;

// Lane 0 gets the fold of the warp's 32 values in reverse lane order (lane 31 leftmost): lane k
// holds the predecessor k + 1 tiles back (within the warp's window), so this is tile order. A
// balanced pairwise tree, the same whatever the values: part of the ordered association.
template <class T, class Op> __device__ __forceinline__ T warp_fold_reversed(T v, Op op) {
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) v = op(shfl_down(v, offset), v);
    return v;
}

// The look-back of tile `tile` > 0 (every thread of the block calls it; `tile` is the same for
// all): publishes the tile's inclusive prefix and leaves its exclusive prefix in `tile_prefix`
// (read it after a barrier). Thread k of the first WARPS warps polls the predecessor k + 1
// tiles back (in the span being examined); the other warps only meet the barriers.
// `warp_folds` and `inclusive_lanes` hold WARPS entries.
template <bool ORDERED, int WARPS, class T, class Op>
__device__ __forceinline__ void look_back(unsigned long long* descriptors, long long tile, unsigned long long epoch,
                                          T tile_total, Op op, T* warp_folds, unsigned* inclusive_lanes, T& tile_prefix) {
    using Descriptor = sg::Descriptor<T>;
    static_assert(WARPS >= 1 && WARPS <= SCAN_BLOCK / 32, "the look-back warps are warps of the block");
    constexpr int SPAN = 32 * WARPS;
    const int slot = threadIdx.x, warp = slot / 32, lane = slot % 32;
    const bool polls = warp < WARPS;
    if constexpr (ORDERED) {
        // E_t = fold [P_{t-SPAN}, a_{t-SPAN+1}, ..., a_{t-1}] by the fixed tree (see the top).
        if (polls) {
            T value = Op::identity();
            const long long predecessor = tile - 1 - slot;
            if (predecessor >= 0) {
                const unsigned kind = slot == SPAN - 1 ? INCLUSIVE_PREFIX : AGGREGATE;
                while (!Descriptor::read(descriptors, predecessor, kind, epoch, value)) backoff();
            }
            value = warp_fold_reversed(value, op);
            if (lane == 0) warp_folds[warp] = value;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            T prefix = warp_folds[WARPS - 1];  // the farthest window first
#pragma unroll
            for (int w = WARPS - 2; w >= 0; --w) prefix = op(prefix, warp_folds[w]);
            Descriptor::publish(descriptors, tile, INCLUSIVE_PREFIX, epoch, op(prefix, tile_total));
            tile_prefix = prefix;
        }
    } else {
        // The nearest inclusive prefix in the span, joined with the aggregates after it; spans
        // with none are joined whole (their aggregates) and the next span is polled.
        T prefix = Op::identity();  // thread 0's: the spans examined so far
        for (long long span_end = tile - 1;; span_end -= SPAN) {
            T value = Op::identity();
            if (polls) {
                const long long predecessor = span_end - slot;
                bool inclusive = true;  // before tile 0: the identity, as a prefix
                if (predecessor >= 0) {
                    for (;;) {
                        T aggregate;
                        inclusive = Descriptor::read(descriptors, predecessor, INCLUSIVE_PREFIX, epoch, value);
                        const bool aggregated = Descriptor::read(descriptors, predecessor, AGGREGATE, epoch, aggregate);
                        if (inclusive) break;
                        if (aggregated) {
                            value = aggregate;
                            break;
                        }
                        backoff();
                    }
                }
                const unsigned lanes = __ballot_sync(FULL_MASK, inclusive);
                if (lane == 0) inclusive_lanes[warp] = lanes;
            }
            __syncthreads();
            int nearest = SPAN;
#pragma unroll
            for (int w = WARPS - 1; w >= 0; --w)
                if (inclusive_lanes[w] != 0u) nearest = 32 * w + __ffs(inclusive_lanes[w]) - 1;
            if (polls) {
                if (slot > nearest) value = Op::identity();
                value = warp_fold_reversed(value, op);
                if (lane == 0) warp_folds[warp] = value;
            }
            __syncthreads();
            if (threadIdx.x == 0) {
                T span = warp_folds[WARPS - 1];
#pragma unroll
                for (int w = WARPS - 2; w >= 0; --w) span = op(span, warp_folds[w]);
                prefix = op(span, prefix);
            }
            if (nearest < SPAN) break;
            __syncthreads();  // warp_folds and inclusive_lanes are rewritten by the next span
        }
        if (threadIdx.x == 0) {
            Descriptor::publish(descriptors, tile, INCLUSIVE_PREFIX, epoch, op(prefix, tile_total));
            tile_prefix = prefix;
        }
    }
}

}  // namespace sg

// The calling warp's slice of a kernel's shared tile: dynamic shared memory of
// SCAN_BLOCK / 32 * IO::BUFFER vectors (SCAN_BLOCK * THREAD_BYTES bytes plain, none segmented),
// given at launch (primitives.py _scan_shared_bytes).
#define SCAN_SHARED_TILE(IO)                                                                                 \
    extern __shared__ __align__(16) unsigned char scan_shared_tile[];                                        \
    typename IO::Vec* const warp_buffer = reinterpret_cast<typename IO::Vec*>(scan_shared_tile) + (threadIdx.x / 32) * IO::BUFFER

// Reduce-then-scan, pass 1: totals[b] = fold of tiles [b * tiles_per_chunk, (b + 1) * tiles_per_chunk).
template <class V, class Op, bool SEGMENTED, bool VEC>
__global__ void __launch_bounds__(SCAN_BLOCK, SCAN_CHUNKS_PER_SM)
scan_chunk_totals(const V* __restrict__ x, const unsigned char* __restrict__ heads, const long long n,
                  const long long tiles_per_chunk, typename sg::ScanIO<V, Op, true, SEGMENTED, VEC>::T* __restrict__ totals) {
    using IO = sg::ScanIO<V, Op, true, SEGMENTED, VEC>;
    using T = typename IO::T;
    using ScanOp = typename IO::ScanOp;
    constexpr int ITEMS = sg::scan_items<V, SEGMENTED>();
    constexpr long long TILE = (long long)SCAN_BLOCK * ITEMS;
    __shared__ T scratch[SCAN_BLOCK / 32];
    SCAN_SHARED_TILE(IO);
    const ScanOp op{};
    IO io;
    io.x = x;
    io.buffer = warp_buffer;
    if constexpr (SEGMENTED) io.heads = heads;
    const long long n_tiles = (n + TILE - 1) / TILE;
    const long long first_tile = (long long)blockIdx.x * tiles_per_chunk;
    const long long end_tile = first_tile + tiles_per_chunk < n_tiles ? first_tile + tiles_per_chunk : n_tiles;
    T carry = ScanOp::identity();
    for (long long tile = first_tile; tile < end_tile; ++tile) {
        const long long base = tile * TILE;
        const T thread_total = io.load_fold(base + (long long)threadIdx.x * ITEMS, n, base + TILE <= n);
        const T tile_total = sg::block_reduce<SCAN_BLOCK>(thread_total, op, scratch);
        if (threadIdx.x == 0) carry = op(carry, tile_total);
        __syncthreads();  // scratch is rewritten by the next tile
    }
    if (threadIdx.x == 0) totals[blockIdx.x] = carry;
}

// Reduce-then-scan, pass 2 (one block): totals[0:count] replaced by their exclusive scan.
template <class V, class Op, bool SEGMENTED>
__global__ void __launch_bounds__(SCAN_BLOCK)
scan_totals(typename sg::ScanIO<V, Op, true, SEGMENTED, false>::T* __restrict__ totals, const long long count) {
    using IO = sg::ScanIO<V, Op, true, SEGMENTED, false>;
    using T = typename IO::T;
    using ScanOp = typename IO::ScanOp;
    __shared__ T warp_sums[SCAN_BLOCK / 32];
    const ScanOp op{};
    T carry = ScanOp::identity();
    for (long long base = 0; base < count; base += SCAN_BLOCK) {
        const long long i = base + threadIdx.x;
        const T v = i < count ? totals[i] : ScanOp::identity();
        T total;
        const T exclusive = sg::block_exclusive_scan<SCAN_BLOCK>(v, op, warp_sums, total);
        if (i < count) totals[i] = base == 0 ? exclusive : op(carry, exclusive);
        carry = base == 0 ? total : op(carry, total);
    }
}

// Reduce-then-scan, pass 3: block b scans its chunk of tiles starting from prefixes[b].
template <class V, class Op, bool INCLUSIVE, bool SEGMENTED, bool VEC>
__global__ void __launch_bounds__(SCAN_BLOCK, SCAN_CHUNKS_PER_SM)
scan_chunks(const V* __restrict__ x, const unsigned char* __restrict__ heads, V* __restrict__ y, const long long n,
            const long long tiles_per_chunk,
            const typename sg::ScanIO<V, Op, INCLUSIVE, SEGMENTED, VEC>::T* __restrict__ prefixes) {
    using IO = sg::ScanIO<V, Op, INCLUSIVE, SEGMENTED, VEC>;
    using T = typename IO::T;
    using ScanOp = typename IO::ScanOp;
    constexpr int ITEMS = sg::scan_items<V, SEGMENTED>();
    constexpr long long TILE = (long long)SCAN_BLOCK * ITEMS;
    __shared__ T warp_sums[SCAN_BLOCK / 32];
    SCAN_SHARED_TILE(IO);
    const ScanOp op{};
    IO io;
    io.x = x;
    io.y = y;
    io.buffer = warp_buffer;
    if constexpr (SEGMENTED) io.heads = heads;
    const long long n_tiles = (n + TILE - 1) / TILE;
    const long long first_tile = (long long)blockIdx.x * tiles_per_chunk;
    const long long end_tile = first_tile + tiles_per_chunk < n_tiles ? first_tile + tiles_per_chunk : n_tiles;
    T carry = prefixes[blockIdx.x];
    for (long long tile = first_tile; tile < end_tile; ++tile) {
        const long long base = tile * TILE;
        const long long first = base + (long long)threadIdx.x * ITEMS;
        const bool full = base + TILE <= n;
        T tile_total;
        const T thread_prefix = sg::block_exclusive_scan<SCAN_BLOCK>(io.load_fold(first, n, full), op, warp_sums, tile_total);
        io.scan_store(op(carry, thread_prefix), first, n, full);
        carry = op(carry, tile_total);
    }
}

// Single pass with decoupled look-back over the look-back state described at the top (one block
// per tile: gridDim.x == number of tiles). ORDERED picks the look-back (see the top and look_back),
// WARPS how many warps poll (the span is 32 * WARPS tiles), THREAD_BYTES the plain tiles' bytes
// per thread (dynamic shared memory: SCAN_BLOCK * THREAD_BYTES).
template <class V, class Op, bool INCLUSIVE, bool SEGMENTED, bool VEC, bool ORDERED, int WARPS = LOOKBACK_WARPS,
          int THREAD_BYTES = SCAN_THREAD_BYTES>
__global__ void __launch_bounds__(SCAN_BLOCK, SEGMENTED ? SCAN_SEGMENTED_MIN_BLOCKS : scan_min_blocks<THREAD_BYTES>())
scan_single_pass(const V* __restrict__ x, const unsigned char* __restrict__ heads, V* __restrict__ y, const long long n,
                 unsigned long long* __restrict__ state) {
    using IO = sg::ScanIO<V, Op, INCLUSIVE, SEGMENTED, VEC, THREAD_BYTES>;
    using T = typename IO::T;
    using ScanOp = typename IO::ScanOp;
    using Descriptor = sg::Descriptor<T>;
    constexpr int ITEMS = sg::scan_items<V, SEGMENTED, THREAD_BYTES>();
    constexpr long long TILE = (long long)SCAN_BLOCK * ITEMS;
    static_assert(SEGMENTED || SCAN_BLOCK * THREAD_BYTES <= 227 * 1024, "a block gets at most 227 KiB of shared memory");
    __shared__ T warp_sums[SCAN_BLOCK / 32];
    __shared__ T warp_folds[WARPS];
    __shared__ unsigned inclusive_lanes[WARPS];
    __shared__ T tile_prefix;
    __shared__ unsigned long long ticket;
    SCAN_SHARED_TILE(IO);
    const ScanOp op{};
    IO io;
    io.x = x;
    io.y = y;
    io.buffer = warp_buffer;
    if constexpr (SEGMENTED) io.heads = heads;
    if (threadIdx.x == 0) {
        const unsigned long long taken = atomicAdd(state, 1ull);
        // The last ticket: every block of this launch has taken its own, so the control word is
        // free to hand the next launch ticket 0 and the next epoch.
        if ((long long)(unsigned)taken == (long long)gridDim.x - 1) atomicExch(state, ((taken >> 32) + 1) << 32);
        ticket = taken;
    }
    __syncthreads();
    const long long tile = (long long)(unsigned)ticket;
    const unsigned long long epoch = ticket >> 32;
    unsigned long long* const descriptors = state + 1;
    const long long base = tile * TILE;
    const long long first = base + (long long)threadIdx.x * ITEMS;
    const bool full = base + TILE <= n;
    T tile_total;
    const T thread_prefix = sg::block_exclusive_scan<SCAN_BLOCK>(io.load_fold(first, n, full), op, warp_sums, tile_total);
    if (threadIdx.x == 0) {
        Descriptor::publish(descriptors, tile, sg::AGGREGATE, epoch, tile_total);
        if (tile == 0) Descriptor::publish(descriptors, tile, sg::INCLUSIVE_PREFIX, epoch, tile_total);
    }
    if (tile != 0) {
        sg::look_back<ORDERED, WARPS>(descriptors, tile, epoch, tile_total, op, warp_folds, inclusive_lanes, tile_prefix);
        __syncthreads();
    }
    io.scan_store(tile == 0 ? thread_prefix : op(tile_prefix, thread_prefix), first, n, full);
}
