// Sparse times sparse, C<M> = A (+.x) B over CSR (sparsegpu/formats/_spgemm.py; NumPy reference:
// sparsegpu/reference/spgemm.py). Values V, indices I (A, B, M and C share I); pointers into
// products and outputs are long long.
//
// Hash rows: a group of NT threads (one warp, NT = 32, four groups per block; or a whole block)
// computes one row of C in a shared-memory hash table of TABLE slots (linear probing). Rows are
// binned on the host so that a row's bound is at most TABLE / 2 (a load factor of 1/2).
//   - spgemm_rows<..., false> (symbolic): insert each product's column (the mask applied),
//     count the distinct ones, write the count.
//   - spgemm_rows<..., true> (numeric): insert again; compact the keys, sort them in shared
//     memory (bitonic), record each key's sorted position in the table, write the columns; then
//     fold each entry's products in product order (A's row in storage order, each B row in
//     storage order) from the identity, and write the values.
// Products are visited in chunks of NT (flattened over a chunk of NT entries of A's row, found
// by a binary search of the chunk's inclusive scan of B row lengths). Deterministic fold without
// float atomics: in each round the lanes of a warp holding the same column are found with
// __match_any_sync and each warp marks the entries it touches; after one barrier the lowest
// warp holding an entry adds all of that entry's products of the round, its own lanes and then
// each later warp's, in lane order. Every entry is thus folded in exactly the product order.
// Rows of at most 32 A entries and 32 products skip the table: one lane per product, in a warp's
// registers, a column's place being the number of smaller columns.
//
// Wide rows (bounds past the largest table): spgemm_wide, one block of SPGEMM_WIDE_THREADS per
// row, marks the row's columns in a bitmap of n_cols bits (shared memory when it fits, else the
// block's slice of global scratch; no product is stored). Symbolic: the set bits, counted.
// Numeric: a scan of the bitmap's words gives each word's rank prefix, writes the columns in
// order (a bitmap is sorted by construction) and the identity at each value; the products are
// then folded, in the order above, straight into the output at rank(column). The bitmap is left
// zero for the block's next row.
// Numeric kernels also count each row's entries that are not zero (counts[row], unless null):
// the host drops zeros from those counts without another pass over the values.
//
// One file past the usual length: the hash, warp-register and wide kernels share the product
// walk and the fold, and the planning kernels the bins' limits they are launched by.
#include "semiring.cuh"

inline constexpr int SPGEMM_WARP_GROUPS = 4;  // groups per block of the warp kernel (NT = 32)

// Stats arrays (unsigned long long, zeroed by the host) hold: [0, SPGEMM_BINS) rows per bin (hash
// bins, then wide), the plan's summed costs, wide rows' products and all products, a block's
// output total, the rows whose exact-count bin differs from their planned one (rows of no entry
// aside), the numeric phase's entries equal to zero, then one list cursor per bin.
inline constexpr int SPGEMM_BINS = 5;  // four hash bins and the wide rows
inline constexpr int SPGEMM_WIDE = 4;
inline constexpr int SPGEMM_STAT_COST = 5;
inline constexpr int SPGEMM_STAT_WIDE_PRODUCTS = 6;
inline constexpr int SPGEMM_STAT_PRODUCTS = 7;
inline constexpr int SPGEMM_STAT_TOTAL = 8;
inline constexpr int SPGEMM_STAT_MOVED = 9;
inline constexpr int SPGEMM_STAT_ZEROS = 10;
inline constexpr int SPGEMM_STAT_CURSOR = 11;

namespace spgemm {

__device__ __forceinline__ int cas(int* p, int compare, int value) { return atomicCAS(p, compare, value); }
__device__ __forceinline__ long long cas(long long* p, long long compare, long long value) {
    return (long long)atomicCAS(reinterpret_cast<unsigned long long*>(p), (unsigned long long)compare,
                                (unsigned long long)value);
}

template <class I> struct index_limits;
template <> struct index_limits<int> { static __device__ __forceinline__ int highest() { return 2147483647; } };
template <> struct index_limits<long long> {
    static __device__ __forceinline__ long long highest() { return 9223372036854775807LL; }
};

template <int TABLE, class I> __device__ __forceinline__ int hash_slot(I key) {
    return (int)(((unsigned long long)key * 2654435761ull) & (unsigned long long)(TABLE - 1));
}

// Insert key (>= 0); true when this call put it in (it was absent). Empty slots hold -1. The
// table never fills (bins keep a row's keys to at most TABLE / 2); the probe stops after TABLE.
template <int TABLE, class I> __device__ __forceinline__ bool insert(I* keys, I key) {
    int slot = hash_slot<TABLE>(key);
    for (int probe = 0; probe < TABLE; ++probe) {
        const I current = *reinterpret_cast<volatile I*>(keys + slot);
        if (current == key) return false;
        if (current == I(-1)) {
            const I previous = cas(keys + slot, I(-1), key);
            if (previous == I(-1)) return true;
            if (previous == key) return false;
        }
        slot = (slot + 1) & (TABLE - 1);
    }
    return false;
}

// The slot holding key (after every insert is done), or -1 when absent.
template <int TABLE, class I> __device__ __forceinline__ int find(const I* keys, I key) {
    int slot = hash_slot<TABLE>(key);
    for (int probe = 0; probe < TABLE; ++probe) {
        const I current = keys[slot];
        if (current == key) return slot;
        if (current == I(-1)) return -1;
        slot = (slot + 1) & (TABLE - 1);
    }
    return -1;
}

// Whether (row, col) may be written: no mask, or col in the mask's sorted row (outside it with
// complement).
template <class I>
__device__ __forceinline__ bool mask_allows(const I* __restrict__ m_indptr, const I* __restrict__ m_indices,
                                            int complement, long long row, I col) {
    if (m_indptr == nullptr) return true;
    long long lo = m_indptr[row], hi = m_indptr[row + 1];
    while (lo < hi) {
        const long long mid = lo + (hi - lo) / 2;
        if (m_indices[mid] < col) lo = mid + 1;
        else hi = mid;
    }
    const bool found = lo < (long long)m_indptr[row + 1] && m_indices[lo] == col;
    return found != (complement != 0);
}

template <int NT> __device__ __forceinline__ void group_sync() {
    if constexpr (NT == 32) __syncwarp();
    else __syncthreads();
}

// Inclusive scan of one long long per thread over the group, and the group's total in `total`
// (every thread); `warp_totals` holds NT / 32.
template <int NT> __device__ __forceinline__ long long group_scan(long long v, long long* warp_totals, long long& total) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
        const long long other = __shfl_up_sync(sg::FULL_MASK, v, offset);
        if (lane >= offset) v += other;
    }
    if constexpr (NT == 32) {
        total = __shfl_sync(sg::FULL_MASK, v, 31);
        return v;
    } else {
        const int warp = (threadIdx.x % NT) / 32;
        if (lane == 31) warp_totals[warp] = v;
        __syncthreads();
        long long before = 0, sum = 0;
        for (int w = 0; w < NT / 32; ++w) {
            if (w < warp) before += warp_totals[w];
            sum += warp_totals[w];
        }
        __syncthreads();  // warp_totals free again
        total = sum;
        return v + before;
    }
}

