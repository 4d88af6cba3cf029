// Layout conversion on the device (sparsegpu/convert.py; NumPy twins in
// sparsegpu/reference/convert.py, same arguments, same layouts).
//
// COO inspection (inspect_coo): one read of rows and cols giving min/max row, min/max column and
// the number of adjacent pairs not strictly increasing in (row, col), in five 64-bit words that
// start at zero. Extremes are kept as order keys (a signed value with its sign bit flipped is
// ordered like an unsigned one) so a zeroed word is a valid start for atomicMax; a minimum is the
// maximum of the complemented key. Integer atomics: exact and reproducible.
//
// Pointers from sorted rows (compress_sorted): indptr[r] = the first entry whose row is >= r, a
// binary search per pointer (every word written once, no atomics, balanced whatever the gaps).
//
// Rows from pointers (mark_row_starts): each non-empty row writes its number at its first entry
// of an array preset to -1 (a driver memset); an inclusive max-scan then carries it over the row.
//
// Unsorted COO -> CSR, by row buckets:
//   rank_in_row: counts[row] += 1 per entry with an atomic whose old value is the entry's slot in
//     its row (the order among a row's entries depends on timing: the next steps remove it);
//   (host: bucket_ptr = 0 then an inclusive scan of the counts)
//   scatter_by_row: entry j goes to bucket_ptr[row] + slot as the pair (col, j);
//   sort_short_rows: a warp per row of <= SHORT_ROW entries sorts the row's pairs by (col, j)
//     (a rank sort from a shared copy; pairs are distinct, so the result does not depend on the
//     slots) and flags the first entry of each run of equal columns; longer rows are counted;
//   long rows (sort_long_chunks, merge_runs, scatter_long_rows): each copied into a work array
//     padded to a multiple of SHORT_ROW entries, every aligned chunk rank-sorted by a warp, then
//     runs merged pairwise (each entry finds its place by a binary search in the partner run)
//     until one run covers the row, and copied back with their run flags;
//   emit_csr: entry j of the sorted pairs gives indices and data[j's original position]; with
//     duplicates, the scan of the run flags gives each run's slot (final_pointers: indptr), the
//     runs' starts, and the data in sorted order for the segmented sum (input order within a run:
//     pairs sort by original position among equal columns).
// Sorting by (col, original position) within rows is a stable sort by (row, col): the result is
// canonical and bitwise reproducible.
#include "common.cuh"

constexpr int CONVERT_BLOCK = 256;
constexpr int SHORT_ROW = 32;  // rows of up to one warp's width are sorted by one warp
constexpr int INSPECT_ITEMS = 4;  // entries per thread in flight in inspect_coo
constexpr unsigned long long SIGN_BIT = 0x8000000000000000ull;

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

__device__ __forceinline__ int fetch_increment(int* counter) { return atomicAdd(counter, 1); }
__device__ __forceinline__ long long fetch_increment(long long* counter) {
    return (long long)atomicAdd(reinterpret_cast<unsigned long long*>(counter), 1ull);
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
    __shared__ unsigned long long extremes[4][CONVERT_BLOCK / 32];
    unsigned long long mine[4] = {row_low, row_high, col_low, col_high};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        unsigned long long v = mine[q];
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) v = max(v, sg::shfl_down(v, offset));
        if (lane == 0) extremes[q][threadIdx.x / 32] = v;
    }
    __syncthreads();
    if (threadIdx.x < 4) {
        unsigned long long v = 0;
        for (int w = 0; w < CONVERT_BLOCK / 32; ++w) v = max(v, extremes[threadIdx.x][w]);
        if (v) atomicMax(out + threadIdx.x, v);
    }
    add_block_count(unsorted, out + 4);
}

