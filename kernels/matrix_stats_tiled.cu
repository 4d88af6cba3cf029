// csr_stats: the advisor's statistics in ONE pass over indptr and indices for the larger matrices
// (the host takes csr_stats_direct, matrix_stats_direct.cu, for the smaller ones), into the buffer
// of matrix_stats_common.cuh; then stats_summary (at the end of this file) summarises it.
//

// Work items. The rows are cut into row tiles of `tile_rows` rows (chosen by the host, a
// multiple of 32 up to STATS_WINDOW, so that a tile holds about 3/4 of STATS_ITEM entries on
// average). A block takes a tile, copies its tile_rows + 1 pointers into shared memory once
// (16-byte cp.async copies, all in flight at once), and from there computes the tile's row statistics (a warp per slice of 32
// rows: the slice's width, the length histogram in block-private shared bins, a slice of equal
// lengths adding once, longer rows appended to the overflow list) AND, for the tile's first
// STATS_ITEM entries, the structure statistics.
//
// The structure statistics go piece by piece: pieces are STATS_PIECE entries (8 KiB of columns)
// on a grid aligned to the piece, cut to the item. The block copies a piece's columns into shared
// memory with coalesced 16-byte loads (issued one piece ahead: the next piece's bytes are in
// flight while the block works on this one), then walks the rows that meet the piece, each cut to
// it, knowing every entry's row without any search:
//  - a row with fewer than STATS_SHORT entries in the piece: one thread, which walks its entries
//    in shared memory starting at a skew, lane * g / 32 for g the largest power of two dividing
//    the length, and wrapping (so rows of equal even lengths spread over the banks: lanes whose
//    rows start on the same bank start at different entries); consecutive threads
//    take consecutive rows, the piece's first row from the piece before (the row that holds the
//    previous piece's last entry), so rows never have to be searched for;
//  - a longer row: announced in a shared list (one shared atomic gives its slot and its first
//    32-entry segment), then after a barrier all the block's warps share the listed rows'
//    segments, lane-strided: 32 consecutive entries a warp step, spread over the 8 warps
//    whatever the rows' lengths.
// Per entry that is one shared load and a few integer operations, and the global loads are all
// whole, coalesced 16-byte vectors (single entries only where indices is not 16-byte aligned,
// and in a last vector that would reach past nnz).
// The counts below and above the diagonal are 32-bit per thread within an item (it has at most
// STATS_ITEM entries), added into 64-bit per-warp totals in shared memory after it; the sum and
// max of |i - j| are 64-bit per thread; entries on the diagonal are the block's item entries
// less those below and above it.
// Work is split by entries, not rows, past STATS_ITEM: a tile with more entries (a very long
// row, or dense rows) announces the rest as chunks of STATS_ITEM entries in a queue, and any
// block takes them, so a row of 10^7 entries is spread over the whole device. A chunk reloads its
// tile's pointers (from L2), finds its first row by a binary search of them, and runs the same
// structure code. Many empty rows cost nothing special: a tile never holds more rows than its
// shared window.
//
// Scheduling, without a grid barrier and without deadlock whatever the scheduling: one ticket
// counter hands out work in order: tickets below the tile count are row tiles, the ticket
// tiles + c is queue slot c. A tile's block announces its chunks (reserving slots with one
// atomic), publishes each as (tile, first entry, epoch flag), and then counts itself done, all
// before its own structure work. A block holding slot c waits (thread 0 polls, sleeping) until
// slot c is published, or until every tile is done and fewer than c + 1 chunks were announced,
// then leaves. It waits only on tiles whose tickets came before its own, so on blocks already
// running that never wait: progress is guaranteed. The counters (COUNTER_*: the ticket, chunks
// announced, tiles done) lie just before `out` and are zeroed with its head, by stats_summary
// (or the host); published slots carry the call's epoch (the host counts calls up), so the queue
// is never zeroed: an older call's slots hold older epochs.
#include "matrix_stats_summary.cuh"