template <int NT> __device__ __forceinline__ long long group_inclusive_scan(long long v, long long* warp_totals) {
    long long total;
    return group_scan<NT>(v, warp_totals, total);
}

// One group's shared memory, carved from the dynamic allocation in decreasing alignment. The
// host computes the same size (_spgemm.py group_shared_bytes).
template <class V, class I, int NT, int TABLE> struct Shared {
    V* acc;               // [TABLE] folded value by sorted position
    V* a_value;           // [NT] the chunk's A values
    V* staged_value;      // [NT] this round's products
    long long* chunk_end; // [NT] inclusive scan of the chunk's B row lengths
    long long* b_begin;   // [NT] where each chunk entry's B row starts
    long long* warp_totals;  // [NT / 32]
    I* keys;              // [TABLE] the hash table (-1: empty)
    I* sorted;            // [TABLE] the row's columns, sorted; then the fold's marks (TABLE bytes)
    int* position;        // [TABLE] sorted position of the key in each slot
    int* count;           // [1]
    int* staged_slot;     // [NT] this round's slots (sorted positions)

    __host__ __device__ static constexpr long long bytes() {
        const long long raw = (long long)sizeof(V) * (TABLE + 2 * NT) + 8LL * (2 * NT + NT / 32) +
                              (long long)sizeof(I) * 2 * TABLE + 4LL * (TABLE + 1 + NT);
        return (raw + 15) / 16 * 16;
    }

    __device__ __forceinline__ explicit Shared(unsigned char* base) {
        acc = reinterpret_cast<V*>(base);
        a_value = acc + TABLE;
        staged_value = a_value + NT;
        chunk_end = reinterpret_cast<long long*>(staged_value + NT);
        b_begin = chunk_end + NT;
        warp_totals = b_begin + NT;
        keys = reinterpret_cast<I*>(warp_totals + NT / 32);
        sorted = keys + TABLE;
        position = reinterpret_cast<int*>(sorted + TABLE);
        count = position + TABLE;
        staged_slot = count + 1;
    }
};

// Calls visit(valid, column, product) for every product of `row`, NT at a time, in product
// order: thread t of the group gets product t0 + t of each round. Every thread of the group
// calls visit the same number of times (it may synchronise the group). NUMERIC: compute the
// products (otherwise only columns). Products the mask excludes come as invalid.
template <bool NUMERIC, class S, int NT, class V, class I, class Visit>
__device__ __forceinline__ void for_each_product(
    const long long row, const I* __restrict__ a_indptr, const I* __restrict__ a_indices,
    const V* __restrict__ a_data, const I* __restrict__ b_indptr, const I* __restrict__ b_indices,
    const V* __restrict__ b_data, const I* __restrict__ m_indptr, const I* __restrict__ m_indices,
    const int complement, V* a_value, long long* chunk_end, long long* b_begin, long long* warp_totals,
    Visit&& visit) {
    const int tid = threadIdx.x % NT;
    const long long row_begin = a_indptr[row], row_end = a_indptr[row + 1];
    for (long long base = row_begin; base < row_end; base += NT) {
        const long long e = base + tid;
        long long length = 0, begin = 0;
        V value = V(0);
        if (e < row_end) {
            const I k = a_indices[e];
            begin = b_indptr[k];
            length = (long long)b_indptr[k + 1] - begin;
            if (NUMERIC) value = a_data[e];
        }
        const long long end = group_inclusive_scan<NT>(length, warp_totals);
        chunk_end[tid] = end;
        b_begin[tid] = begin;
        a_value[tid] = value;
        group_sync<NT>();
        const long long total = chunk_end[NT - 1];
        for (long long t0 = 0; t0 < total; t0 += NT) {
            const long long t = t0 + tid;
            bool valid = t < total;
            I col = I(-1);
            V product = V(0);
            if (valid) {
                int lo = 0, hi = NT - 1;  // the first chunk entry whose products end past t
                while (lo < hi) {
                    const int mid = (lo + hi) / 2;
                    if (chunk_end[mid] > t) hi = mid;
                    else lo = mid + 1;
                }
                const long long start = lo > 0 ? chunk_end[lo - 1] : 0;
                const long long q = b_begin[lo] + (t - start);
                col = b_indices[q];
                valid = mask_allows(m_indptr, m_indices, complement, row, col);
                if (NUMERIC && valid) product = S::mul(a_value[lo], b_data[q]);
            }
            visit(valid, col, product);
        }
        group_sync<NT>();  // the chunk's arrays are rewritten next
    }
}

