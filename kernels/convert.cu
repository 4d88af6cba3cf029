// Layout conversion on the device (sparsegpu/convert.py; NumPy references in
// sparsegpu/reference/convert.py, same arguments, same layouts).
//
// COO inspection (inspect_coo): one read of rows and cols giving min/max row, min/max column and
// the number of adjacent pairs not strictly increasing in (row, col), in five 64-bit words that
// start at zero. Extremes are kept as order keys (a signed value with its sign bit flipped is
// ordered like an unsigned one) so a zeroed word is a valid start for atomicMax; a minimum is the
// maximum of the complemented key. Integer atomics: exact and reproducible. inspect_csr_chunk does
// the same for a chunk of a CSR's column indices as it arrives in a streamed upload.
//
// Pointers from sorted rows (compress_sorted): indptr[r] = the first entry whose row is >= r, a
// binary search per pointer (every word written once, no atomics, balanced whatever the gaps).
//
// Unsorted COO -> CSR, by most-significant-digit partitions of the rows (no global random scatter):
//   A segment is a range of positions holding exactly the entries of a range of 2^bits rows; the
//   top one holds everything. count_digits + partition_tiles split segments by the next DIGIT_BITS
//   row bits into DIGITS children, moving (row, col, pos) SoA from one buffer to the other in
//   coalesced runs (a tile of PARTITION_TILE entries ranked by digit in shared memory, each digit's
//   run claimed with one atomic on the child's cursor). Children stay split until they span at
//   most SEGMENT_ROWS rows and hold at most segment_capacity entries (or are one row, or empty).
//   (host: child starts from the counts, the next level's parents, the leaves)
//   sort_segments: a block per leaf sorts it by (row, col, pos) in shared memory and writes row_ptr,
//     indices and values = data[pos] at their final positions (duplicates still apart);
//   long rows (sort_long_chunks, merge_runs, scatter_long_rows): each copied into a work array
//     padded to a multiple of SHORT_ROW entries, every aligned chunk rank-sorted by a warp, then
//     runs merged pairwise (each entry finds its place by a binary search in the partner run)
//     until one run covers the row, and written out like the others;
//   (host, only with duplicates: run heads, a segmented sum of each run in input order, pointers.)
// Each entry carries its input position and every row ends up ordered by (col, pos), a unique key:
// the result is canonical and bitwise reproducible whatever order the atomics gave on the way.
#include "common.cuh"

inline constexpr int CONVERT_BLOCK = 256;
inline constexpr int SHORT_ROW = 32;  // long rows are sorted in chunks of one warp's width, then merged
inline constexpr int DIGIT_BITS = 8;  // row bits one partition pass splits by
inline constexpr int DIGITS = 1 << DIGIT_BITS;
inline constexpr int TILE_ITEMS = 16;  // entries per thread of a partition tile
// 4096 entries over 256 digits: ~16-entry runs per digit (64 bytes of int32) for random rows.
inline constexpr int PARTITION_TILE = CONVERT_BLOCK * TILE_ITEMS;
inline constexpr int SEGMENT_ROWS = DIGITS;  // most rows a leaf segment spans (one byte per local row)
inline constexpr int LOCAL_ROW = 256;  // rows up to this long are rank-sorted in shared memory (O(length) each)
// Most entries a leaf sorted in shared memory holds: (col, pos), a row byte and a 16-bit source
// slot each, within 48 KB of static shared memory.
template <class I> __host__ __device__ constexpr int segment_capacity() { return sizeof(I) == 4 ? 4096 : 2048; }
// Data loads sort_segments keeps in flight a thread: fewer for 16-byte values, and for int ones
// (ptxas spills there with more, at PARTITION_BLOCKS_PER_SM's register limit).
template <class V> __host__ __device__ constexpr int gather_batch() { return sizeof(V) > 8 ? 4 : 8; }
template <> __host__ __device__ constexpr int gather_batch<int>() { return 2; }
inline constexpr long long LONG_PIECE = 1 << 9, FIRST_PIECE = 1 << 10;  // leaf flags (sort_segments)
// Resident blocks per multiprocessor partition_tiles and sort_segments are compiled for: at most 85
// registers a thread, no spills, and their shared memory allows it. Both wait on memory; batched
// loads (a tile's 16 items, GATHER_BATCH gathers) keep enough bytes in flight at this occupancy.
inline constexpr int PARTITION_BLOCKS_PER_SM = 3;
static_assert(DIGITS == CONVERT_BLOCK && SEGMENT_ROWS == CONVERT_BLOCK, "one thread per digit and per leaf row");
inline constexpr int INSPECT_ITEMS = 4;  // entries per thread in flight in inspect_coo
inline constexpr unsigned long long SIGN_BIT = 0x8000000000000000ull;