// Blocks per SM registers are capped for, without spills (40 registers a thread for int32, 48
// for int64); shared memory (about 33 and 41 KB) allows as many.
template <class I> constexpr int STATS_MIN_BLOCKS = sizeof(I) == 4 ? 6 : 5;
// Entries of a work item (a tile's own part, or a chunk): 64 KiB of columns.
template <class I> constexpr long long STATS_ITEM = 65536 / sizeof(I);
// Entries of a piece: 8 KiB of columns in shared memory, two 16-byte vectors a thread.
template <class I> constexpr int STATS_PIECE = 8192 / sizeof(I);
template <class I> constexpr int PIECE_VECTORS = STATS_PIECE<I> / STATS_VECTOR<I> / STATS_BLOCK;
// A row with fewer entries in a piece is walked by one thread; longer ones (at most
// STATS_PIECE / STATS_SHORT a piece) are shared by the block in segments of 32 entries.
inline constexpr int STATS_SHORT = 32;
template <class I> constexpr int LONG_ROWS = STATS_PIECE<I> / STATS_SHORT;
inline constexpr int QUEUE_WORDS = 4;  // a queue slot: tile, first entry, epoch flag, (padding)
inline constexpr unsigned STATS_POLL_NS = 200;

// The last index r in [low, high) with window[r] <= j, given window[low] <= j (else low).
template <class I>
__device__ __forceinline__ int window_search(const I* window, int low, int high, I j) {
    while (high - low > 1) {
        const int mid = (low + high) / 2;
        if (window[mid] <= j) low = mid; else high = mid;
    }
    return low;
}

// One 16-byte vector of columns stored as a whole.
__device__ __forceinline__ void store_vector(int* p, const int (&e)[4]) {
    *reinterpret_cast<int4*>(p) = int4{e[0], e[1], e[2], e[3]};
}
__device__ __forceinline__ void store_vector(long long* p, const long long (&e)[2]) {
    *reinterpret_cast<longlong2*>(p) = longlong2{e[0], e[1]};
}

__device__ __forceinline__ unsigned long long load_volatile(const unsigned long long* p) {
    return *reinterpret_cast<const volatile unsigned long long*>(p);
}

// The vectors of the piece of columns starting at `base` (a multiple of STATS_PIECE) that meet
// its entries [from, to) (offsets from base): thread t's v-th is the vector at offset
// STATS_VECTOR * (t + v * STATS_BLOCK). Whole 16-byte loads when indices is 16-byte aligned
// and the vector lies within the nnz entries; else one entry at a time, those in [from, to).
template <class I>
__device__ __forceinline__ bool piece_vector_needed(const int offset, const int from, const int to) {
    return offset + STATS_VECTOR<I> > from && offset < to;
}
template <class I>
__device__ __forceinline__ void load_piece(const I* __restrict__ indices, const I base, const int from, const int to,
                                           const I nnz, const bool aligned,
                                           I (&held)[PIECE_VECTORS<I>][STATS_VECTOR<I>]) {
    constexpr int N = STATS_VECTOR<I>;
    const I room = nnz - base;  // entries of indices from base on
#pragma unroll
    for (int v = 0; v < PIECE_VECTORS<I>; ++v) {
        const int offset = (threadIdx.x + v * STATS_BLOCK) * N;
        if (!piece_vector_needed<I>(offset, from, to)) continue;
        if (aligned && I(offset + N) <= room) {
            load_vector(indices + base + offset, held[v]);
        } else {
#pragma unroll
            for (int k = 0; k < N; ++k)
                held[v][k] = offset + k >= from && offset + k < to ? __ldcs(indices + base + offset + k) : I(0);
        }
    }
}
template <class I>
__device__ __forceinline__ void store_piece(I* stage, const int from, const int to,
                                            const I (&held)[PIECE_VECTORS<I>][STATS_VECTOR<I>]) {
#pragma unroll
    for (int v = 0; v < PIECE_VECTORS<I>; ++v) {
        const int offset = (threadIdx.x + v * STATS_BLOCK) * STATS_VECTOR<I>;
        if (piece_vector_needed<I>(offset, from, to)) store_vector(stage + offset, held[v]);
    }
}

