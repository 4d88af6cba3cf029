// Prefix scans (inclusive and exclusive), plain or segmented, for any operator object
// (sg::Sum<V>, sg::Min<V>, sg::Max<V>).
//
// Tiles: SCAN_BLOCK threads, ITEMS consecutive elements per thread (64 bytes plain, 32 bytes
// segmented). Plain tiles that are whole and 16-byte aligned (VEC) move through a per-warp
// transpose in shared memory: the warp loads (and stores) 16-byte vectors striped across its
// lanes, so every instruction touches 512 contiguous bytes, and each thread then holds its ITEMS
// consecutive elements. A tile is scanned by a serial fold per thread, a warp-shuffle scan of
// the thread totals and a scan of the warp totals.
//
// Two ways to cover many tiles:
//  - scan_single_pass: one pass (reads n, writes n), decoupled look-back (Merrill & Garland):
//    each tile publishes its aggregate, then its inclusive prefix, and finds its own prefix by
//    looking back over its predecessors' published values (a window of 32 at a time). Exact for
//    integers. For floats, ORDERED = false joins the values as they come, so the association
//    depends on timing (NOT bitwise reproducible); ORDERED = true folds them strictly left to
//    right from the nearest inclusive prefix, which is reproducible (see the kernel). A single
//    tile never looks back.
//  - reduce-then-scan, reproducible: scan_chunk_totals (each block folds a fixed range of tiles),
//    scan_totals (one block scans the chunk totals), scan_chunks (each block scans its range again,
//    starting from its chunk's prefix). Reads x twice: about 2/3 of the single pass's throughput.
//
// Look-back state (one buffer of 64-bit words, kept by the caller between launches, zeroed when
// first allocated, never reset by the host):
//   state[0] = (epoch << 32) | ticket. Each block takes a ticket with one atomicAdd: its tile
//     number (tiles start in ticket order, so a tile only ever waits on tiles already running:
//     no deadlock whatever the scheduling) and the launch's epoch. The block holding the last
//     ticket writes (epoch + 1) << 32: the next launch finds ticket 0 and a new epoch, with no
//     memset and no extra launch (also under graph replay).
//   state[1 + t * WORDS + k], tile t's descriptor: its value cut into WORDS 32-bit chunks, each
//     stored with a status in the upper half of the same 64-bit word (one relaxed 64-bit store,
//     single-copy atomic): status = (epoch << 2) | AGGREGATE or INCLUSIVE_PREFIX. A reader takes
//     the value only when every word carries the same status of this launch's epoch; anything
//     else (a word of an older launch, or words caught between the aggregate's and the inclusive
//     prefix's stores) reads as "not yet" and is polled again. Status and value travel in the
//     same words, so no fence is needed between them; 8- and 16-byte values use 2 and 4 words.
//
// Segmented scans run the same kernels over (value, head) pairs with the operator
// Segmented<V, Op>: (a, b) -> b.head ? b : (op(a.v, b.v), a.head | b.head), which is associative.
#include "common.cuh"

constexpr int SCAN_BLOCK = 256;
// Blocks per SM the single-pass kernel is compiled for (registers <= 64 per thread): with a
// 16 KiB tile each, enough bytes in flight to keep HBM busy while other blocks look back.
constexpr int SCAN_MIN_BLOCKS = 4;

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

constexpr unsigned AGGREGATE = 1, INCLUSIVE_PREFIX = 2;