// The warps of a group holding slot s in one round of fold_in_order: bit w of byte s % TOUCH of
// `marks` (a table of TOUCH bytes, one per round parity; 8 warps at most). Returns the byte's
// marks before this one.
__device__ __forceinline__ unsigned mark_warp(unsigned char* marks, int at, int warp) {
    const unsigned shift = 8u * (unsigned)(at % 4);
    return (atomicOr(reinterpret_cast<unsigned*>(marks) + at / 4, (1u << warp) << shift) >> shift) & 0xffu;
}

// Whether a warp in `warps` has a lane whose staged slot is s.
__device__ __forceinline__ bool any_warp_holds(const int* staged_slot, unsigned warps, int s) {
    for (; warps != 0u; warps &= warps - 1u) {
        const int* slots = staged_slot + 32 * (__ffs(warps) - 1);
        for (int j = 0; j < 32; ++j)
            if (slots[j] == s) return true;
    }
    return false;
}

// acc[s] folded with the products of a warp's lanes in `peers`, in lane order (`values`: the
// warp's staged products).
template <class S, class V> __device__ __forceinline__ void fold_peers(V* acc, int s, unsigned peers, const V* values) {
    V folded = acc[s];
    for (unsigned rest = peers; rest != 0u; rest &= rest - 1u) folded = S::add(folded, values[__ffs(rest) - 1]);
    acc[s] = folded;
}

// acc[s] folded by the leader of the lowest warp holding s: its peers, then the lanes of s in each
// later warp marked in `warps`, in lane order.
template <class S, class V>
__device__ __forceinline__ void fold_across_warps(V* acc, int s, unsigned peers, unsigned warps, int warp,
                                                  const V* staged_value, const int* staged_slot) {
    V folded = acc[s];
    for (unsigned rest = peers; rest != 0u; rest &= rest - 1u)
        folded = S::add(folded, staged_value[warp * 32 + __ffs(rest) - 1]);
    for (unsigned later = warps >> (warp + 1) << (warp + 1); later != 0u; later &= later - 1u) {
        const int other = 32 * (__ffs(later) - 1);
        for (int j = 0; j < 32; ++j)
            if (staged_slot[other + j] == s) folded = S::add(folded, staged_value[other + j]);
    }
    acc[s] = folded;
}

// Fold every product of `row` into acc[position(col)] in product order. position(col) is called
// for the products the mask allows; < 0: not in the row. Every thread of the group calls it. Per
// round, a warp's lanes of one slot are its peers (__match_any_sync), the lowest of them the
// warp's leader. One warp: each leader folds its peers in lane order. Several: each leader marks
// its warp on the slot (marks of TOUCH bytes per parity, zero on entry, left zero; slots taken
// modulo TOUCH, so two slots may share a byte when the row has more entries than TOUCH,
// EXACT false); the barrier after counts the round's spans: the leaders that found their byte
// already marked (leaders minus the distinct bytes marked, a number that does not depend on the
// atomics' order). Few spans (at most fold_turns per warp): the leader of the lowest warp holding
// the slot folds its peers, then the lanes of that slot in each later marked warp, in lane order,
// and the warps fold at once (two barriers per round). More spans (few columns, so a slot's
// lanes sit in many warps and a lowest leader would scan them all alone): the warps take turns in
// warp order, each leader folding only its peers (one barrier per warp). Either way each slot
// gets its products in product order: the bits do not depend on the choice. The round before's
// marks are cleared by their leaders while the next round stages.
template <class S, int NT, int TOUCH, bool EXACT, class V, class I, class Position>
__device__ __forceinline__ void fold_in_order(
    const long long row, const I* __restrict__ a_indptr, const I* __restrict__ a_indices,
    const V* __restrict__ a_data, const I* __restrict__ b_indptr, const I* __restrict__ b_indices,
    const V* __restrict__ b_data, const I* __restrict__ m_indptr, const I* __restrict__ m_indices,
    const int complement, V* a_value, V* staged_value, int* staged_slot, unsigned char* touch, long long* chunk_end,
    long long* b_begin, long long* warp_totals, V* acc, const int fold_turns, Position&& position) {
    static_assert(NT <= 256 && TOUCH % 4 == 0 && (TOUCH & (TOUCH - 1)) == 0, "a byte of marks per slot");
    const int tid = threadIdx.x % NT, lane = threadIdx.x % 32, warp = tid / 32;
    int parity = 0, marked = -1;  // marked: the slot this lane led in the round before
    for_each_product<true, S, NT>(
        row, a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, m_indptr, m_indices, complement, a_value,
        chunk_end, b_begin, warp_totals, [&](bool valid, I col, V product) {
            const int s = valid ? position(col) : -1;
            staged_value[tid] = product;
            if constexpr (NT > 32) {
                staged_slot[tid] = s;
                if (marked >= 0) touch[(parity ^ 1) * TOUCH + (marked & (TOUCH - 1))] = 0;
            }
            __syncwarp();
            const unsigned peers = __match_any_sync(sg::FULL_MASK, s);
            const bool leader = s >= 0 && __ffs(peers) - 1 == lane;
            if constexpr (NT == 32) {
                if (leader) fold_peers<S>(acc, s, peers, staged_value);
                __syncwarp();
            } else {
                unsigned char* marks = touch + parity * TOUCH;
                const bool spans = leader && mark_warp(marks, s & (TOUCH - 1), warp) != 0u;
                if (__syncthreads_count(spans) > (long long)fold_turns * (NT / 32)) {
                    for (int w = 0; w < NT / 32; ++w) {  // the last barrier closes the round
                        if (w == warp && leader) fold_peers<S>(acc, s, peers, staged_value + warp * 32);
                        __syncthreads();
                    }
                } else {
                    if (leader) {
                        const unsigned warps = marks[s & (TOUCH - 1)];
                        const unsigned below = warps & ((1u << warp) - 1u);
                        if (EXACT ? below == 0u : !any_warp_holds(staged_slot, below, s))
                            fold_across_warps<S>(acc, s, peers, warps, warp, staged_value, staged_slot);
                    }
                    __syncthreads();
                }
                marked = leader ? s : -1;
                parity ^= 1;
            }
        });
    if (NT > 32 && marked >= 0) touch[(parity ^ 1) * TOUCH + (marked & (TOUCH - 1))] = 0;
}

