// Prefix scans (inclusive and exclusive), plain or segmented, for any operator object
// (sg::Sum<V>, sg::Min<V>, sg::Max<V>).
//
// Tiles: SCAN_BLOCK threads, ITEMS consecutive elements per thread (64 bytes plain, 32 bytes
// segmented), loaded with 16-byte vector loads when the arrays are 16-byte aligned (VEC) and the
// tile is whole. A tile is scanned by a serial fold per thread, a warp-shuffle scan of the
// thread totals and a scan of the warp totals.
//
// Two ways to cover many tiles:
//  - scan_single_pass: one pass (reads n, writes n), decoupled look-back: each tile publishes its
//    aggregate, then its inclusive prefix, and finds its own prefix by looking back over its
//    predecessors' published values (a window of 32 at a time). Exact for integers. For floats,
//    ORDERED = false joins the values as they come, so the association depends on timing (NOT
//    bitwise reproducible); ORDERED = true folds them strictly left to right from the nearest
//    inclusive prefix, which is reproducible (see the kernel). A single tile never looks back.
//  - reduce-then-scan, reproducible: scan_chunk_totals (each block folds a fixed range of tiles),
//    scan_totals (one block scans the chunk totals), scan_chunks (each block scans its range again,
//    starting from its chunk's prefix). Reads x twice: about 2/3 of the single pass's throughput.
//
// Segmented scans run the same kernels over (value, head) pairs with the operator
// Segmented<V, Op>: (a, b) -> b.head ? b : (op(a.v, b.v), a.head | b.head), which is associative.
#include "common.cuh"

constexpr int SCAN_BLOCK = 256;

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

// Loads of values another block publishes, after an acquire of its flag: bypass L1.
template <class V> __device__ __forceinline__ V load_relaxed(const V* p) { return *(const volatile V*)p; }
template <class V> __device__ __forceinline__ Flagged<V> load_relaxed(const Flagged<V>* p) {
    return Flagged<V>{*(const volatile V*)&p->v, *(const volatile int*)&p->head};
}
__device__ __forceinline__ void store_release(int* p, int v) {
    asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int load_acquire(const int* p) {
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
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

// What a scan kernel reads and writes. Dense: T = V, y[i] = inclusive or exclusive prefix.
template <class V, class Op, int ITEMS, bool INCLUSIVE, bool VEC>
struct DenseIO {
    using T = V;
    using Out = V;
    using ScanOp = Op;
    const V* __restrict__ x;
    V* __restrict__ y;

    __device__ __forceinline__ void load(T (&items)[ITEMS], long long first, long long n, bool full) const {
        if (VEC && full) {
            const vec16<V>* src = reinterpret_cast<const vec16<V>*>(x + first);
#pragma unroll
            for (int q = 0; q < ITEMS / vec16<V>::N; ++q) {
                const vec16<V> chunk = src[q];
#pragma unroll
                for (int e = 0; e < vec16<V>::N; ++e) items[q * vec16<V>::N + e] = chunk.v[e];
            }
        } else {
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) items[k] = first + k < n ? x[first + k] : Op::identity();
        }
    }
    __device__ __forceinline__ V output(T exclusive, T inclusive, T) const { return INCLUSIVE ? inclusive : exclusive; }
    __device__ __forceinline__ void store(const V (&out)[ITEMS], long long first, long long n, bool full) const {
        if (VEC && full) {
            vec16<V>* dst = reinterpret_cast<vec16<V>*>(y + first);
#pragma unroll
            for (int q = 0; q < ITEMS / vec16<V>::N; ++q) {
                vec16<V> chunk;
#pragma unroll
                for (int e = 0; e < vec16<V>::N; ++e) chunk.v[e] = out[q * vec16<V>::N + e];
                dst[q] = chunk;
            }
        } else {
#pragma unroll
            for (int k = 0; k < ITEMS; ++k)
                if (first + k < n) y[first + k] = out[k];
        }
    }
};

// Segmented: T = (x[i], heads[i] != 0); element 0 always starts a segment. The exclusive
// output at a segment's head is the operator's identity.
template <class V, class Op, int ITEMS, bool INCLUSIVE>
struct SegmentedIO {
    using T = Flagged<V>;
    using Out = V;
    using ScanOp = Segmented<V, Op>;
    const V* __restrict__ x;
    const unsigned char* __restrict__ heads;
    V* __restrict__ y;

    __device__ __forceinline__ void load(T (&items)[ITEMS], long long first, long long n, bool) const {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const long long i = first + k;
            items[k] = i < n ? T{x[i], i == 0 || heads[i] != 0} : ScanOp::identity();
        }
    }
    __device__ __forceinline__ V output(T exclusive, T inclusive, T item) const {
        return INCLUSIVE ? inclusive.v : (item.head ? Op::identity() : exclusive.v);
    }
    __device__ __forceinline__ void store(const V (&out)[ITEMS], long long first, long long n, bool) const {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k)
            if (first + k < n) y[first + k] = out[k];
    }
};

