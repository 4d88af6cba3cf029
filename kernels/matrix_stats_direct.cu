// csr_stats_direct: csr_stats's statistics for the smaller matrices (the host picks it up to
// DIRECT_MAX_ENTRIES entries, sparsegpu/advisor/statistics.py), where every call is latency-bound and
// csr_stats's ticket round trips, its pieces staged one after another and a second launch for the
// summary cost more than the work. Without tickets or a queue, in one launch:
//  - block b takes the rows [b * block_rows, ...) (a multiple of 32, at most STATS_WINDOW) for
//    the row statistics, exactly as a csr_stats tile;
//  - and, independently, the items [b * block_items, ...) of the merge path of the rows' ends and
//    the entries (as in merge-based CSR SpMV) for the structure statistics: at most block_items
//    entries and rows, so neither a long row nor a run of short or empty rows loads one block more
//    than another. The block finds where its diagonals cross the path by a search of indptr
//    (every thread probes at once: one round trip a step) that first probes the rows where the
//    mean row length puts the crossing (one step for regular rows), then narrows 256-fold a step;
//    it holds DIRECT_POINTERS pointers from its first row on in shared memory (the first round of columns
//    in flight with them; rows past them: the next window of pointers), and each thread takes a
//    run of consecutive whole 16-byte vectors of columns, all in flight at once: as many as spread
//    the block's entries over its threads, up to the instantiation's VECTORS (a round), so that a
//    block of a few entries has short runs and one of many takes them in one round trip.
//    The rows find their entries, not the entries their rows: every non-empty row marks its first
//    entry in the round (mark_rows), and an entry's row is the largest mark up to it, a maximum
//    scan over the block (marks_before) and then along the thread's run. That costs a few
//    barriers a round and, per entry, a maximum and the counts without a branch, however long,
//    short or empty the rows are (searching and stepping rows per entry costs more).
// The last block to finish (a ticket taken after every block's atomics) summarises the buffer
// into the record as stats_summary would, unless `record` is null (the buffer is then left as
// csr_stats leaves it); a grid of one block (the host's choice for the smallest matrices)
// summarises its own shared bins when the warp summary applies, merging nothing. It is faster
// than csr_stats with stats_summary on power-law graphs at every size, and on a par up to about
// 1M entries of regular rows (measured on an H200, see docs/performance.md).
#include "matrix_stats_summary.cuh"

template <bool B> struct Constant {
    __device__ constexpr operator bool() const { return B; }
};

// A device-scope acquire-release fetch-and-add of 1: a ticket that releases what its thread (and,
// through a barrier before it, its block) wrote and acquires what the earlier tickets released.
// One fence and the atomic: a fence, a relaxed atomic and a second fence cost a fence's wait more.
__device__ __forceinline__ unsigned long long ticket_acq_rel(unsigned long long* counter) {
    unsigned long long ticket;
    asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], 1;" : "=l"(ticket) : "l"(counter) : "memory");
    return ticket;
}

template <class I> constexpr int DIRECT_POINTERS = 8192 / sizeof(I);  // 8 KiB of pointers
// A round's entries and a thread's (its run of consecutive vectors), at most, for VECTORS 16-byte
// vectors of columns a thread (csr_stats_direct's template parameter).
template <class I, int VECTORS> constexpr int ROUND_ENTRIES = VECTORS * STATS_BLOCK * STATS_VECTOR<I>;
template <class I, int VECTORS> constexpr int RUN_ENTRIES = VECTORS * STATS_VECTOR<I>;

template <class I, int VECTORS> struct DirectPass {
    // The block's rows' pointers, for the row statistics; then a round's 16-bit row marks.
    sg::vec16<I> rows[vectors_holding<I>(STATS_WINDOW + 1) > ROUND_ENTRIES<I, VECTORS> / 8
                          ? vectors_holding<I>(STATS_WINDOW + 1)
                          : ROUND_ENTRIES<I, VECTORS> / 8];
    sg::vec16<I> entries[vectors_holding<I>(DIRECT_POINTERS<I>)];  // pointers of the entries' rows
    __align__(16) unsigned bins[STATS_BINS];
    BlockTotals totals;
    unsigned warp_marks[STATS_BLOCK / 32];  // marks_before's, apart from the totals' scratch the merge writes
};