// Bitonic sort of sorted[0:n) ascending (n <= TABLE), padded to a power of two with the
// largest index value.
template <int NT, int TABLE, class I> __device__ __forceinline__ void sort_keys(I* sorted, int n) {
    const int tid = threadIdx.x % NT;
    int size = 1;
    while (size < n) size *= 2;
    for (int i = n + tid; i < size; i += NT) sorted[i] = index_limits<I>::highest();
    group_sync<NT>();
    for (int k = 2; k <= size; k *= 2) {
        for (int j = k / 2; j > 0; j /= 2) {
            for (int i = tid; i < size; i += NT) {
                const int partner = i ^ j;
                if (partner > i) {
                    const I x = sorted[i], y = sorted[partner];
                    const bool ascending = (i & k) == 0;
                    if ((x > y) == ascending) {
                        sorted[i] = y;
                        sorted[partner] = x;
                    }
                }
            }
            group_sync<NT>();
        }
    }
}

// A numeric row's counts: kept[row] = its entries that are not zero; the others, if any, added to
// stats[SPGEMM_STAT_ZEROS] (so that the host learns from one word whether any entry is zero).
__device__ __forceinline__ void count_kept(long long* kept, unsigned long long* stats, long long row,
                                           long long nonzero, long long entries) {
    kept[row] = nonzero;
    if (nonzero < entries) atomicAdd(stats + SPGEMM_STAT_ZEROS, (unsigned long long)(entries - nonzero));
}

// The numeric phase of one row whose keys are in the table (sh.count zero): compact the keys
// (any order), sort them, note each key's sorted position, write the columns at c_indices +
// out; fold each entry's products in product order and write the values at c_data + out;
// kept[row] = the values that are not zero and stats[SPGEMM_STAT_ZEROS] += the others (unless
// kept is null).
template <class S, int NT, int TABLE, class V, class I>
__device__ __forceinline__ void fill_row(Shared<V, I, NT, TABLE>& sh, const long long row, const long long out,
                                         const I* __restrict__ a_indptr, const I* __restrict__ a_indices,
                                         const V* __restrict__ a_data, const I* __restrict__ b_indptr,
                                         const I* __restrict__ b_indices, const V* __restrict__ b_data,
                                         const I* __restrict__ m_indptr, const I* __restrict__ m_indices,
                                         const int complement, I* __restrict__ c_indices, V* __restrict__ c_data,
                                         long long* __restrict__ kept, unsigned long long* __restrict__ stats,
                                         const int fold_turns) {
    const int tid = threadIdx.x % NT;
    for (int i = tid; i < TABLE; i += NT)
        if (sh.keys[i] != I(-1)) sh.sorted[atomicAdd(sh.count, 1)] = sh.keys[i];
    group_sync<NT>();
    const int n = *sh.count;
    sort_keys<NT, TABLE>(sh.sorted, n);
    for (int s = tid; s < n; s += NT) {
        const I col = sh.sorted[s];
        const int slot = find<TABLE>(sh.keys, col);  // present: every key was inserted
        if (slot >= 0) sh.position[slot] = s;
        sh.acc[s] = S::identity();
        c_indices[out + s] = col;
    }
    group_sync<NT>();
    unsigned char* touch = reinterpret_cast<unsigned char*>(sh.sorted);  // the columns are written
    if constexpr (NT > 32) {
        for (int i = tid; i < TABLE / 4; i += NT) reinterpret_cast<unsigned*>(touch)[i] = 0u;
        group_sync<NT>();
    }
    // A slot per entry (at most TABLE / 2): its marks never share a byte.
    fold_in_order<S, NT, TABLE / 2, true>(row, a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, m_indptr,
                                          m_indices, complement, sh.a_value, sh.staged_value, sh.staged_slot, touch,
                                          sh.chunk_end, sh.b_begin, sh.warp_totals, sh.acc, fold_turns, [&](I col) {
                             const int slot = find<TABLE>(sh.keys, col);
                             return slot >= 0 ? sh.position[slot] : -1;
                         });
    group_sync<NT>();
    long long nonzero = 0;
    for (int s = tid; s < n; s += NT) {
        c_data[out + s] = sh.acc[s];
        nonzero += sg::is_zero(sh.acc[s]) ? 0 : 1;
    }
    if (kept != nullptr) {
        long long total = 0;
        group_scan<NT>(nonzero, sh.warp_totals, total);
        if (tid == 0) count_kept(kept, stats, row, total, n);
    }
}