// The rows of the tile (pointers window[0..rows], rows starting at row0) that meet the piece's
// entries [plo, phi) (its columns in stage, from entry `base` on), from first_row on (no row
// before it meets the piece): thread t takes rows first_row + t, + t + STATS_BLOCK, ... up to
// the first row that starts at phi or later, each cut to the piece. Short rows are counted here;
// longer ones are listed for piece_long_rows: long_counter counts (listed rows << 32) + their
// 32-entry segments, so one atomic gives a row its slot and its first segment, slots in segment
// order. The row that holds the piece's last entry is written to next_first_row.
template <class I>
__device__ __forceinline__ void piece_short_rows(const I* window, const int rows, const I row0, const I base,
                                                 const I plo, const I phi, const int first_row, const I* stage,
                                                 int* next_first_row, unsigned long long* long_counter,
                                                 int2* long_rows, Structure<I>& s) {
    const int lane = threadIdx.x % 32;
    for (int r = first_row + threadIdx.x; r < rows; r += STATS_BLOCK) {
        const I start = window[r];
        if (start >= phi) break;
        const I end = window[r + 1];
        const I b = start > plo ? start : plo, e = end < phi ? end : phi;
        if (e <= b) continue;  // an empty row, or one that ends before the piece
        if (e == phi) *next_first_row = r;
        const int length = int(e - b), first = int(b - base);
        if (length >= STATS_SHORT) {
            const unsigned long long slot =
                atomicAdd(long_counter, (1ULL << 32) | (unsigned long long)((length + 31) / 32));
            // (Rows of a valid indptr are disjoint, so at most LONG_ROWS<I> fit a piece; overlapping
            // rows of a corrupt one are dropped past that.)
            if ((slot >> 32) < (unsigned long long)LONG_ROWS<I>) long_rows[slot >> 32] = int2{int(unsigned(slot)), r};
            continue;
        }
        // Column minus row fits I: the host checked 0 <= column < n_cols, and rows fit I too.
        const I row = row0 + I(r);
        // Start at a skew below the largest power of two dividing the length (rows of equal even
        // lengths: the lanes' first entries step through the banks), wrapping at the row's end.
        const int stop = first + length;
        int k = first + ((lane * (length & -length)) >> 5);
        for (int n = 0; n < length; ++n) {
            s.count(stage[k] - row);
            k = k + 1 == stop ? first : k + 1;
        }
    }
}

// The listed long rows' segments (`listed` as long_counter read after the listing): warp w takes
// segments w, w + 8, ..., lane l the segment's entry l; a warp walks the list forward as its
// segments advance.
template <class I>
__device__ __forceinline__ void piece_long_rows(const I* window, const I row0, const I base, const I plo, const I phi,
                                                const unsigned long long listed, const int2* long_rows,
                                                const I* stage, Structure<I>& s) {
    const int count = listed >> 32 < LONG_ROWS<I> ? int(listed >> 32) : LONG_ROWS<I>;
    const int segments = int(unsigned(listed));
    int k = 0;
    for (int segment = threadIdx.x / 32; segment < segments; segment += STATS_BLOCK / 32) {
        while (k + 1 < count && long_rows[k + 1].x <= segment) ++k;
        const int2 listed_row = long_rows[k];
        const I start = window[listed_row.y], end = window[listed_row.y + 1];
        const I b = start > plo ? start : plo, e = end < phi ? end : phi;
        const I j = b + I((segment - listed_row.x) * 32 + threadIdx.x % 32);
        if (j < e) s.count(stage[int(j - base)] - (row0 + I(listed_row.y)));
    }
}