// A COO entry while it is being sorted: its column and its position in the input.
template <class I> struct __align__(2 * sizeof(I)) Entry {
    I col, pos;
};
template <class I> __device__ __forceinline__ bool before(const Entry<I>& a, const Entry<I>& b) {
    return a.col < b.col || (a.col == b.col && a.pos < b.pos);
}
template <class I> __device__ __forceinline__ Entry<I> padding_entry() {
    const I top = sg::limits<I>::highest();
    return Entry<I>{top, top};
}

__device__ __forceinline__ unsigned long long order_key(long long v) { return (unsigned long long)v ^ SIGN_BIT; }

// Block maxima of Q per-thread words, merged into out[0..Q) by atomicMax (one atomic per word and
// block; words that stayed zero are skipped).
template <int Q>
__device__ __forceinline__ void merge_block_maxima(const unsigned long long (&mine)[Q], unsigned long long* out) {
    __shared__ unsigned long long extremes[Q][CONVERT_BLOCK / 32];
#pragma unroll
    for (int q = 0; q < Q; ++q) {
        unsigned long long v = mine[q];
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) v = max(v, sg::shfl_down(v, offset));
        if (threadIdx.x % 32 == 0) extremes[q][threadIdx.x / 32] = v;
    }
    __syncthreads();
    if (threadIdx.x < Q) {
        unsigned long long v = 0;
        for (int w = 0; w < CONVERT_BLOCK / 32; ++w) v = max(v, extremes[threadIdx.x][w]);
        if (v) atomicMax(out + threadIdx.x, v);
    }
}

// Block sum of a per-thread count, added to *total by thread 0 (one atomic per block).
__device__ __forceinline__ void add_block_count(unsigned long long count, unsigned long long* total) {
    __shared__ unsigned long long scratch[CONVERT_BLOCK / 32];
    count = sg::subwarp_sum<32>(count);
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = count;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long sum = 0;
        for (int w = 0; w < CONVERT_BLOCK / 32; ++w) sum += scratch[w];
        if (sum) atomicAdd(total, sum);
    }
}

// ---------------------------------------------------------------- COO inspection
// out[0] = max ~key(row), out[1] = max key(row), out[2] = max ~key(col), out[3] = max key(col),
// out[4] = number of j >= 1 with (rows[j], cols[j]) <= (rows[j-1], cols[j-1]). out zeroed first.
// Grid-stride over warps of consecutive entries: the previous entry comes from the lane before
// (a shuffle), lane 0 reads it.
template <class I>
__global__ void __launch_bounds__(CONVERT_BLOCK)
inspect_coo(const I* __restrict__ rows, const I* __restrict__ cols, const long long n,
            unsigned long long* __restrict__ out) {
    const int lane = threadIdx.x % 32;
    const long long warp = ((long long)blockIdx.x * CONVERT_BLOCK + threadIdx.x) / 32;
    const long long warps = (long long)gridDim.x * (CONVERT_BLOCK / 32);
    unsigned long long row_low = 0, row_high = 0, col_low = 0, col_high = 0, unsorted = 0;
    for (long long base = warp * 32; base < n; base += warps * 32 * INSPECT_ITEMS) {
        I r[INSPECT_ITEMS], c[INSPECT_ITEMS];
#pragma unroll
        for (int k = 0; k < INSPECT_ITEMS; ++k) {
            const long long j = base + k * warps * 32 + lane;
            r[k] = j < n ? rows[j] : I(0);
            c[k] = j < n ? cols[j] : I(0);
        }
#pragma unroll
        for (int k = 0; k < INSPECT_ITEMS; ++k) {
            const long long j = base + k * warps * 32 + lane;
            I previous_row = sg::shfl_up(r[k], 1), previous_col = sg::shfl_up(c[k], 1);
            if (lane == 0 && j > 0 && j < n) {
                previous_row = rows[j - 1];
                previous_col = cols[j - 1];
            }
            if (j < n) {
                const unsigned long long rk = order_key(r[k]), ck = order_key(c[k]);
                row_low = max(row_low, ~rk);
                row_high = max(row_high, rk);
                col_low = max(col_low, ~ck);
                col_high = max(col_high, ck);
                if (j > 0) unsorted += r[k] < previous_row || (r[k] == previous_row && c[k] <= previous_col);
            }
        }
    }
    const unsigned long long mine[4] = {row_low, row_high, col_low, col_high};
    merge_block_maxima<4>(mine, out);
    add_block_count(unsorted, out + 4);
}