template <bool SEGMENTED, class Dense, class Seg> struct pick { using type = Dense; };
template <class Dense, class Seg> struct pick<true, Dense, Seg> { using type = Seg; };

// Elements per thread: 64 bytes of values (plain) or 32 bytes (segmented pairs), a multiple of
// 16 bytes so whole tiles stay vector-aligned. primitives.py mirrors this (_items_per_thread).
template <class V, bool SEGMENTED> __host__ __device__ constexpr int scan_items() { return (SEGMENTED ? 32 : 64) / (int)sizeof(V); }

template <class V, class Op, bool INCLUSIVE, bool SEGMENTED, bool VEC>
using ScanIO = typename pick<SEGMENTED, DenseIO<V, Op, scan_items<V, SEGMENTED>(), INCLUSIVE, VEC>,
                             SegmentedIO<V, Op, scan_items<V, SEGMENTED>(), INCLUSIVE>>::type;

// Fold of the thread's items.
template <int ITEMS, class T, class ScanOp> __device__ __forceinline__ T thread_fold(const T (&items)[ITEMS], ScanOp op) {
    T acc = items[0];
#pragma unroll
    for (int k = 1; k < ITEMS; ++k) acc = op(acc, items[k]);
    return acc;
}

// Writes the thread's outputs, given the prefix of everything before its first item.
template <int ITEMS, class IO, class T, class ScanOp>
__device__ __forceinline__ void write_items(const IO& io, ScanOp op, const T (&items)[ITEMS], T running,
                                            long long first, long long n, bool full) {
    typename IO::Out out[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const T before = running;
        running = op(running, items[k]);
        out[k] = io.output(before, running, items[k]);
    }
    io.store(out, first, n, full);
}

}  // namespace sg