template <class T> struct Descriptor {
    static constexpr int WORDS = (int)((sizeof(T) + 3) / 4);
    union Chunks {
        T value;
        unsigned word[WORDS];
    };
    // Status word of `kind` for this launch's epoch (30 bits of it; the host renews the buffer
    // long before the epoch wraps).
    static __device__ __forceinline__ unsigned status(unsigned long long epoch, unsigned kind) {
        return ((unsigned)epoch << 2) | kind;
    }
    static __device__ __forceinline__ void publish(unsigned long long* d, T value, unsigned tag) {
        Chunks c;
        c.value = value;
#pragma unroll
        for (int k = 0; k < WORDS; ++k) store_relaxed(d + k, ((unsigned long long)tag << 32) | c.word[k]);
    }
    // AGGREGATE or INCLUSIVE_PREFIX with `value` set, or 0 (not yet published this launch).
    static __device__ __forceinline__ unsigned read(const unsigned long long* d, unsigned long long epoch, T& value) {
        unsigned long long w[WORDS];
#pragma unroll
        for (int k = 0; k < WORDS; ++k) w[k] = load_relaxed(d + k);
        const unsigned tag = (unsigned)(w[0] >> 32);
        bool same = true;
        Chunks c;
#pragma unroll
        for (int k = 0; k < WORDS; ++k) {
            same = same && (unsigned)(w[k] >> 32) == tag;
            c.word[k] = (unsigned)w[k];
        }
        value = c.value;
        const unsigned kind = tag & 3u;
        return same && (kind == AGGREGATE || kind == INCLUSIVE_PREFIX) && tag == status(epoch, kind) ? kind : 0u;
    }
};

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
// `buffer` is the calling warp's transpose space in shared memory (BUFFER vectors).
template <class V, class Op, int ITEMS, bool INCLUSIVE, bool VEC>
struct DenseIO {
    using T = V;
    using Out = V;
    using ScanOp = Op;
    using Vec = vec16<V>;
    static constexpr int QUADS = ITEMS / Vec::N;  // 16-byte vectors per thread
    static_assert(QUADS * Vec::N == ITEMS, "a thread's items are whole 16-byte vectors");
    // One padding vector after every 8: the striped writes and the blocked reads (a thread's
    // QUADS = 4 vectors, 64 bytes apart between lanes) then hit distinct banks in each phase.
    static constexpr int BUFFER = VEC ? 32 * QUADS + 32 * QUADS / 8 : 1;
    static __device__ __forceinline__ int padded(int i) { return i + i / 8; }
    const V* __restrict__ x;
    V* __restrict__ y;

    __device__ __forceinline__ void load(T (&items)[ITEMS], long long first, long long n, bool full, Vec* buffer) const {
        if (VEC && full) {
            const int lane = threadIdx.x % 32;
            const Vec* src = reinterpret_cast<const Vec*>(x + (first - (long long)lane * ITEMS));
            Vec striped[QUADS];
#pragma unroll
            for (int q = 0; q < QUADS; ++q) striped[q] = load_stream(src + q * 32 + lane);
            __syncwarp();  // the buffer's previous readers are done
#pragma unroll
            for (int q = 0; q < QUADS; ++q) buffer[padded(q * 32 + lane)] = striped[q];
            __syncwarp();
#pragma unroll
            for (int q = 0; q < QUADS; ++q) {
                const Vec chunk = buffer[padded(lane * QUADS + q)];
#pragma unroll
                for (int e = 0; e < Vec::N; ++e) items[q * Vec::N + e] = chunk.v[e];
            }
        } else {
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) items[k] = first + k < n ? x[first + k] : Op::identity();
        }
    }
    __device__ __forceinline__ V output(T exclusive, T inclusive, T) const { return INCLUSIVE ? inclusive : exclusive; }
    __device__ __forceinline__ void store(const V (&out)[ITEMS], long long first, long long n, bool full, Vec* buffer) const {
        if (VEC && full) {
            const int lane = threadIdx.x % 32;
            __syncwarp();  // the load's blocked reads are done
#pragma unroll
            for (int q = 0; q < QUADS; ++q) {
                Vec chunk;
#pragma unroll
                for (int e = 0; e < Vec::N; ++e) chunk.v[e] = out[q * Vec::N + e];
                buffer[padded(lane * QUADS + q)] = chunk;
            }
            __syncwarp();
            Vec* dst = reinterpret_cast<Vec*>(y + (first - (long long)lane * ITEMS));
#pragma unroll
            for (int q = 0; q < QUADS; ++q) store_stream(dst + q * 32 + lane, buffer[padded(q * 32 + lane)]);
        } else {
#pragma unroll
            for (int k = 0; k < ITEMS; ++k)
                if (first + k < n) y[first + k] = out[k];
        }
    }
};