// CSR chunk inspection (inspect_csr_chunk): one read of a chunk of column indices, at global
// position `offset`, as it arrives in a streamed upload. Into four words shared by every chunk
// (zeroed once): max ~key(col), max key(col), the adjacent pairs in the chunk that do not
// strictly increase, and those of them that start a row (allowed). `row_starts` holds, sorted,
// the global positions of the rows that start strictly inside the chunk (empty rows repeat a
// position: each position counts once). One grid-stride pass takes the entries, then the row
// starts: no search per pair. Pairs across chunks are the caller's.
template <class I>
__global__ void __launch_bounds__(CONVERT_BLOCK)
inspect_csr_chunk(const I* __restrict__ cols, const long long n, const I* __restrict__ row_starts,
                  const long long n_starts, const long long offset, unsigned long long* __restrict__ out) {
    const int lane = threadIdx.x % 32;
    const long long warp = ((long long)blockIdx.x * CONVERT_BLOCK + threadIdx.x) / 32;
    const long long warps = (long long)gridDim.x * (CONVERT_BLOCK / 32);
    unsigned long long col_low = 0, col_high = 0, down = 0, down_at_starts = 0;
    for (long long base = warp * 32; base < n; base += warps * 32 * INSPECT_ITEMS) {
        I c[INSPECT_ITEMS];
#pragma unroll
        for (int k = 0; k < INSPECT_ITEMS; ++k) {
            const long long j = base + k * warps * 32 + lane;
            c[k] = j < n ? cols[j] : I(0);
        }
#pragma unroll
        for (int k = 0; k < INSPECT_ITEMS; ++k) {
            const long long j = base + k * warps * 32 + lane;
            I previous = sg::shfl_up(c[k], 1);
            if (lane == 0 && j > 0 && j < n) previous = cols[j - 1];
            if (j < n) {
                const unsigned long long ck = order_key(c[k]);
                col_low = max(col_low, ~ck);
                col_high = max(col_high, ck);
                if (j > 0) down += c[k] <= previous;
            }
        }
    }
    for (long long k = (long long)blockIdx.x * CONVERT_BLOCK + threadIdx.x; k < n_starts;
         k += (long long)gridDim.x * CONVERT_BLOCK) {
        const long long j = (long long)row_starts[k] - offset;
        // Inside the chunk and not a repeat (an empty row); out-of-range starts come only from
        // pointers that are not monotone, which the caller refuses.
        if (j > 0 && j < n && (k == 0 || row_starts[k - 1] != row_starts[k])) down_at_starts += cols[j] <= cols[j - 1];
    }
    const unsigned long long mine[2] = {col_low, col_high};
    merge_block_maxima<2>(mine, out);
    add_block_count(down, out + 2);
    __syncthreads();  // add_block_count's scratch is read by thread 0 before it is written again
    add_block_count(down_at_starts, out + 3);
}

// ---------------------------------------------------------------- pointers <-> rows
template <class I>
__global__ void __launch_bounds__(CONVERT_BLOCK)
compress_sorted(const I* __restrict__ rows, const long long nnz, const long long n_major, I* __restrict__ indptr) {
    const long long r = (long long)blockIdx.x * CONVERT_BLOCK + threadIdx.x;
    if (r > n_major) return;
    long long low = 0, high = nnz;  // the answer lies in [low, high]
    while (low < high) {
        const long long mid = (low + high) / 2;
        if ((long long)rows[mid] < r) low = mid + 1;
        else high = mid;
    }
    indptr[r] = (I)low;
}