// A row of at most 32 A entries and 32 products, by one warp in registers (no table, no sort):
// lane t holds product t; the lanes of one column are found with __match_any_sync, the lowest
// (the leader) folds its peers' products in lane order (product order) from the identity, and
// its sorted position is the number of leaders of smaller columns. Symbolic: counts[row] = the
// leaders. Numeric: the entries at c_indices / c_data + indptr[row], and counts[row] = the
// values that are not zero (count_kept, unless counts is null). False (nothing written) for a larger row,
// which the hash table then computes; the warp decides together.
template <bool NUMERIC, class S, class V, class I>
__device__ __forceinline__ bool warp_row(Shared<V, I, 32, 64>& sh, const long long row,
                                         const long long* __restrict__ indptr, long long* __restrict__ counts,
                                         const I* __restrict__ a_indptr, const I* __restrict__ a_indices,
                                         const V* __restrict__ a_data, const I* __restrict__ b_indptr,
                                         const I* __restrict__ b_indices, const V* __restrict__ b_data,
                                         const I* __restrict__ m_indptr, const I* __restrict__ m_indices,
                                         const int complement, I* __restrict__ c_indices, V* __restrict__ c_data,
                                         unsigned long long* __restrict__ stats) {
    const int lane = threadIdx.x % 32;
    const long long row_begin = a_indptr[row], row_end = a_indptr[row + 1];
    if (row_end - row_begin > 32) return false;
    const long long e = row_begin + lane;
    long long length = 0, begin = 0;
    V value = V(0);
    if (e < row_end) {
        const I k = a_indices[e];
        begin = b_indptr[k];
        length = (long long)b_indptr[k + 1] - begin;
        if (NUMERIC) value = a_data[e];
    }
    long long total;
    const long long end = group_scan<32>(length, nullptr, total);
    if (total > 32) return false;
    sh.chunk_end[lane] = end;
    sh.b_begin[lane] = begin;
    sh.a_value[lane] = value;
    __syncwarp();
    bool valid = lane < total;
    I col = I(-1);
    V product = V(0);
    if (valid) {
        int lo = 0, hi = 31;  // the first entry whose products end past this lane's
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (sh.chunk_end[mid] > lane) hi = mid;
            else lo = mid + 1;
        }
        const long long q = sh.b_begin[lo] + (lane - (lo > 0 ? sh.chunk_end[lo - 1] : 0));
        col = b_indices[q];
        valid = mask_allows(m_indptr, m_indices, complement, row, col);
        if (NUMERIC && valid) product = S::mul(sh.a_value[lo], b_data[q]);
    }
    const unsigned peers = __match_any_sync(sg::FULL_MASK, valid ? col : I(-1));
    const bool leader = valid && __ffs(peers) - 1 == lane;
    const unsigned leaders = __ballot_sync(sg::FULL_MASK, leader);
    if constexpr (!NUMERIC) {
        if (lane == 0) counts[row] = __popc(leaders);
    } else {
        int rank = 0;  // leaders of smaller columns
        for (unsigned rest = leaders; rest != 0u; rest &= rest - 1u)
            rank += __shfl_sync(sg::FULL_MASK, col, __ffs(rest) - 1) < col ? 1 : 0;
        sh.staged_value[lane] = product;
        __syncwarp();
        bool nonzero = false;
        if (leader) {
            V folded = S::identity();
            for (unsigned rest = peers; rest != 0u; rest &= rest - 1u)
                folded = S::add(folded, sh.staged_value[__ffs(rest) - 1]);
            const long long out = indptr[row] + rank;
            c_indices[out] = col;
            c_data[out] = folded;
            nonzero = !sg::is_zero(folded);
        }
        const unsigned kept = __ballot_sync(sg::FULL_MASK, nonzero);
        if (counts != nullptr && lane == 0) count_kept(counts, stats, row, __popc(kept), __popc(leaders));
    }
    return true;
}

}  // namespace spgemm

// One group of NT threads per listed row: row = rows[r] (a row of C), r < n_rows. Symbolic
// (NUMERIC false): counts[row] = the row's entries. Numeric: the row's sorted columns and values
// at c_indices / c_data + indptr[row], counts[row] = its values that are not zero and
// stats[SPGEMM_STAT_ZEROS] += the others (unless counts is null); fold_turns: fold_in_order's
// rule. Launch: NT = 32 -> blocks of 32 * SPGEMM_WARP_GROUPS
// threads, else blocks of NT; dynamic shared memory = groups per block * Shared::bytes().
template <class V, class I, class S, int NT, int TABLE, bool NUMERIC>
__global__ void spgemm_rows(const long long n_rows, const long long* __restrict__ rows,
                            const long long* __restrict__ indptr, long long* __restrict__ counts,
                            const I* __restrict__ a_indptr, const I* __restrict__ a_indices,
                            const V* __restrict__ a_data, const I* __restrict__ b_indptr,
                            const I* __restrict__ b_indices, const V* __restrict__ b_data,
                            const I* __restrict__ m_indptr, const I* __restrict__ m_indices, const int complement,
                            I* __restrict__ c_indices, V* __restrict__ c_data, unsigned long long* __restrict__ stats,
                            const int fold_turns) {
    using Layout = spgemm::Shared<V, I, NT, TABLE>;
    extern __shared__ __align__(16) unsigned char spgemm_shared[];
    const int groups = NT == 32 ? SPGEMM_WARP_GROUPS : 1;
    const int group = threadIdx.x / NT, tid = threadIdx.x % NT;
    const long long r = (long long)blockIdx.x * groups + group;
    if (r >= n_rows) return;  // whole groups leave: a group synchronises only its own threads
    Layout sh(spgemm_shared + group * Layout::bytes());
    const long long row = rows[r];
    if constexpr (NT == 32) {
        if (spgemm::warp_row<NUMERIC, S>(sh, row, indptr, counts, a_indptr, a_indices, a_data, b_indptr, b_indices,
                                         b_data, m_indptr, m_indices, complement, c_indices, c_data, stats))
            return;
    }

    for (int i = tid; i < TABLE; i += NT) sh.keys[i] = I(-1);
    if (tid == 0) *sh.count = 0;
    spgemm::group_sync<NT>();
    spgemm::for_each_product<false, S, NT>(
        row, a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, m_indptr, m_indices, complement,
        sh.a_value, sh.chunk_end, sh.b_begin, sh.warp_totals, [&](bool valid, I col, V) {
            if (valid && spgemm::insert<TABLE>(sh.keys, col) && !NUMERIC) atomicAdd(sh.count, 1);
        });
    spgemm::group_sync<NT>();
    if constexpr (!NUMERIC) {
        if (tid == 0) counts[row] = *sh.count;
    } else {
        spgemm::fill_row<S, NT, TABLE>(sh, row, indptr[row], a_indptr, a_indices, a_data, b_indptr, b_indices, b_data,
                                       m_indptr, m_indices, complement, c_indices, c_data, counts, stats,
                                       fold_turns);
    }
}