// Where the merge path of the row ends (indptr[1..n_rows]) and the entries (0 .. nnz) crosses
// diagonals d[0] and d[1] (rows + entries): the rows ended before it, the first p in
// [max(0, d - nnz), min(d, n_rows)) with indptr[p + 1] > d - p - 1 (else min(d, n_rows)); the
// entries before it are d - p. By the whole block, both at once, a round trip a step: every
// thread probes both. The first step probes the STATS_BLOCK rows around where the mean row
// length puts the split: if the rows are alike (meshes, stencils, uniform random rows: off by
// about the square root of the rows) that finds it, in one step instead of one for each
// 256-fold narrowing of the range; if not, it narrows the range to one side and the steps
// after it to every STATS_BLOCK-th row, then every step-th, ... (A corrupt indptr gives some
// split in range.) In 32 bits: rows plus entries are at most DIRECT_ITEM_LIMIT (the host's).
template <class I>
__device__ __forceinline__ void merge_path_splits(const I* __restrict__ indptr, const int n_rows, const int nnz,
                                                  const int (&d)[2], int (&row)[2]) {
    int low[2], high[2], start[2], step[2] = {1, 1};
    // (A float's rounding moves the guess by well under a row at the entries this pass takes.)
    const float rows_per_item = float(n_rows) / float(n_rows + nnz);
#pragma unroll
    for (int q = 0; q < 2; ++q) {
        low[q] = d[q] > nnz ? d[q] - nnz : 0, high[q] = d[q] < n_rows ? d[q] : n_rows;
        start[q] = int(float(d[q]) * rows_per_item) - STATS_BLOCK / 2;
        start[q] = start[q] < high[q] - STATS_BLOCK ? start[q] : high[q] - STATS_BLOCK;
        start[q] = start[q] > low[q] ? start[q] : low[q];
    }
    while (high[0] > low[0] || high[1] > low[1]) {
        bool ended[2];
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int probe = start[q] + int(threadIdx.x) * step[q];
            ended[q] = probe < high[q] && sg::ldg(indptr + probe + 1) <= I(d[q] - probe - 1);
        }
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            // The probes before the at-th ended a row, the at-th (if any, and in range) did not.
            const int at = __syncthreads_count(ended[q]);
            if (at == 0) {
                high[q] = start[q];
            } else {
                const int past = at < STATS_BLOCK ? start[q] + at * step[q] : high[q];
                low[q] = start[q] + (at - 1) * step[q] + 1;
                high[q] = past < high[q] ? past : high[q];
            }
            step[q] = (high[q] - low[q] + STATS_BLOCK - 1) / STATS_BLOCK;
            start[q] = low[q];
        }
    }
    row[0] = low[0], row[1] = low[1];
}

// The row marks of a round of entries [base, end): 16-bit words, zero but where
// a row of the window starts, and at 0 (the round's first entry), where they hold the row's index
// in the window plus one. Every non-empty row of the window that meets the round writes its own
// mark, so a window's rows need no search: the row of an entry is the largest mark at or before it
// (a prefix maximum), whatever the rows' lengths and however many are empty. Every thread calls it,
// between barriers.
template <class I>
__device__ __forceinline__ void mark_rows(const I* window, const int held, const I base, const I end,
                                          unsigned short* marks) {
    for (int r = threadIdx.x; r < held - 1; r += STATS_BLOCK) {
        const I start = window[r], stop = window[r + 1];
        if (start < stop && stop > base && start < end) marks[start > base ? int(start - base) : 0] = (unsigned short)(r + 1);
    }
}

// The largest of the 16-bit halves of a run's `run` marks (packed two a word; run even).
template <int RUN>
__device__ __forceinline__ unsigned largest_mark(const unsigned (&packed)[RUN / 2], const int run) {
    unsigned m = packed[0];
#pragma unroll
    for (int q = 1; q < RUN / 2; ++q) {
        if (2 * q >= run) break;
        m = __vmaxu2(m, packed[q]);
    }
    return max(m & 0xffff, m >> 16);
}