// ---------------------------------------------------------------- unsorted COO -> CSR
// Segments: a range [start, start + count) of entry positions holding exactly the entries whose rows
// lie in [first_row, first_row + 2^bits). Parents are int64 triples (start, count, first_row) of one
// level, all spanning at most 2^(shift + DIGIT_BITS) rows; tiles of PARTITION_TILE entries
// never straddle two parents, tile_first[p] = the first tile of parent p (a scan of their tiles).
__device__ __forceinline__ int digit_of(long long row, long long first_row, int shift) {
    return (int)((row - first_row) >> shift);
}

// The parent of `tile`: the last p with tile_first[p] <= tile.
__device__ __forceinline__ long long parent_of_tile(const long long* __restrict__ tile_first, long long n_parents,
                                                    long long tile) {
    long long low = 0, high = n_parents - 1;
    while (low < high) {
        const long long mid = (low + high + 1) / 2;
        if (tile_first[mid] <= tile) low = mid;
        else high = mid - 1;
    }
    return low;
}

struct TileSpan {
    long long parent, begin, size, first_row;
};
__device__ __forceinline__ TileSpan tile_span(const long long* __restrict__ parents,
                                              const long long* __restrict__ tile_first, long long n_parents,
                                              long long tile) {
    const long long p = parent_of_tile(tile_first, n_parents, tile);
    const long long start = parents[3 * p], count = parents[3 * p + 1];
    const long long begin = start + (tile - tile_first[p]) * PARTITION_TILE;
    return TileSpan{p, begin, min((long long)PARTITION_TILE, start + count - begin), parents[3 * p + 2]};
}

// Exclusive prefix sum of one value per thread over the block (every thread calls it).
__device__ __forceinline__ unsigned int block_exclusive_sum(unsigned int v, unsigned int* warp_totals) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    unsigned int inclusive = v;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
        const unsigned int up = sg::shfl_up(inclusive, offset);
        if (lane >= offset) inclusive += up;
    }
    if (lane == 31) warp_totals[warp] = inclusive;
    __syncthreads();
    unsigned int before = 0;
    for (int w = 0; w < warp; ++w) before += warp_totals[w];
    __syncthreads();  // warp_totals may be reused on return
    return before + inclusive - v;
}

// The tile's rows, thread-strided (item k of thread t: entry t + k * CONVERT_BLOCK; 0 past the
// tile), their loads issued together.
template <class I>
__device__ __forceinline__ void load_tile_rows(const I* __restrict__ rows, const TileSpan& t, I (&row)[TILE_ITEMS]) {
#pragma unroll
    for (int k = 0; k < TILE_ITEMS; ++k) {
        const int i = threadIdx.x + k * CONVERT_BLOCK;
        row[k] = i < t.size ? rows[t.begin + i] : I(0);
    }
}

// counts[p * DIGITS + d] += entries of parent p in child d (rows [first_row + d 2^shift, ... + 2^shift)).
// A shared histogram per tile, then one integer atomic per (tile, digit): exact.
template <class I>
__global__ void __launch_bounds__(CONVERT_BLOCK)
count_digits(const I* __restrict__ rows, const long long* __restrict__ parents,
             const long long* __restrict__ tile_first,
             const long long n_parents, const long long n_tiles, const int shift,
             unsigned long long* __restrict__ counts) {
    __shared__ unsigned int histogram[DIGITS];
    for (long long tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const TileSpan t = tile_span(parents, tile_first, n_parents, tile);
        histogram[threadIdx.x] = 0;
        __syncthreads();
        I row[TILE_ITEMS];
        load_tile_rows(rows, t, row);  // every load in flight before the atomics
#pragma unroll
        for (int k = 0; k < TILE_ITEMS; ++k)
            if (threadIdx.x + k * CONVERT_BLOCK < t.size)
                atomicAdd(&histogram[digit_of(row[k], t.first_row, shift)], 1u);
        __syncthreads();
        const unsigned int c = histogram[threadIdx.x];
        if (c) atomicAdd(counts + t.parent * DIGITS + threadIdx.x, (unsigned long long)c);
        __syncthreads();
    }
}

// Item k's slot in the staged tile (two 16-bit slots a word).
__device__ __forceinline__ unsigned int tile_slot(const unsigned int* slots, int k) {
    return (slots[k / 2] >> (16 * (k % 2))) & 0xffffu;
}