// ---------------------------------------------------------------- pointers <-> rows
template <class I>
__global__ void __launch_bounds__(CONVERT_BLOCK)
mark_row_starts(const I* __restrict__ indptr, const long long n_major, const long long nnz, I* __restrict__ marks) {
    const long long r = (long long)blockIdx.x * CONVERT_BLOCK + threadIdx.x;
    if (r >= n_major) return;
    const I start = indptr[r], end = indptr[r + 1];
    // Checked, so pointers that are not monotone never write out of bounds.
    if (end > start && start >= 0 && start < nnz) marks[start] = (I)r;
}

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
template <class I>
__global__ void __launch_bounds__(CONVERT_BLOCK)
rank_in_row(const I* __restrict__ rows, const long long nnz, I* __restrict__ counts, I* __restrict__ slot) {
    const long long j = (long long)blockIdx.x * CONVERT_BLOCK + threadIdx.x;
    if (j < nnz) slot[j] = fetch_increment(counts + rows[j]);
}

template <class I>
__global__ void __launch_bounds__(CONVERT_BLOCK)
scatter_by_row(const I* __restrict__ rows, const I* __restrict__ cols, const I* __restrict__ slot,
               const I* __restrict__ bucket_ptr, const long long nnz, Entry<I>* __restrict__ entries) {
    const long long j = (long long)blockIdx.x * CONVERT_BLOCK + threadIdx.x;
    if (j < nnz) entries[bucket_ptr[rows[j]] + slot[j]] = Entry<I>{cols[j], (I)j};
}

// Rank of `mine` among the warp's SHORT_ROW entries in `shared` (the first `count` of them):
// entries before it, plus equal ones in lower lanes (only padding repeats), so ranks are a
// permutation. `first` says no entry of the same column comes before it.
template <class I>
__device__ __forceinline__ int rank_in_warp(const Entry<I>* shared, int count, const Entry<I>& mine, int lane,
                                            bool& first) {
    int rank = 0;
    first = true;
    for (int k = 0; k < count; ++k) {
        const Entry<I> other = shared[k];  // the same address for every lane: a broadcast
        rank += before(other, mine) || (k < lane && !before(mine, other));
        if (other.col == mine.col && other.pos < mine.pos) first = false;
    }
    return rank;
}

// A warp per row (grid-stride). tallies[0] += rows longer than SHORT_ROW (left for the long path),
// tallies[1] += entries that repeat the column of an earlier one in their row.
template <class I>
__global__ void __launch_bounds__(CONVERT_BLOCK)
sort_short_rows(const I* __restrict__ bucket_ptr, const long long n_rows, Entry<I>* __restrict__ entries,
                I* __restrict__ heads, unsigned long long* __restrict__ tallies) {
    __shared__ Entry<I> rows_in_flight[CONVERT_BLOCK];
    const int lane = threadIdx.x % 32;
    Entry<I>* shared = rows_in_flight + (threadIdx.x - lane);
    const long long warps = (long long)gridDim.x * (CONVERT_BLOCK / 32);
    unsigned long long long_rows = 0, repeats = 0;
    for (long long row = ((long long)blockIdx.x * CONVERT_BLOCK + threadIdx.x) / 32; row < n_rows; row += warps) {
        const long long start = bucket_ptr[row];
        const int length = (int)min((long long)bucket_ptr[row + 1] - start, (long long)SHORT_ROW + 1);
        if (length > SHORT_ROW) {
            long_rows += lane == 0;
            continue;
        }
        if (length <= 1) {
            if (length == 1 && lane == 0) heads[start] = 1;
            continue;
        }
        Entry<I> mine = padding_entry<I>();
        if (lane < length) mine = entries[start + lane];
        shared[lane] = mine;
        __syncwarp();
        bool first;
        const int rank = rank_in_warp(shared, length, mine, lane, first);
        if (lane < length) {
            entries[start + rank] = mine;
            heads[start + rank] = first ? 1 : 0;
            repeats += !first;
        }
        __syncwarp();  // the shared copy is read by every lane before the next row overwrites it
    }
    add_block_count(long_rows, tallies);
    __syncthreads();
    add_block_count(repeats, tallies + 1);
}