// Reduce-then-scan, pass 1: totals[b] = fold of tiles [b * tiles_per_chunk, (b + 1) * tiles_per_chunk).
template <class V, class Op, bool SEGMENTED, bool VEC>
__global__ void __launch_bounds__(SCAN_BLOCK)
scan_chunk_totals(const V* __restrict__ x, const unsigned char* __restrict__ heads, const long long n,
                  const long long tiles_per_chunk, typename sg::ScanIO<V, Op, true, SEGMENTED, VEC>::T* __restrict__ totals) {
    using IO = sg::ScanIO<V, Op, true, SEGMENTED, VEC>;
    using T = typename IO::T;
    using ScanOp = typename IO::ScanOp;
    constexpr int ITEMS = sg::scan_items<V, SEGMENTED>();
    constexpr long long TILE = (long long)SCAN_BLOCK * ITEMS;
    __shared__ T scratch[SCAN_BLOCK / 32];
    const ScanOp op{};
    IO io;
    io.x = x;
    if constexpr (SEGMENTED) io.heads = heads;
    const long long n_tiles = (n + TILE - 1) / TILE;
    const long long first_tile = (long long)blockIdx.x * tiles_per_chunk;
    const long long end_tile = first_tile + tiles_per_chunk < n_tiles ? first_tile + tiles_per_chunk : n_tiles;
    T carry = ScanOp::identity();
    for (long long tile = first_tile; tile < end_tile; ++tile) {
        T items[ITEMS];
        const long long base = tile * TILE;
        io.load(items, base + (long long)threadIdx.x * ITEMS, n, base + TILE <= n);
        const T tile_total = sg::block_reduce<SCAN_BLOCK>(sg::thread_fold(items, op), op, scratch);
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
__global__ void __launch_bounds__(SCAN_BLOCK)
scan_chunks(const V* __restrict__ x, const unsigned char* __restrict__ heads, V* __restrict__ y, const long long n,
            const long long tiles_per_chunk,
            const typename sg::ScanIO<V, Op, INCLUSIVE, SEGMENTED, VEC>::T* __restrict__ prefixes) {
    using IO = sg::ScanIO<V, Op, INCLUSIVE, SEGMENTED, VEC>;
    using T = typename IO::T;
    using ScanOp = typename IO::ScanOp;
    constexpr int ITEMS = sg::scan_items<V, SEGMENTED>();
    constexpr long long TILE = (long long)SCAN_BLOCK * ITEMS;
    __shared__ T warp_sums[SCAN_BLOCK / 32];
    const ScanOp op{};
    IO io;
    io.x = x;
    io.y = y;
    if constexpr (SEGMENTED) io.heads = heads;
    const long long n_tiles = (n + TILE - 1) / TILE;
    const long long first_tile = (long long)blockIdx.x * tiles_per_chunk;
    const long long end_tile = first_tile + tiles_per_chunk < n_tiles ? first_tile + tiles_per_chunk : n_tiles;
    T carry = prefixes[blockIdx.x];
    for (long long tile = first_tile; tile < end_tile; ++tile) {
        T items[ITEMS];
        const long long base = tile * TILE;
        const long long first = base + (long long)threadIdx.x * ITEMS;
        const bool full = base + TILE <= n;
        io.load(items, first, n, full);
        T tile_total;
        const T thread_prefix = sg::block_exclusive_scan<SCAN_BLOCK>(sg::thread_fold(items, op), op, warp_sums, tile_total);
        sg::write_items(io, op, items, op(carry, thread_prefix), first, n, full);
        carry = op(carry, tile_total);
    }
}

// Single pass with decoupled look-back. `status` (zeroed by the caller, n_tiles + 1 ints):
// status[0] hands out tile numbers in start order (so a tile only ever waits on tiles that are
// already running); status[1 + t] is 0 (nothing yet), 1 (aggregates[t] published) or
// 2 (inclusive[t] published).
//
// ORDERED = false: each window of 32 predecessors is folded as a shuffle tree and the windows are
// joined as they come: exact for integers, timing-dependent rounding for floats.
// ORDERED = true: bitwise reproducible for floats too. Every inclusive prefix is defined as the
// strict left fold P_t = (...((a_0 op a_1) op a_2) ... op a_t) of the tile aggregates. A tile that
// finds P_j at its nearest finished predecessor j folds P_j op a_{j+1} op ... op a_{t-1} left to
// right, one value at a time; by induction on j that is P_{t-1} exactly, whichever j it found,
// so the result does not depend on timing. The windows it passes (up to LOOKBACK_WINDOWS) wait in
// shared memory; past that it polls its farthest window until a prefix appears there.
constexpr int LOOKBACK_WINDOWS = 4;

template <class V, class Op, bool INCLUSIVE, bool SEGMENTED, bool VEC, bool ORDERED>
__global__ void __launch_bounds__(SCAN_BLOCK)
scan_single_pass(const V* __restrict__ x, const unsigned char* __restrict__ heads, V* __restrict__ y, const long long n,
                 int* __restrict__ status, typename sg::ScanIO<V, Op, INCLUSIVE, SEGMENTED, VEC>::T* aggregates,
                 typename sg::ScanIO<V, Op, INCLUSIVE, SEGMENTED, VEC>::T* inclusive) {
    using IO = sg::ScanIO<V, Op, INCLUSIVE, SEGMENTED, VEC>;
    using T = typename IO::T;
    using ScanOp = typename IO::ScanOp;
    constexpr int ITEMS = sg::scan_items<V, SEGMENTED>();
    constexpr long long TILE = (long long)SCAN_BLOCK * ITEMS;
    constexpr int AGGREGATE = 1, INCLUSIVE_PREFIX = 2;
    __shared__ T warp_sums[SCAN_BLOCK / 32];
    __shared__ T window_values[ORDERED ? LOOKBACK_WINDOWS * 32 : 1];
    __shared__ T tile_prefix;
    __shared__ long long tile_number;
    const ScanOp op{};
    IO io;
    io.x = x;
    io.y = y;
    if constexpr (SEGMENTED) io.heads = heads;
    if (threadIdx.x == 0) tile_number = atomicAdd(status, 1);
    __syncthreads();
    const long long tile = tile_number;
    const long long base = tile * TILE;
    const long long first = base + (long long)threadIdx.x * ITEMS;
    const bool full = base + TILE <= n;
    T items[ITEMS];
    io.load(items, first, n, full);
    T tile_total;
    const T thread_prefix = sg::block_exclusive_scan<SCAN_BLOCK>(sg::thread_fold(items, op), op, warp_sums, tile_total);
    const int lane = threadIdx.x % 32;
    if (threadIdx.x < 32) {
        int* const flags = status + 1;
        if (tile == 0) {
            if (lane == 0) {
                inclusive[0] = tile_total;
                sg::store_release(flags, INCLUSIVE_PREFIX);
                tile_prefix = ScanOp::identity();
            }
        } else {
            if (lane == 0) {
                aggregates[tile] = tile_total;
                sg::store_release(flags + tile, AGGREGATE);
            }
            // Look back 32 predecessors at a time; lane 0 is the nearest. Stop at the window
            // holding the nearest predecessor with an inclusive prefix.
            T prefix = ScanOp::identity();
            int window = 0, stop = 0;
            for (long long window_end = tile - 1;;) {
                const long long predecessor = window_end - lane;
                int flag;
                do {
                    flag = predecessor >= 0 ? sg::load_acquire(flags + predecessor) : INCLUSIVE_PREFIX;
                } while (__any_sync(sg::FULL_MASK, flag == 0));
                T value = ScanOp::identity();
                if (predecessor >= 0)
                    value = sg::load_relaxed(flag == INCLUSIVE_PREFIX ? inclusive + predecessor : aggregates + predecessor);
                const unsigned done = __ballot_sync(sg::FULL_MASK, flag == INCLUSIVE_PREFIX);
                if constexpr (ORDERED) {
                    // The farthest window we keep is polled again until a prefix appears in it.
                    const bool move_on = !done && window < LOOKBACK_WINDOWS - 1;
                    if (done || move_on) window_values[window * 32 + lane] = value;
                    if (done) {
                        stop = __ffs(done) - 1;
                        break;
                    }
                    if (move_on) {
                        ++window;
                        window_end -= 32;
                    }
                } else {
                    const int last = done ? __ffs(done) - 1 : 31;
                    if (lane > last) value = ScanOp::identity();
                    // Growing offsets join adjacent ranges; the farther (earlier) range goes left.
#pragma unroll
                    for (int offset = 1; offset < 32; offset *= 2) value = op(sg::shfl_down(value, offset), value);
                    prefix = op(value, prefix);
                    if (done) break;
                    window_end -= 32;
                }
            }
            if constexpr (ORDERED) {
                __syncwarp();
                if (lane == 0) {
                    // P_j, then the aggregates after it in tile order: lanes stop-1..0 of the
                    // farthest window, then every lane (31..0) of each nearer window.
                    const int farthest = window * 32 + stop;
                    prefix = window_values[farthest];
#pragma unroll 1
                    for (int slot = farthest - 1; slot >= 0; --slot) {
                        // Slot w * 32 + k is predecessor (w * 32 + k + 1) tiles back: decreasing
                        // slots walk forward in tile order.
                        prefix = op(prefix, window_values[slot]);
                    }
                }
            }
            if (lane == 0) {
                inclusive[tile] = op(prefix, tile_total);
                sg::store_release(flags + tile, INCLUSIVE_PREFIX);
                tile_prefix = prefix;
            }
        }
    }
    __syncthreads();
    sg::write_items(io, op, items, tile == 0 ? thread_prefix : op(tile_prefix, thread_prefix), first, n, full);
}