// Writes the staged tile out: staged slot s holds an entry of digit d = staged_digit[s] and goes to
// digit_base[d] + s (a digit's slots are consecutive, so are its destinations: coalesced runs).
template <class I>
__device__ __forceinline__ void write_staged(const I* staged, const unsigned char* staged_digit,
                                             const long long* digit_base, long long size, I* __restrict__ dst) {
#pragma unroll
    for (int k = 0; k < TILE_ITEMS; ++k) {
        const int s = threadIdx.x + k * CONVERT_BLOCK;
        if (s < size) dst[digit_base[staged_digit[s]] + s] = staged[s];
    }
}

// One partition pass: every entry (row, col, pos) of every parent moves into its child's range,
// claimed per (tile, digit) with one atomic on the child's cursor (cursors start at the children's
// starts). The tile is ranked by digit in shared memory (shared atomics) and written out digit run by
// digit run, one array at a time through the same staging buffer (rows, then cols, then positions).
// The order of entries inside a child depends on timing; nothing downstream depends on it: entries
// are finally ordered by (row, col, pos), and pos is unique. implicit_pos: src_pos is not read and
// entry j's position is j (the first pass, from the caller's arrays).
template <class I>
__global__ void __launch_bounds__(CONVERT_BLOCK, PARTITION_BLOCKS_PER_SM)
partition_tiles(const I* __restrict__ src_rows, const I* __restrict__ src_cols, const I* __restrict__ src_pos,
                const int implicit_pos, const long long* __restrict__ parents, const long long* __restrict__ tile_first,
                const long long n_parents, const long long n_tiles, const int shift,
                unsigned long long* __restrict__ cursors, I* __restrict__ dst_rows, I* __restrict__ dst_cols,
                I* __restrict__ dst_pos) {
    __shared__ I staged[PARTITION_TILE];
    __shared__ unsigned char staged_digit[PARTITION_TILE];
    __shared__ unsigned int digit_count[DIGITS], warp_totals[CONVERT_BLOCK / 32];
    __shared__ unsigned int digit_first[DIGITS];
    __shared__ long long digit_base[DIGITS];
    for (long long tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const TileSpan t = tile_span(parents, tile_first, n_parents, tile);
        digit_count[threadIdx.x] = 0;
        __syncthreads();
        I row[TILE_ITEMS];
        unsigned int slots[TILE_ITEMS / 2];  // two 16-bit slots (below PARTITION_TILE) a word: fewer registers
        load_tile_rows(src_rows, t, row);
#pragma unroll
        for (int k = 0; k < TILE_ITEMS / 2; ++k) slots[k] = 0;
#pragma unroll
        for (int k = 0; k < TILE_ITEMS; ++k)
            if (threadIdx.x + k * CONVERT_BLOCK < t.size)
                slots[k / 2] |= atomicAdd(&digit_count[digit_of(row[k], t.first_row, shift)], 1u) << (16 * (k % 2));
        __syncthreads();
        const unsigned int c = digit_count[threadIdx.x];
        const unsigned int first = block_exclusive_sum(c, warp_totals);
        digit_first[threadIdx.x] = first;
        digit_base[threadIdx.x] =
            c ? (long long)atomicAdd(cursors + t.parent * DIGITS + threadIdx.x, (unsigned long long)c) - first : 0;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE_ITEMS; ++k) {
            if (threadIdx.x + k * CONVERT_BLOCK < t.size) {
                // 64-bit rows are read again (from L2) rather than held over the scan: no spills.
                const I r = sizeof(I) == 4 ? row[k] : src_rows[t.begin + threadIdx.x + k * CONVERT_BLOCK];
                const int digit = digit_of(r, t.first_row, shift);  // recomputed: fewer registers
                const unsigned int slot = tile_slot(slots, k) + digit_first[digit];
                slots[k / 2] += digit_first[digit] << (16 * (k % 2));  // no carry: slots stay below 2^16
                staged_digit[slot] = (unsigned char)digit;
                staged[slot] = r;
            }
        }
        __syncthreads();
        write_staged(staged, staged_digit, digit_base, t.size, dst_rows);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE_ITEMS; ++k) {
            const int i = threadIdx.x + k * CONVERT_BLOCK;
            if (i < t.size) staged[tile_slot(slots, k)] = src_cols[t.begin + i];
        }
        __syncthreads();
        write_staged(staged, staged_digit, digit_base, t.size, dst_cols);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE_ITEMS; ++k) {
            const int i = threadIdx.x + k * CONVERT_BLOCK;
            if (i < t.size) staged[tile_slot(slots, k)] = implicit_pos ? (I)(t.begin + i) : src_pos[t.begin + i];
        }
        __syncthreads();
        write_staged(staged, staged_digit, digit_base, t.size, dst_pos);
        __syncthreads();
    }
}