// Segmented: T = (x[i], heads[i] != 0); element 0 always starts a segment. The exclusive
// output at a segment's head is the operator's identity. Element-wise loads (no transpose).
template <class V, class Op, int ITEMS, bool INCLUSIVE>
struct SegmentedIO {
    using T = Flagged<V>;
    using Out = V;
    using ScanOp = Segmented<V, Op>;
    using Vec = vec16<V>;
    static constexpr int BUFFER = 1;
    const V* __restrict__ x;
    const unsigned char* __restrict__ heads;
    V* __restrict__ y;

    __device__ __forceinline__ void load(T (&items)[ITEMS], long long first, long long n, bool, Vec*) const {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const long long i = first + k;
            items[k] = i < n ? T{x[i], i == 0 || heads[i] != 0} : ScanOp::identity();
        }
    }
    __device__ __forceinline__ V output(T exclusive, T inclusive, T item) const {
        return INCLUSIVE ? inclusive.v : (item.head ? Op::identity() : exclusive.v);
    }
    __device__ __forceinline__ void store(const V (&out)[ITEMS], long long first, long long n, bool, Vec*) const {
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
                                            long long first, long long n, bool full, typename IO::Vec* buffer) {
    typename IO::Out out[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const T before = running;
        running = op(running, items[k]);
        out[k] = io.output(before, running, items[k]);
    }
    io.store(out, first, n, full, buffer);
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
    __shared__ typename IO::Vec transpose[SCAN_BLOCK / 32][IO::BUFFER];
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
        io.load(items, base + (long long)threadIdx.x * ITEMS, n, base + TILE <= n, transpose[threadIdx.x / 32]);
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
    __shared__ typename IO::Vec transpose[SCAN_BLOCK / 32][IO::BUFFER];
    const ScanOp op{};
    IO io;
    io.x = x;
    io.y = y;
    if constexpr (SEGMENTED) io.heads = heads;
    const long long n_tiles = (n + TILE - 1) / TILE;
    const long long first_tile = (long long)blockIdx.x * tiles_per_chunk;
    const long long end_tile = first_tile + tiles_per_chunk < n_tiles ? first_tile + tiles_per_chunk : n_tiles;
    typename IO::Vec* const buffer = transpose[threadIdx.x / 32];
    T carry = prefixes[blockIdx.x];
    for (long long tile = first_tile; tile < end_tile; ++tile) {
        T items[ITEMS];
        const long long base = tile * TILE;
        const long long first = base + (long long)threadIdx.x * ITEMS;
        const bool full = base + TILE <= n;
        io.load(items, first, n, full, buffer);
        T tile_total;
        const T thread_prefix = sg::block_exclusive_scan<SCAN_BLOCK>(sg::thread_fold(items, op), op, warp_sums, tile_total);
        sg::write_items(io, op, items, op(carry, thread_prefix), first, n, full, buffer);
        carry = op(carry, tile_total);
    }
}

// Single pass with decoupled look-back over the look-back state described at the top (one block
// per tile: gridDim.x == number of tiles).
//
// ORDERED = false: each window of 32 predecessors is folded as a shuffle tree and the windows are
// joined as they come: exact for integers, timing-dependent rounding for floats.
// ORDERED = true: bitwise reproducible for floats too. Every inclusive prefix is defined as the
// strict left fold P_t = (...((a_0 op a_1) op a_2) ... op a_t) of the tile aggregates. A tile that
// finds P_j at its nearest finished predecessor j folds P_j op a_{j+1} op ... op a_{t-1} left to
// right, one value at a time; by induction on j that is P_{t-1} exactly, whichever j it found,
// so the result does not depend on timing. The windows it passes (up to LOOKBACK_WINDOWS) wait in
// shared memory; past that it polls its farthest window until a prefix appears there.
constexpr int LOOKBACK_WINDOWS = 8;