inline constexpr int SPGEMM_WIDE_THREADS = 256;  // threads per block (one row at a time) of spgemm_wide
inline constexpr int SPGEMM_WIDE_TOUCH = 2048;   // bytes of the wide fold's marks per round parity

namespace spgemm {

// The product walk's arrays of a wide-row block, carved from the dynamic shared memory; the
// bitmap follows when it lives there. The host computes the same size (_spgemm_device.py
// wide_walk_bytes).
template <class V, int NT> struct Walk {
    V* a_value;              // [NT] the chunk's A values
    V* staged_value;         // [NT] this round's products
    long long* chunk_end;    // [NT] inclusive scan of the chunk's B row lengths
    long long* b_begin;      // [NT] where each chunk entry's B row starts
    long long* warp_totals;  // [NT / 32]
    int* staged_slot;        // [NT] this round's ranks
    unsigned char* touch;    // [2 * SPGEMM_WIDE_TOUCH] the fold's marks, zero between rows

    __host__ __device__ static constexpr long long bytes() {
        return ((long long)sizeof(V) * 2 * NT + 8LL * (2 * NT + NT / 32) + 4LL * NT + 2LL * SPGEMM_WIDE_TOUCH + 15) /
               16 * 16;
    }

    __device__ __forceinline__ explicit Walk(unsigned char* base) {
        a_value = reinterpret_cast<V*>(base);
        staged_value = a_value + NT;
        chunk_end = reinterpret_cast<long long*>(staged_value + NT);
        b_begin = chunk_end + NT;
        warp_totals = b_begin + NT;
        staged_slot = reinterpret_cast<int*>(warp_totals + NT / 32);
        touch = reinterpret_cast<unsigned char*>(staged_slot + NT);
    }
};

// The rank of a marked column among the row's: the set bits of the words before its own (prefix)
// and of its own word below it.
__device__ __forceinline__ int bit_rank(const unsigned* bits, const unsigned* prefix, long long col) {
    const long long w = col >> 5;
    return (int)(prefix[w] + (unsigned)__popc(bits[w] & ((1u << (unsigned)(col & 31)) - 1u)));
}

}  // namespace spgemm