// The largest mark before each thread's run in the round (0 if none): an exclusive maximum over
// the block's threads in order, of each thread's largest. The marks grow along the round (a row's
// index in the window), so that is the largest of the last thread before with any mark: found in
// the warp by a ballot, and over the warps before by one reduction of their largest. Every thread
// calls it; its barrier also ends every thread's reading of the marks. (For a corrupt indptr the
// marks need not grow: an entry then gets some row of the window, still in range.)
__device__ __forceinline__ unsigned marks_before(const unsigned largest, unsigned* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const unsigned marked = __ballot_sync(sg::FULL_MASK, largest != 0) & ((1u << lane) - 1);
    const unsigned from_lane = __shfl_sync(sg::FULL_MASK, largest, marked ? 31 - __clz(marked) : 0);
    // (Marks are 16-bit: warp_max's int reduction holds them.)
    const unsigned warp_largest = unsigned(warp_max(int(largest)));
    if (lane == 0) scratch[warp] = warp_largest;
    __syncthreads();
    const unsigned earlier = unsigned(warp_max(lane < warp ? int(scratch[lane % (STATS_BLOCK / 32)]) : 0));
    return marked ? from_lane : earlier;
}

// A grid of one block (the smallest matrices) summarises from its own shared bins and head words
// when the warp summary applies: nothing is merged into the buffer (it stays zero), and there is
// no ticket and no round trip for the summary's loads. Returns false (nothing written) where the
// block has to merge and summarise as the last of many would. Every thread calls it.
template <class I>
__device__ __forceinline__ bool summarised_alone(const unsigned long long word, const unsigned* bins,
                                                 BlockTotals& totals, const SummaryArguments& arguments) {
    if (threadIdx.x < OUT_BINS) totals.head[threadIdx.x] = word;  // (no rows past the bins if summarised)
    __syncthreads();
    const unsigned long long longest = totals.head[OUT_LONGEST];
    if (longest >= WARP_SUMMARY_BINS) return false;
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x, used = int(longest) + 1;
        long long counts[WARP_BINS];
#pragma unroll
        for (int t = 0; t < WARP_BINS; ++t) {
            const int k = 32 * t + lane;
            counts[t] = k < used ? bins[k] : 0;
        }
        long long record_word;
        const bool done = warp_summary_applies<I>(used, arguments) &&
                          warp_summarise<I>(counts, lane < OUT_BINS ? (long long)totals.head[lane] : 0, used,
                                            arguments, record_word);
        if (done) publish_record(arguments.record, true, record_word, arguments.epoch);
        if (lane == 0) totals.summarised = done;
    }
    __syncthreads();
    return totals.summarised;
}