// Rank of `mine` among the warp's SHORT_ROW entries in `shared` (the first `count` of them):
// entries before it, plus equal ones in lower lanes (only padding repeats), so ranks are a
// permutation.
template <class I>
__device__ __forceinline__ int rank_in_warp(const Entry<I>* shared, int count, const Entry<I>& mine, int lane) {
    int rank = 0;
    for (int k = 0; k < count; ++k) {
        const Entry<I> other = shared[k];  // the same address for every lane: a broadcast
        rank += before(other, mine) || (k < lane && !before(mine, other));
    }
    return rank;
}

// Leaf segments (int64 quadruples: start, count, first_row, bits | buffer << 8 | flags), one block
// each (grid-stride); the segment's entries are rows/cols/positions at buffer * 3 nnz + {0, nnz,
// 2 nnz} + [start, start + count) of `buffers`, at most segment_capacity of them. Every row of a
// leaf gets row_ptr (its first position), so the leaves together write row_ptr[0:n_rows]:
// - LONG_PIECE: a piece of one row longer than segment_capacity (the host cuts such a row into
//   pieces, so that many blocks copy it): copied to long_entries[start:start + count] as
//   (col, pos) pairs for the long-row path; the FIRST_PIECE gives row_ptr, and counts the row in
//   tallies[0];
// - empty: its rows (any span) start at `start`;
// - otherwise (at most SEGMENT_ROWS rows): loaded into shared memory, counting-sorted by row (shared
//   atomics; the rows' offsets give row_ptr), then each row of at most LOCAL_ROW entries is
//   rank-sorted by (col, pos) from the shared copy (O(length) compares an entry, broadcasts mostly):
//   the entry's output slot is its row's offset + its rank (those repeating an earlier column are
//   counted in tallies[1]). Then the block walks the output slots in order: indices = col and
//   values = data[pos] (duplicates still apart, in input order), stores coalesced and
//   GATHER_BATCH random data loads in flight a thread; entries of longer rows go to long_entries
//   like the above.
// Outputs are written at final positions; nothing depends on the order entries arrive in.
template <class V, class I>
__global__ void __launch_bounds__(CONVERT_BLOCK, PARTITION_BLOCKS_PER_SM)
sort_segments(const long long* __restrict__ segments, const long long n_segments, const I* __restrict__ buffers,
              const long long nnz, const long long n_rows, const V* __restrict__ data, I* __restrict__ row_ptr,
              I* __restrict__ indices, V* __restrict__ values, Entry<I>* __restrict__ long_entries,
              unsigned long long* __restrict__ tallies) {
    constexpr int CAPACITY = segment_capacity<I>(), ITEMS = CAPACITY / CONVERT_BLOCK, GATHER_BATCH = gather_batch<V>();
    __shared__ I shared_col[CAPACITY], shared_pos[CAPACITY];
    __shared__ unsigned char shared_row[CAPACITY];
    __shared__ unsigned short source_of[CAPACITY];  // the shared entry each output slot takes
    __shared__ unsigned int row_count[SEGMENT_ROWS], row_first[SEGMENT_ROWS], warp_totals[CONVERT_BLOCK / 32];
    unsigned long long long_rows = 0, repeats = 0;
    for (long long g = blockIdx.x; g < n_segments; g += gridDim.x) {
        const long long start = segments[4 * g], count = segments[4 * g + 1], first_row = segments[4 * g + 2];
        const long long info = segments[4 * g + 3];
        const I* rows = buffers + ((info >> 8) & 1) * 3 * nnz;
        const I* cols = rows + nnz;
        const I* pos = rows + 2 * nnz;
        if (info & LONG_PIECE) {
            if ((info & FIRST_PIECE) && threadIdx.x == 0) {
                row_ptr[first_row] = (I)start;
                long_rows += 1;
            }
            for (long long j = threadIdx.x; j < count; j += CONVERT_BLOCK)
                long_entries[start + j] = Entry<I>{cols[start + j], pos[start + j]};
            continue;
        }
        const long long row_end = min(first_row + (1LL << (info & 255)), n_rows);
        if (count == 0) {
            for (long long r = first_row + threadIdx.x; r < row_end; r += CONVERT_BLOCK) row_ptr[r] = (I)start;
            continue;
        }
        row_count[threadIdx.x] = 0;
        __syncthreads();
        // Per item: its local row (8 bits) and its arrival rank in the row (below 2^16), packed.
        unsigned int row_and_arrival[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int i = threadIdx.x + k * CONVERT_BLOCK;
            row_and_arrival[k] = i < count ? (unsigned int)((long long)rows[start + i] - first_row) : 0u;
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k)
            if (threadIdx.x + k * CONVERT_BLOCK < count)
                row_and_arrival[k] |= atomicAdd(&row_count[row_and_arrival[k]], 1u) << 16;
        __syncthreads();
        const unsigned int first = block_exclusive_sum(row_count[threadIdx.x], warp_totals);
        row_first[threadIdx.x] = first;
        if (first_row + threadIdx.x < row_end) row_ptr[first_row + threadIdx.x] = (I)(start + first);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int i = threadIdx.x + k * CONVERT_BLOCK;
            if (i < count) {
                const unsigned int r = row_and_arrival[k] & 0xffffu;
                const int s = row_first[r] + (row_and_arrival[k] >> 16);
                shared_col[s] = cols[start + i];
                shared_pos[s] = pos[start + i];
                shared_row[s] = (unsigned char)r;
            }
        }
        __syncthreads();
        // Ranks: entry s of a short row goes to output slot begin + rank (entries of long rows keep
        // their slots); source_of[slot] = s.
        for (int s = threadIdx.x; s < count; s += CONVERT_BLOCK) {
            const int r = shared_row[s];
            const int begin = row_first[r], length = row_count[r];
            int slot = s;
            if (length > LOCAL_ROW) {
                long_rows += s == begin;
            } else {
                const Entry<I> mine{shared_col[s], shared_pos[s]};
                int rank = 0;
                bool first_of_column = true;
                for (int k = begin; k < begin + length; ++k) {
                    const Entry<I> other{shared_col[k], shared_pos[k]};
                    rank += before(other, mine);
                    if (other.col == mine.col && other.pos < mine.pos) first_of_column = false;
                }
                slot = begin + rank;
                repeats += !first_of_column;
            }
            source_of[slot] = (unsigned short)s;
        }
        __syncthreads();
        // Output slots in order (coalesced stores), GATHER_BATCH random data loads in flight a thread;
        // only the shared slots and the loaded values are held in registers.
        for (int base = threadIdx.x; base < count; base += CONVERT_BLOCK * GATHER_BATCH) {
            int source[GATHER_BATCH];
            V value[GATHER_BATCH];
#pragma unroll
            for (int k = 0; k < GATHER_BATCH; ++k) {
                const int slot = base + k * CONVERT_BLOCK;
                source[k] = slot < count ? source_of[slot] : -1;
            }
#pragma unroll
            for (int k = 0; k < GATHER_BATCH; ++k)
                if (source[k] >= 0 && row_count[shared_row[source[k]]] <= LOCAL_ROW)
                    value[k] = sg::ldg(data + shared_pos[source[k]]);
#pragma unroll
            for (int k = 0; k < GATHER_BATCH; ++k) {
                const int s = source[k];
                if (s < 0) continue;
                const long long out = start + base + k * CONVERT_BLOCK;
                if (row_count[shared_row[s]] > LOCAL_ROW) {
                    long_entries[out] = Entry<I>{shared_col[s], shared_pos[s]};
                } else {
                    indices[out] = shared_col[s];
                    values[out] = value[k];
                }
            }
        }
        __syncthreads();  // the shared copy is read by every thread before the next segment overwrites it
    }
    add_block_count(long_rows, tallies);
    __syncthreads();
    add_block_count(repeats, tallies + 1);
}