// Wide rows: one block of SPGEMM_WIDE_THREADS per listed row at a time (r = blockIdx.x, then
// every gridDim.x), row = rows[r]. The row's columns are marked in a bitmap of n_cols bits,
// followed by one rank prefix per word: in shared memory after the Walk when scratch is null,
// else at scratch + blockIdx.x * 2 * words (zero on entry; every row leaves its bits zero).
// Symbolic: counts[row] = the marked columns. Numeric: the row's sorted columns and values at
// c_indices / c_data + indptr[row], folded in product order; counts[row] = its values that are
// not zero and stats[SPGEMM_STAT_ZEROS] += the others (unless counts is null); fold_turns:
// fold_in_order's rule. Ranks are int: the host keeps n_cols below 2^31.
template <class V, class I, class S, bool NUMERIC>
__global__ void __launch_bounds__(SPGEMM_WIDE_THREADS)
    spgemm_wide(const long long n_rows, const long long* __restrict__ rows, const long long* __restrict__ indptr,
                long long* __restrict__ counts, const I* __restrict__ a_indptr, const I* __restrict__ a_indices,
                const V* __restrict__ a_data, const I* __restrict__ b_indptr, const I* __restrict__ b_indices,
                const V* __restrict__ b_data, const I* __restrict__ m_indptr, const I* __restrict__ m_indices,
                const int complement, I* __restrict__ c_indices, V* __restrict__ c_data, const long long n_cols,
                unsigned* __restrict__ scratch, unsigned long long* __restrict__ stats, const int fold_turns) {
    constexpr int NT = SPGEMM_WIDE_THREADS;
    using Layout = spgemm::Walk<V, NT>;
    extern __shared__ __align__(16) unsigned char spgemm_shared[];
    Layout walk(spgemm_shared);
    const int tid = threadIdx.x;
    const long long words = (n_cols + 31) / 32;
    unsigned* bits = scratch != nullptr ? scratch + (long long)blockIdx.x * 2 * words
                                        : reinterpret_cast<unsigned*>(spgemm_shared + Layout::bytes());
    unsigned* prefix = bits + words;
    if (scratch == nullptr)
        for (long long w = tid; w < words; w += NT) bits[w] = 0u;
    for (int i = tid; i < SPGEMM_WIDE_TOUCH / 2; i += NT) reinterpret_cast<unsigned*>(walk.touch)[i] = 0u;
    __syncthreads();
    for (long long r = blockIdx.x; r < n_rows; r += gridDim.x) {
        const long long row = rows[r];
        spgemm::for_each_product<false, S, NT>(
            row, a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, m_indptr, m_indices, complement,
            walk.a_value, walk.chunk_end, walk.b_begin, walk.warp_totals, [&](bool valid, I col, V) {
                if (valid) atomicOr(bits + (col >> 5), 1u << (unsigned)(col & 31));
            });
        __syncthreads();
        long long total = 0;
        if constexpr (!NUMERIC) {
            long long marked = 0;
            for (long long w = tid; w < words; w += NT) {
                marked += __popc(bits[w]);
                bits[w] = 0u;
            }
            spgemm::group_scan<NT>(marked, walk.warp_totals, total);
            if (tid == 0) counts[row] = total;
        } else {
            // Ranks and columns: a scan of the words' set bits, NT words at a time.
            const long long out = indptr[row];
            long long carry = 0;
            for (long long base = 0; base < words; base += NT) {
                const long long w = base + tid;
                const unsigned word = w < words ? bits[w] : 0u;
                long long at = carry + spgemm::group_scan<NT>(__popc(word), walk.warp_totals, total) - __popc(word);
                if (w < words) prefix[w] = (unsigned)at;
                for (unsigned rest = word; rest != 0u; rest &= rest - 1u, ++at) {
                    c_indices[out + at] = I(w * 32 + __ffs(rest) - 1);
                    c_data[out + at] = S::identity();
                }
                carry += total;
            }
            __syncthreads();
            spgemm::fold_in_order<S, NT, SPGEMM_WIDE_TOUCH, false>(
                row, a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, m_indptr, m_indices, complement,
                walk.a_value, walk.staged_value, walk.staged_slot, walk.touch, walk.chunk_end, walk.b_begin,
                walk.warp_totals, c_data + out, fold_turns,
                [&](I col) { return spgemm::bit_rank(bits, prefix, (long long)col); });
            __syncthreads();
            long long nonzero = 0;
            for (long long s = tid; s < carry; s += NT) nonzero += sg::is_zero(c_data[out + s]) ? 0 : 1;
            for (long long w = tid; w < words; w += NT) bits[w] = 0u;
            if (counts != nullptr) {
                spgemm::group_scan<NT>(nonzero, walk.warp_totals, total);
                if (tid == 0) spgemm::count_kept(counts, stats, row, total, carry);
            }
        }
        __syncthreads();  // the bitmap is clear and the walk's arrays free for the next row
    }
}

// ---------------------------------------------------------------- planning, binning, zeros
// The rules are the NumPy reference's (upper_bounds, output_bounds, bin_rows, row_costs); the
// host passes their constants (stats layout: the top of this file).

namespace spgemm {
// The first capacity holding `length` (SPGEMM_WIDE past them all), -1 for an empty row.
__device__ __forceinline__ int bin_of(long long length, long long cap0, long long cap1, long long cap2,
                                      long long cap3) {
    return length <= 0      ? -1
           : length <= cap0 ? 0
           : length <= cap1 ? 1
           : length <= cap2 ? 2
           : length <= cap3 ? 3
                            : SPGEMM_WIDE;
}
}  // namespace spgemm

// One warp per row of C (grid-stride): products = the sum of B's row lengths over A's row;
// bound = min(products, n_cols, the mask row's length unless complement); bin of the bound; cost
// = 2 bound entry_bytes + (wide rows: wide_bytes, their bitmap in global scratch) + row_overhead.
// Writes bins[row], costs[row] and counts[row] = 0 (and counts[m] = 0: the rows' counts, then
// their scan's total); adds rows per bin, costs, wide rows' products and products to stats (one
// atomic per block and counter).
template <class I>
__global__ void spgemm_plan(const long long m, const I* __restrict__ a_indptr, const I* __restrict__ a_indices,
                            const I* __restrict__ b_indptr, const I* __restrict__ m_indptr, const int complement,
                            const long long n_cols, const long long cap0, const long long cap1, const long long cap2,
                            const long long cap3, const long long entry_bytes, const long long wide_bytes,
                            const long long row_overhead,
                            signed char* __restrict__ bins, long long* __restrict__ costs,
                            long long* __restrict__ counts, unsigned long long* __restrict__ stats) {
    __shared__ unsigned long long block_stats[SPGEMM_STAT_PRODUCTS + 1];
    if (threadIdx.x <= SPGEMM_STAT_PRODUCTS) block_stats[threadIdx.x] = 0;
    if (blockIdx.x == 0 && threadIdx.x == 0) counts[m] = 0;
    __syncthreads();
    const int lane = threadIdx.x % 32;
    const long long warps = (long long)gridDim.x * (blockDim.x / 32);
    for (long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; row < m; row += warps) {
        long long products = 0;
        const long long end = a_indptr[row + 1];
        for (long long e = (long long)a_indptr[row] + lane; e < end; e += 32) {
            const I k = a_indices[e];
            products += (long long)b_indptr[k + 1] - (long long)b_indptr[k];
        }
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) products += __shfl_down_sync(sg::FULL_MASK, products, offset);
        if (lane == 0) {
            long long bound = min(products, n_cols);
            if (m_indptr != nullptr && !complement)
                bound = min(bound, (long long)m_indptr[row + 1] - (long long)m_indptr[row]);
            const int bin = spgemm::bin_of(bound, cap0, cap1, cap2, cap3);
            const bool wide = bin == SPGEMM_WIDE;
            const long long cost = 2 * bound * entry_bytes + (wide ? wide_bytes : 0) + row_overhead;
            bins[row] = (signed char)bin;
            costs[row] = cost;
            counts[row] = 0;
            if (bin >= 0) atomicAdd(&block_stats[bin], 1ull);
            atomicAdd(&block_stats[SPGEMM_STAT_COST], (unsigned long long)cost);
            if (wide) atomicAdd(&block_stats[SPGEMM_STAT_WIDE_PRODUCTS], (unsigned long long)products);
            atomicAdd(&block_stats[SPGEMM_STAT_PRODUCTS], (unsigned long long)products);
        }
    }
    __syncthreads();
    if (threadIdx.x <= SPGEMM_STAT_PRODUCTS && block_stats[threadIdx.x] != 0)
        atomicAdd(&stats[threadIdx.x], block_stats[threadIdx.x]);
}