// MIN_BLOCKS: the blocks an SM holds, and VECTORS: the 16-byte vectors of columns a thread loads
// at once, at most (the host's grid picks the instantiation, sparsegpu/advisor/statistics.py direct_launch:
// the fewest blocks an SM whose round holds a block's entries). 2 blocks an SM leave a thread 128
// registers (faster than 64 at two blocks an SM), 3 leave 80, 4 fill the
// SMs for the largest grids with 64; more vectors hold more registers.
template <class I, int MIN_BLOCKS, int VECTORS>
__global__ void __launch_bounds__(STATS_BLOCK, MIN_BLOCKS)
csr_stats_direct(const I* __restrict__ indptr, const I* __restrict__ indices, const long long n_rows,
                 const long long nnz, const int block_rows, const long long block_items,
                 const long long overflow_capacity, unsigned long long* __restrict__ counters,
                 unsigned long long* __restrict__ out, const unsigned long long epoch, long long* __restrict__ record,
                 const long long limit, const long long hot_rows, const int value_bytes, const long long target50,
                 const long long target90, const long long target99) {
    constexpr int V = STATS_VECTOR<I>;
    __shared__ union Shared {
        DirectPass<I, VECTORS> pass;
        SummaryShared summary;
    } shared;
    __shared__ bool last_block;
    auto& [row_storage, entry_storage, bins, totals, warp_marks] = shared.pass;
    const I* row_window = reinterpret_cast<const I*>(row_storage);
    const I* window = reinterpret_cast<const I*>(entry_storage);
    clear_bins(bins);
    totals.clear();

    // Rows, entries and their positions in 32 bits (fewer registers and instructions): the host
    // takes this pass only for rows plus entries up to DIRECT_ITEM_LIMIT, 2^30, so that a grid's
    // rows and items past them stay in range too.
    const int m = int(n_rows), entries = int(nnz), items = m + entries;
    // The rows' pointers in flight while the entries' first row is searched for.
    const int row0 = int(blockIdx.x) * block_rows;
    const int rows = row0 >= m ? 0 : m - row0 < block_rows ? m - row0 : block_rows;
    if (rows) load_pointers<I, STATS_WINDOW + 1>(indptr, row0, rows + 1, row_storage);
    const int d0 = int(blockIdx.x) * int(block_items);
    const int diagonals[2] = {d0 < items ? d0 : items, items - d0 < block_items ? items : d0 + int(block_items)};
    int splits[2];
    merge_path_splits(indptr, m, entries, diagonals, splits);
    const int first_entry = diagonals[0] - splits[0], last_entry = diagonals[1] - splits[1];
    int first_row = first_entry < last_entry ? splits[0] : m;
    copy_to_shared_wait();
    __syncthreads();
    if (rows) tile_rows_stats(row_window, rows, overflow_capacity, bins, out, totals.widths, totals.longest);

    // The entries [first_entry, last_entry), a window of pointers at a time, each window's first row a multiple
    // of the pointers in a 16-byte vector (so they are copied as vectors) at or before the first
    // row it has to hold: the row of the first entry not yet counted. A round of the window's
    // entries gives each thread a run of `vectors` consecutive 16-byte vectors of columns,
    // all in flight at once; the rows mark where they start in the round (mark_rows), and each
    // entry's row is the largest mark up to it: the marks before the thread's run (marks_before),
    // then its own. Per entry that is a maximum and the counts, without branches, whatever the
    // rows' lengths.
    constexpr int ROW_ALIGN = sg::vec16<I>::N;
    // Vectors a thread takes a round: as many as the block's entries need (so that a few entries
    // spread over every thread: shorter runs), up to VECTORS, spread evenly over the rounds that
    // many entries take (two rounds of 5 cost less than rounds of 6 and 4).
    const int block_vectors = (last_entry - first_entry + V - 1) / V + 1;  // (+1: a run may start mid-vector)
    const int rounds = (block_vectors + VECTORS * STATS_BLOCK - 1) / (VECTORS * STATS_BLOCK);
    const int vectors = (block_vectors + rounds * STATS_BLOCK - 1) / (rounds * STATS_BLOCK);
    const int run = vectors * V, round_entries = run * STATS_BLOCK;
    unsigned short* marks = reinterpret_cast<unsigned short*>(row_storage);
    const bool aligned = reinterpret_cast<unsigned long long>(indices) % 16 == 0;
    Structure<I> s;
    I columns[VECTORS][V];
    // The columns of the thread's run in the round from entry `base` (a multiple of V), within the
    // entries [lo, hi).
    const auto load_run = [&](const int base, const int lo, const int hi) {
#pragma unroll
        for (int u = 0; u < VECTORS; ++u) {
            if (u == vectors) break;
            const int e = base + (int(threadIdx.x) * vectors + u) * V;
            if (e >= hi) continue;
            if (aligned && e + V <= entries) {
                load_vector(indices + e, columns[u]);
            } else {
#pragma unroll
                for (int k = 0; k < V; ++k) columns[u][k] = e + k >= lo && e + k < hi ? __ldcs(indices + e + k) : I(0);
            }
        }
    };
    for (int next = first_entry; first_row < m;) {
        first_row = first_row / ROW_ALIGN * ROW_ALIGN;
        // Pointers up to the end of the row that holds the block's last entry (splits[1]; at
        // least two, so that a corrupt indptr still moves on), at most the window's.
        const int rows_needed = (splits[1] < m ? splits[1] + 1 : m) - first_row;
        const bool to_the_end = rows_needed < DIRECT_POINTERS<I> - 1;
        const int held = rows_needed < 1 ? 2 : to_the_end ? rows_needed + 1 : DIRECT_POINTERS<I>;
        __syncthreads();  // every thread is done with the previous window and its marks
        load_pointers<I, DIRECT_POINTERS<I>>(indptr, first_row, held, entry_storage);
        // A window to the block's last row holds the entries [next, last_entry) of a valid
        // indptr: their first round's columns are in flight with the pointers.
        if (to_the_end) load_run(next / V * V, next, last_entry);
        copy_to_shared_wait();
        __syncthreads();
        // The window's entries within the block's, [lo, hi); none where a corrupt indptr has its
        // pointers out of order (!ordered), which ends the pass.
        const I window_first = window[0], window_last = window[held - 1];
        const int lo = window_first <= I(next) ? next : window_first < I(last_entry) ? int(window_first) : last_entry;
        const bool ordered = window_last >= I(lo);
        const int hi = !ordered ? lo : window_last < I(last_entry) ? int(window_last) : last_entry;
        bool loaded = to_the_end && lo == next && hi == last_entry;  // (else a corrupt indptr: loaded again)
        const I row_base = I(first_row);  // (entries and rows fit I)
        for (int base = lo / V * V; base < hi; base += round_entries) {
            if (!loaded) load_run(base, lo, hi);
            loaded = false;
            // (The previous round's marks were read before marks_before's barrier.)
            for (int q = threadIdx.x; q < round_entries / 8; q += STATS_BLOCK)
                reinterpret_cast<uint4*>(marks)[q] = uint4{0, 0, 0, 0};
            __syncthreads();
            const int end = hi - base < round_entries ? hi : base + round_entries;
            mark_rows(window, held, I(base), I(end), marks);
            __syncthreads();
            constexpr int RUN = RUN_ENTRIES<I, VECTORS>;
            unsigned packed[RUN / 2];
#pragma unroll
            for (int q = 0; q < RUN / 2; ++q) {
                if (2 * q == run) break;
                packed[q] = reinterpret_cast<const unsigned*>(marks)[threadIdx.x * (run / 2) + q];
            }
            unsigned row = marks_before(largest_mark<RUN>(packed, run), warp_marks);
            // The run's entries [from, to) are the round's in [lo, end): all of them but in the
            // threads at the round's ends, which count the others as 0.
            const int run_first = threadIdx.x * run;  // (offsets from base)
            const int lo_offset = lo > base ? lo - base : 0, end_offset = end - base;
            const int from = min(max(lo_offset - run_first, 0), run), to = min(max(end_offset - run_first, 0), run);
            const I row_before = row_base - I(1);  // (the marks are the window's rows plus one)
            const auto count_run = [&](const auto whole) {
#pragma unroll
                for (int i = 0; i < RUN; ++i) {
                    if (i == run) break;
                    row = max(row, (packed[i / 2] >> (16 * (i % 2))) & 0xffff);
                    const I d = columns[i / V][i % V] - (row_before + I(row));
                    s.count(whole || (i >= from && i < to) ? d : I(0));
                }
            };
            if (from == 0 && to == run) count_run(Constant<true>{});
            else if (from < to) count_run(Constant<false>{});  // (threads past the round's end skip)
        }
        if (hi >= last_entry || !ordered) break;
        next = hi;
        first_row += held - 1;
    }
    s.end_item(totals.structure[threadIdx.x / 32]);
    if (threadIdx.x == 0) totals.entries = (unsigned long long)(last_entry - first_entry);
    const unsigned long long word = block_head_word(s, totals);
    const SummaryArguments arguments{n_rows, nnz, overflow_capacity, epoch, record, limit, hot_rows, value_bytes,
                                     target50, target90, target99};
    if (gridDim.x == 1 && record != nullptr && summarised_alone<I>(word, bins, totals, arguments)) return;
    merge_into_buffer(word, bins, totals, out);
    if (record == nullptr) return;

    // The last block summarises: every block's atomics are done before its ticket. Thread 0
    // alone takes it, after the barrier (release is cumulative: the block's atomics that the
    // barrier ordered before it are released with the ticket, and its acquire is the block's
    // through the barrier after it, as in cooperative groups' grid sync): a fence in every warp
    // waited for each warp's atomics to land, a tenth of the pass's stalls on the larger grids.
    // Message passing needs acquire-release only; __threadfence's sequentially consistent fence
    // costs more.
    __syncthreads();
    if (threadIdx.x == 0) last_block = ticket_acq_rel(counters + COUNTER_TILES_DONE) == gridDim.x - 1ULL;
    __syncthreads();
    if (!last_block) return;
    summarise<I>(shared.summary, counters, out, arguments);
}