template <class I>
__global__ void __launch_bounds__(STATS_BLOCK, STATS_MIN_BLOCKS<I>)
csr_stats(const I* __restrict__ indptr, const I* __restrict__ indices, const long long n_rows, const long long nnz,
          const int tile_rows, const long long overflow_capacity, const long long queue_capacity,
          const unsigned long long epoch, unsigned long long* __restrict__ counters,
          unsigned long long* __restrict__ out, unsigned long long* __restrict__ queue) {
    constexpr long long ITEM = STATS_ITEM<I>;
    __shared__ sg::vec16<I> window_storage[vectors_holding<I>(STATS_WINDOW + 1)];
    __shared__ __align__(16) unsigned bins[STATS_BINS];
    // A piece's columns.
    __shared__ __align__(16) I stage[STATS_PIECE<I>];
    // The piece's long rows: (first segment, row in the tile), in segment order.
    __shared__ int2 long_rows[LONG_ROWS<I>];
    __shared__ unsigned long long long_counter;
    __shared__ int next_first_row;
    __shared__ BlockTotals totals;
    __shared__ long long ticket_shared, tile_shared, lo_shared, slot_shared;
    I* window = reinterpret_cast<I*>(window_storage);

    clear_bins(bins);
    totals.clear();
    const long long tiles = (n_rows + tile_rows - 1) / tile_rows;
    const bool aligned = reinterpret_cast<unsigned long long>(indices) % 16 == 0;
    const auto clamp_entry = [nnz](long long p) { return p < 0 ? 0 : p < nnz ? p : nnz; };
    if (threadIdx.x == 0) ticket_shared = (long long)atomicAdd(counters + COUNTER_TICKET, 1ULL);
    Structure<I> s;
    for (;;) {
        __syncthreads();  // the ticket is known; the previous item's readers are done with the window
        const long long ticket = ticket_shared;
        const bool own_tile = ticket < tiles;
        long long tile = ticket, lo = 0;
        if (!own_tile) {
            // Queue slot `ticket - tiles`: wait until it is published or can no longer be.
            const long long slot = ticket - tiles;
            if (threadIdx.x == 0) {
                tile = -1;
                if (slot < queue_capacity) {
                    const unsigned long long* entry = queue + QUEUE_WORDS * slot;
                    for (;;) {
                        if (load_volatile(entry + 2) == epoch) {
                            __threadfence();
                            tile = (long long)load_volatile(entry);
                            lo = (long long)load_volatile(entry + 1);
                            break;
                        }
                        if (load_volatile(counters + COUNTER_TILES_DONE) == (unsigned long long)tiles) {
                            __threadfence();
                            if (load_volatile(counters + COUNTER_ANNOUNCED) <= (unsigned long long)slot) break;
                            continue;  // announced by a finished tile: already published
                        }
                        __nanosleep(STATS_POLL_NS);
                    }
                }
                tile_shared = tile, lo_shared = lo;
            }
            __syncthreads();
            tile = tile_shared, lo = lo_shared;
            if (tile < 0) break;
        }
        const long long row0 = tile * tile_rows;
        const int rows = n_rows - row0 < tile_rows ? (int)(n_rows - row0) : tile_rows;
        load_pointers<I, STATS_WINDOW + 1>(indptr, row0, rows + 1, window_storage);
        copy_to_shared_wait();
        __syncthreads();
        const long long first = clamp_entry(window[0]), last = clamp_entry(window[rows]);
        long long hi;
        if (own_tile) {
            lo = first;
            hi = last - first > ITEM ? first + ITEM : last;
            // Entries past the first ITEM go to the queue as chunks of ITEM, published before
            // this tile counts itself done (uniform branch: every thread sees the same window).
            if (last - first > ITEM) {
                const long long chunks = (last - first - 1) / ITEM;
                if (threadIdx.x == 0)
                    slot_shared = (long long)atomicAdd(counters + COUNTER_ANNOUNCED, (unsigned long long)chunks);
                __syncthreads();
                for (long long c = threadIdx.x; c < chunks; c += STATS_BLOCK) {
                    const long long slot = slot_shared + c;
                    if (slot >= queue_capacity) break;
                    unsigned long long* entry = queue + QUEUE_WORDS * slot;
                    entry[0] = (unsigned long long)tile;
                    entry[1] = (unsigned long long)(first + (c + 1) * ITEM);
                    __threadfence();  // the chunk before its flag
                    *reinterpret_cast<volatile unsigned long long*>(entry + 2) = epoch;
                }
                __threadfence();  // every flag before the tile counts itself done
                __syncthreads();
            }
            if (threadIdx.x == 0) atomicAdd(counters + COUNTER_TILES_DONE, 1ULL);
        } else {
            hi = lo + ITEM < last ? lo + ITEM : last;
        }
        // The next ticket is taken now and stored after the row statistics, so its round trip
        // overlaps them.
        unsigned long long next_ticket = 0;
        if (threadIdx.x == 0) next_ticket = atomicAdd(counters + COUNTER_TICKET, 1ULL);
        // The item's pieces, the first one's loads issued before the row statistics, so its
        // bytes are in flight meanwhile. (hi < lo only for a corrupt indptr, whose statistics
        // mean nothing: no entries then.)
        const I item_lo = I(lo), item_hi = I(hi < lo ? lo : hi);
        if (threadIdx.x == 0) totals.entries += (unsigned long long)(item_hi - item_lo);
        I base = item_lo / STATS_PIECE<I> * STATS_PIECE<I>;
        I held[PIECE_VECTORS<I>][STATS_VECTOR<I>];
        const auto piece_end = [item_hi](const I from) {  // of the piece starting at from (fits I)
            return item_hi - from <= STATS_PIECE<I> ? item_hi : from + STATS_PIECE<I>;
        };
        if (item_hi > item_lo)
            load_piece(indices, base, int(item_lo - base), int(piece_end(base) - base), I(nnz), aligned, held);
        if (own_tile) tile_rows_stats(window, rows, overflow_capacity, bins, out, totals.widths, totals.longest);
        if (threadIdx.x == 0) ticket_shared = (long long)next_ticket;  // (read after the next item's barrier)
        // A tile's own item starts at its first row; a chunk at the row holding its first entry.
        int first_row = own_tile ? 0 : window_search(window, 0, rows, item_lo);
        for (I plo = item_lo; plo < item_hi;) {
            const I phi = piece_end(base);
            store_piece(stage, int(plo - base), int(phi - base), held);
            if (threadIdx.x == 0) long_counter = 0, next_first_row = first_row;
            __syncthreads();  // the piece, the list's counter
            if (phi < item_hi) load_piece(indices, phi, 0, int(piece_end(phi) - phi), I(nnz), aligned, held);
            piece_short_rows(window, rows, I(row0), base, plo, phi, first_row, stage, &next_first_row, &long_counter,
                             long_rows, s);
            __syncthreads();  // the long rows listed
            piece_long_rows(window, I(row0), base, plo, phi, long_counter, long_rows, stage, s);
            if (phi == item_hi) break;  // (the next item's first barrier frees the stage and the list)
            first_row = next_first_row;
            base = plo = phi;
            __syncthreads();  // every thread is done with the stage and the list
        }
        s.end_item(totals.structure[threadIdx.x / 32]);
    }
    merge_into_buffer(block_head_word(s, totals), bins, totals, out);
}

template <class I>
__global__ void __launch_bounds__(STATS_BLOCK)
stats_summary(unsigned long long* __restrict__ counters, unsigned long long* __restrict__ out,
              const long long n_rows, const long long nnz, const long long overflow_capacity,
              const unsigned long long epoch, long long* __restrict__ record, const long long limit,
              const long long hot_rows, const int value_bytes, const long long target50, const long long target90,
              const long long target99) {
    __shared__ SummaryShared shared;
    summarise<I>(shared, counters, out,
                 SummaryArguments{n_rows, nnz, overflow_capacity, epoch, record, limit, hot_rows, value_bytes,
                                  target50, target90, target99});
}