// Long row k (bucket row long_rows[k]) occupies work[SHORT_ROW * chunk_first[k] :
// SHORT_ROW * chunk_first[k + 1]], its entries followed by padding (the largest pair).
// chunk_owner[q] = the long row of chunk q. A warp per chunk.
template <class I>
__global__ void __launch_bounds__(CONVERT_BLOCK)
sort_long_chunks(const I* __restrict__ bucket_ptr, const I* __restrict__ long_rows, const I* __restrict__ chunk_first,
                 const I* __restrict__ chunk_owner, const long long n_chunks, const Entry<I>* __restrict__ entries,
                 Entry<I>* __restrict__ work) {
    __shared__ Entry<I> chunks_in_flight[CONVERT_BLOCK];
    const int lane = threadIdx.x % 32;
    const long long chunk = ((long long)blockIdx.x * CONVERT_BLOCK + threadIdx.x) / 32;
    if (chunk >= n_chunks) return;  // warp-uniform exit
    Entry<I>* shared = chunks_in_flight + (threadIdx.x - lane);
    const long long k = chunk_owner[chunk];
    const long long row = long_rows[k];
    const long long start = bucket_ptr[row], length = (long long)bucket_ptr[row + 1] - start;
    const long long i = (chunk - (long long)chunk_first[k]) * SHORT_ROW + lane;
    const Entry<I> mine = i < length ? entries[start + i] : padding_entry<I>();
    shared[lane] = mine;
    __syncwarp();
    bool first;
    const int rank = rank_in_warp(shared, SHORT_ROW, mine, lane, first);
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

template <class I>
__global__ void __launch_bounds__(CONVERT_BLOCK)
scatter_long_rows(const I* __restrict__ bucket_ptr, const I* __restrict__ long_rows, const I* __restrict__ chunk_first,
                  const I* __restrict__ chunk_owner, const long long n_padded, const Entry<I>* __restrict__ work,
                  Entry<I>* __restrict__ entries, I* __restrict__ heads, unsigned long long* __restrict__ tallies) {
    const long long e = (long long)blockIdx.x * CONVERT_BLOCK + threadIdx.x;
    unsigned long long repeats = 0;
    if (e < n_padded) {
        const long long k = chunk_owner[e / SHORT_ROW];
        const long long row = long_rows[k];
        const long long start = bucket_ptr[row], length = (long long)bucket_ptr[row + 1] - start;
        const long long i = e - (long long)chunk_first[k] * SHORT_ROW;
        if (i < length) {
            const Entry<I> mine = work[e];
            const bool first = i == 0 || work[e - 1].col != mine.col;
            entries[start + i] = mine;
            heads[start + i] = first ? 1 : 0;
            repeats = !first;
        }
    }
    add_block_count(repeats, tallies + 1);
}

// indptr[r] = the runs (distinct entries) before bucket r's first entry.
template <class I>
__global__ void __launch_bounds__(CONVERT_BLOCK)
final_pointers(const I* __restrict__ bucket_ptr, const I* __restrict__ heads_scan, const long long n_rows,
               I* __restrict__ indptr) {
    const long long r = (long long)blockIdx.x * CONVERT_BLOCK + threadIdx.x;
    if (r > n_rows) return;
    const long long b = bucket_ptr[r];
    indptr[r] = b == 0 ? I(0) : heads_scan[b - 1];
}

// DUPLICATES = false: every entry is its own run; indices[j] and values[j] directly (heads_scan,
// run_start unused). true: values[j] = the data in sorted order (summed per run afterwards);
// a run's first entry j writes its column and j at the run's slot heads_scan[j] - 1.
template <class V, class I, bool DUPLICATES>
__global__ void __launch_bounds__(CONVERT_BLOCK)
emit_csr(const Entry<I>* __restrict__ entries, const V* __restrict__ data, const I* __restrict__ heads_scan,
         const long long nnz, I* __restrict__ indices, V* __restrict__ values, I* __restrict__ run_start) {
    const long long j = (long long)blockIdx.x * CONVERT_BLOCK + threadIdx.x;
    if (j >= nnz) return;
    const Entry<I> mine = entries[j];
    values[j] = data[mine.pos];
    if (!DUPLICATES) {
        indices[j] = mine.col;
        return;
    }
    const I slot = heads_scan[j];
    if (slot != (j == 0 ? I(0) : heads_scan[j - 1])) {
        indices[slot - 1] = mine.col;
        run_start[slot - 1] = (I)j;
    }
}