// Long rows (longer than LOCAL_ROW, or than a leaf holds), from long_entries at their row_ptr:
// long row k (row long_rows[k]) occupies work[SHORT_ROW * chunk_first[k] : SHORT_ROW *
// chunk_first[k + 1]], its entries followed by padding (the largest pair). chunk_owner[q] = the long
// row of chunk q. sort_long_chunks (a warp per chunk) rank-sorts every aligned chunk; merge_runs
// merges runs pairwise until one run covers the row; scatter_long_rows writes the sorted rows'
// indices and values at their final positions.
template <class I>
__global__ void __launch_bounds__(CONVERT_BLOCK)
sort_long_chunks(const I* __restrict__ row_ptr, const I* __restrict__ long_rows, const I* __restrict__ chunk_first,
                 const I* __restrict__ chunk_owner, const long long n_chunks, const Entry<I>* __restrict__ entries,
                 Entry<I>* __restrict__ work) {
    __shared__ Entry<I> chunks_in_flight[CONVERT_BLOCK];
    const int lane = threadIdx.x % 32;
    const long long chunk = ((long long)blockIdx.x * CONVERT_BLOCK + threadIdx.x) / 32;
    if (chunk >= n_chunks) return;  // warp-uniform exit
    Entry<I>* shared = chunks_in_flight + (threadIdx.x - lane);
    const long long k = chunk_owner[chunk];
    const long long row = long_rows[k];
    const long long start = row_ptr[row], length = (long long)row_ptr[row + 1] - start;
    const long long i = (chunk - (long long)chunk_first[k]) * SHORT_ROW + lane;
    const Entry<I> mine = i < length ? entries[start + i] : padding_entry<I>();
    shared[lane] = mine;
    __syncwarp();
    const int rank = rank_in_warp(shared, SHORT_ROW, mine, lane);
    work[chunk * SHORT_ROW + rank] = mine;
}