template <class V, class Op, bool INCLUSIVE, bool SEGMENTED, bool VEC, bool ORDERED>
__global__ void __launch_bounds__(SCAN_BLOCK, SCAN_MIN_BLOCKS)
scan_single_pass(const V* __restrict__ x, const unsigned char* __restrict__ heads, V* __restrict__ y, const long long n,
                 unsigned long long* __restrict__ state) {
    using IO = sg::ScanIO<V, Op, INCLUSIVE, SEGMENTED, VEC>;
    using T = typename IO::T;
    using ScanOp = typename IO::ScanOp;
    using Descriptor = sg::Descriptor<T>;
    constexpr int ITEMS = sg::scan_items<V, SEGMENTED>();
    constexpr long long TILE = (long long)SCAN_BLOCK * ITEMS;
    __shared__ T warp_sums[SCAN_BLOCK / 32];
    __shared__ typename IO::Vec transpose[SCAN_BLOCK / 32][IO::BUFFER];
    __shared__ T window_values[ORDERED ? LOOKBACK_WINDOWS * 32 : 1];
    __shared__ T tile_prefix;
    __shared__ unsigned long long ticket;
    const ScanOp op{};
    IO io;
    io.x = x;
    io.y = y;
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
    typename IO::Vec* const buffer = transpose[threadIdx.x / 32];
    T items[ITEMS];
    io.load(items, first, n, full, buffer);
    T tile_total;
    const T thread_prefix = sg::block_exclusive_scan<SCAN_BLOCK>(sg::thread_fold(items, op), op, warp_sums, tile_total);
    const int lane = threadIdx.x % 32;
    if (threadIdx.x < 32) {
        if (tile == 0) {
            if (lane == 0) {
                Descriptor::publish(descriptors, tile_total, Descriptor::status(epoch, sg::INCLUSIVE_PREFIX));
                tile_prefix = ScanOp::identity();
            }
        } else {
            if (lane == 0)
                Descriptor::publish(descriptors + tile * Descriptor::WORDS, tile_total, Descriptor::status(epoch, sg::AGGREGATE));
            // Look back 32 predecessors at a time; lane 0 is the nearest. Stop at the window
            // holding the nearest predecessor with an inclusive prefix.
            T prefix = ScanOp::identity();
            int window = 0, stop = 0;
            for (long long window_end = tile - 1;;) {
                const long long predecessor = window_end - lane;
                T value = ScanOp::identity();
                unsigned kind = sg::INCLUSIVE_PREFIX;  // before tile 0: the identity, as a prefix
                do {
                    if (predecessor >= 0) kind = Descriptor::read(descriptors + predecessor * Descriptor::WORDS, epoch, value);
                } while (__any_sync(sg::FULL_MASK, kind == 0));
                const unsigned done = __ballot_sync(sg::FULL_MASK, kind == sg::INCLUSIVE_PREFIX);
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
#pragma unroll 8
                    for (int slot = farthest - 1; slot >= 0; --slot) {
                        // Slot w * 32 + k is predecessor (w * 32 + k + 1) tiles back: decreasing
                        // slots walk forward in tile order.
                        prefix = op(prefix, window_values[slot]);
                    }
                }
            }
            if (lane == 0) {
                Descriptor::publish(descriptors + tile * Descriptor::WORDS, op(prefix, tile_total),
                                    Descriptor::status(epoch, sg::INCLUSIVE_PREFIX));
                tile_prefix = prefix;
            }
        }
    }
    __syncthreads();
    sg::write_items(io, op, items, tile == 0 ? thread_prefix : op(tile_prefix, thread_prefix), first, n, full, buffer);
}