// Rows lo:hi's bins for one phase, counted into stats[0, SPGEMM_BINS). counts == nullptr: the
// bins as they are (the plan's, by bound). Otherwise each row is rebinned by its exact count (a
// wide row of few entries goes to a hash table), and the rows of some entry whose bin changes are
// counted in stats[SPGEMM_STAT_MOVED] (none: the plan's lists still hold every row of each bin).
// With indptr, stats[SPGEMM_STAT_TOTAL] = indptr[hi].
template <class I>
__global__ void spgemm_count_bins(const long long lo, const long long hi, const long long* __restrict__ counts,
                                  const long long cap0, const long long cap1, const long long cap2,
                                  const long long cap3, signed char* __restrict__ bins,
                                  const long long* __restrict__ indptr, unsigned long long* __restrict__ stats) {
    __shared__ unsigned long long block_counts[SPGEMM_BINS + 1];  // the bins, then the moved rows
    if (threadIdx.x <= SPGEMM_BINS) block_counts[threadIdx.x] = 0;
    __syncthreads();
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long row = lo + (long long)blockIdx.x * blockDim.x + threadIdx.x; row < hi; row += stride) {
        int bin = bins[row];
        if (counts != nullptr) {
            const int planned = bin;
            bin = spgemm::bin_of(counts[row], cap0, cap1, cap2, cap3);
            bins[row] = (signed char)bin;
            if (bin >= 0 && bin != planned) atomicAdd(&block_counts[SPGEMM_BINS], 1ull);
        }
        if (bin >= 0) atomicAdd(&block_counts[bin], 1ull);
    }
    __syncthreads();
    if (threadIdx.x < SPGEMM_BINS && block_counts[threadIdx.x] != 0)
        atomicAdd(&stats[threadIdx.x], block_counts[threadIdx.x]);
    if (threadIdx.x == SPGEMM_BINS && block_counts[SPGEMM_BINS] != 0)
        atomicAdd(&stats[SPGEMM_STAT_MOVED], block_counts[SPGEMM_BINS]);
    if (indptr != nullptr && blockIdx.x == 0 && threadIdx.x == 0) stats[SPGEMM_STAT_TOTAL] = indptr[hi];
}

// Rows lo:hi listed by bin: bin b's rows at lists[start_b:start_b + bin_rows[b]), start_b = the
// rows of the bins before it. The order within a bin is arbitrary (warp-aggregated atomics on
// cursors, zeroed): each row is computed on its own, so the result does not depend on it.
template <class I>
__global__ void spgemm_list_rows(const long long lo, const long long hi, const signed char* __restrict__ bins,
                                 const unsigned long long* __restrict__ bin_rows,
                                 unsigned long long* __restrict__ cursors, long long* __restrict__ lists) {
    const int lane = threadIdx.x % 32;
    const long long stride = (long long)gridDim.x * blockDim.x;
    // Whole warps iterate together: the match and the shuffle need every lane.
    for (long long base = lo + (long long)blockIdx.x * blockDim.x + threadIdx.x - lane; base < hi; base += stride) {
        const long long row = base + lane;
        const int bin = row < hi ? (int)bins[row] : -1;
        const unsigned peers = __match_any_sync(sg::FULL_MASK, bin);
        const int leader = __ffs(peers) - 1;
        unsigned long long at = 0;
        if (bin >= 0 && lane == leader) at = atomicAdd(&cursors[bin], (unsigned long long)__popc(peers));
        at = __shfl_sync(sg::FULL_MASK, at, leader);
        if (bin >= 0) {
            unsigned long long start = 0;
            for (int b = 0; b < bin; ++b) start += bin_rows[b];
            lists[start + at + __popc(peers & ((1u << lane) - 1u))] = row;
        }
    }
}

// C without its zero values: each row's other entries, in order, from kept_ptr[row] of
// out_indices / out_data (one warp per row, grid-stride).
template <class V, class I>
__global__ void spgemm_drop_zeros(const long long m, const long long* __restrict__ indptr,
                                  const long long* __restrict__ kept_ptr, const I* __restrict__ indices,
                                  const V* __restrict__ data, I* __restrict__ out_indices, V* __restrict__ out_data) {
    const int lane = threadIdx.x % 32;
    const long long warps = (long long)gridDim.x * (blockDim.x / 32);
    for (long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; row < m; row += warps) {
        long long out = kept_ptr[row];
        const long long end = indptr[row + 1];
        for (long long base = indptr[row]; base < end; base += 32) {
            const long long p = base + lane;
            const bool keep = p < end && !sg::is_zero(data[p]);
            const unsigned ballot = __ballot_sync(sg::FULL_MASK, keep);
            if (keep) {
                const long long q = out + __popc(ballot & ((1u << lane) - 1u));
                out_indices[q] = indices[p];
                out_data[q] = data[p];
            }
            out += __popc(ballot);
        }
    }
}