// One merge pass: in each long row, runs [2a w, (2a+1) w) and [(2a+1) w, (2a+2) w) (sorted) become
// one sorted run. An entry's place = its index in its run + the partner run's entries before it
// (left runs win ties, so padding stays in order). A thread per padded entry.
template <class I>
__global__ void __launch_bounds__(CONVERT_BLOCK)
merge_runs(const I* __restrict__ chunk_first, const I* __restrict__ chunk_owner, const long long n_padded,
           const long long width, const Entry<I>* __restrict__ src, Entry<I>* __restrict__ dst) {
    const long long e = (long long)blockIdx.x * CONVERT_BLOCK + threadIdx.x;
    if (e >= n_padded) return;
    const long long k = chunk_owner[e / SHORT_ROW];
    const long long base = (long long)chunk_first[k] * SHORT_ROW;
    const long long length = (long long)chunk_first[k + 1] * SHORT_ROW - base;
    const long long i = e - base, run = i / width, run_start = run * width;
    const Entry<I> mine = src[e];
    const bool left = run % 2 == 0;
    const long long partner = left ? run_start + width : run_start - width;
    if (partner >= length) {  // no partner: the run is already whole
        dst[e] = mine;
        return;
    }
    const long long partner_end = min(partner + width, length);
    const Entry<I>* p = src + base;
    long long low = partner, high = partner_end;  // first partner entry that goes after mine
    while (low < high) {
        const long long mid = (low + high) / 2;
        const bool goes_before = left ? before(p[mid], mine) : !before(mine, p[mid]);
        if (goes_before) low = mid + 1;
        else high = mid;
    }
    const long long merged_start = left ? run_start : partner;
    dst[base + merged_start + (i - run_start) + (low - partner)] = mine;
}

// indices and values of the sorted long rows (padding dropped); tallies[1] += entries repeating the
// column of their predecessor in the row.
template <class V, class I>
__global__ void __launch_bounds__(CONVERT_BLOCK)
scatter_long_rows(const I* __restrict__ row_ptr, const I* __restrict__ long_rows, const I* __restrict__ chunk_first,
                  const I* __restrict__ chunk_owner, const long long n_padded, const Entry<I>* __restrict__ work,
                  const V* __restrict__ data, I* __restrict__ indices, V* __restrict__ values,
                  unsigned long long* __restrict__ tallies) {
    const long long e = (long long)blockIdx.x * CONVERT_BLOCK + threadIdx.x;
    unsigned long long repeats = 0;
    if (e < n_padded) {
        const long long k = chunk_owner[e / SHORT_ROW];
        const long long row = long_rows[k];
        const long long start = row_ptr[row], length = (long long)row_ptr[row + 1] - start;
        const long long i = e - (long long)chunk_first[k] * SHORT_ROW;
        if (i < length) {
            const Entry<I> mine = work[e];
            indices[start + i] = mine.col;
            values[start + i] = sg::ldg(data + mine.pos);
            repeats = i > 0 && work[e - 1].col == mine.col;
        }
    }
    add_block_count(repeats, tallies + 1);
}
