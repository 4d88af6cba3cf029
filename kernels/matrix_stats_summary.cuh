// The summary of the advisor's statistics buffer (layout in matrix_stats_common.cuh): one block
// that summarises the row lengths from the merged bins and the overflow list into the record in
// pinned host memory (so the host copies nothing back and sums nothing), then zeroes the buffer's
// counters and the head's used words for the next call (so the host sets nothing before it).
// stats_summary (matrix_stats_tiled.cu) runs it after csr_stats, in a kernel of its own: as
// csr_stats's last block it would cost csr_stats's capped loops registers, and it can be run on
// any buffer. csr_stats_direct's last block runs it too. The reference is the host's summary
// (sparsegpu/advisor/summary.py _summary_words), bit for bit. Every word is an integer but HYB's
// width, the first minimum over the distinct lengths w of
//     cost(w) = R * w * (v + i) + (after - w * over) * (v + 2 i) + over * 2 v
// (R rows; `over` rows longer than w hold `after` entries; v, i the value and index bytes),
// computed with the host's float64 operations in its order (no contraction into FMAs), at costs
// below 2^53 where every float64 operation is exact.
#ifndef SPARSEGPU_MATRIX_STATS_SUMMARY_CUH
#define SPARSEGPU_MATRIX_STATS_SUMMARY_CUH
#include "matrix_stats_common.cuh"


// A candidate width: its cost, then its length, the smaller pair wins (the host's first minimum);
// the rows up to it and their entries.
struct Width {
    double cost;
    long long length, rows_to, entries_to;
};
__device__ __forceinline__ bool cheaper(const Width& a, const Width& b) {
    return a.cost < b.cost || (a.cost == b.cost && a.length < b.length);
}
__device__ __forceinline__ double hyb_cost(long long width, long long rows_to, long long entries_to, long long rows,
                                           long long entries, int v, int i) {
    const double w = double(width), over = double(rows - rows_to);
    const double slots = __dmul_rn(__dmul_rn(double(rows), w), double(v + i));
    const double spilled = __dmul_rn(__dsub_rn(double(entries - entries_to), __dmul_rn(w, over)), double(v + 2 * i));
    return __dadd_rn(__dadd_rn(slots, spilled), __dmul_rn(over, double(2 * v)));
}
__device__ __forceinline__ Width shfl_down_width(const Width& w, int offset) {
    return Width{sg::shfl_down(w.cost, offset), sg::shfl_down(w.length, offset), sg::shfl_down(w.rows_to, offset),
                 sg::shfl_down(w.entries_to, offset)};
}

// Exclusive prefix sums over the block of two values a thread (every thread calls it); `scratch`
// holds 2 * STATS_BLOCK / 32 values. Also returns the totals.
__device__ __forceinline__ void block_exclusive_scan(long long& a, long long& b, long long& total_a,
                                                     long long& total_b, long long* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    long long inclusive_a = a, inclusive_b = b;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
        const long long up_a = sg::shfl_up(inclusive_a, offset), up_b = sg::shfl_up(inclusive_b, offset);
        if (lane >= offset) inclusive_a += up_a, inclusive_b += up_b;
    }
    if (lane == 31) scratch[warp] = inclusive_a, scratch[STATS_BLOCK / 32 + warp] = inclusive_b;
    __syncthreads();
    long long before_a = inclusive_a - a, before_b = inclusive_b - b;
    total_a = total_b = 0;
    for (int w = 0; w < STATS_BLOCK / 32; ++w) {
        if (w < warp) before_a += scratch[w], before_b += scratch[STATS_BLOCK / 32 + w];
        total_a += scratch[w], total_b += scratch[STATS_BLOCK / 32 + w];
    }
    a = before_a, b = before_b;
}

inline constexpr int SUMMARY_BINS = STATS_BINS / STATS_BLOCK;  // bins a thread loads, and takes at most

// The summary's shared memory.
struct SummaryShared {
    long long counts[STATS_BINS];  // the bins
    long long over[SUMMARY_OVERFLOW_ROWS];  // the rows past the bins
    long long scratch[2 * STATS_BLOCK / 32];
    long long found[5];  // the shortest length, p50, p90, p99; entries in the hot rows
    Width warp_best[STATS_BLOCK / 32];
    long long words[RECORD_WORDS];  // the record, written out together
};

// What a summary needs besides the buffer: the matrix's rows and entries, the overflow list's
// room, the call's epoch, the record (RECORD_WORDS words of pinned host memory), CSR's long-row
// limit, the rows SELL may stage, the value bytes, and the row counts at which the quantiles'
// lengths are reached (the host's arguments, sparsegpu/advisor/statistics.py _summary_arguments).
struct SummaryArguments {
    long long n_rows, nnz, overflow_capacity;
    unsigned long long epoch;
    long long* record;
    long long limit, hot_rows;
    int value_bytes;
    long long target50, target90, target99;
};

// The summary's walk over the bins in length order, from the rows and entries before the first
// bin it takes: each length's squares, its HYB cost (the cheapest kept), the quantiles and the
// hot rows' shortest length it holds (into `found`: the shortest length, p50, p90, p99, the entries
// in the hot rows), and the rows past the long-row limit: the host's words, which the warp summary
// makes its own way.
struct BinWalk {
    long long targets[4];  // the row counts at which the shortest length and the quantiles are reached
    long long rows, entries;  // all the matrix's (the bins' and the rows past them)
    long long bin_rows, bin_entries, listed_entries;  // in the bins; in the rows past them
    long long hot_left;  // hot rows in the bins (those past them are all hot)
    long long limit_bin;
    int value_bytes, index_bytes;
    long long rows_to, entries_to;  // up to the last bin taken
    Width best{0x1.fffffffffffffp+1023, 0, 0, 0};  // none yet: every cost (below 2^53) is less
    unsigned long long squares = 0, long_rows = 0;

    template <class Found>
    __device__ __forceinline__ void take(const int k, const long long count, Found& found) {
        const long long previous = rows_to, hot_target = bin_rows - hot_left;  // the hot rows are those past it
        rows_to += count, entries_to += count * k;
        if (count) {
            squares += (unsigned long long)count * k * k;
            const Width here{hyb_cost(k, rows_to, entries_to, rows, entries, value_bytes, index_bytes), k, rows_to,
                             entries_to};
            if (cheaper(here, best)) best = here;
#pragma unroll
            for (int q = 0; q < 4; ++q)
                if (previous < targets[q] && targets[q] <= rows_to) found[q] = k;
        }
        if (k == limit_bin) long_rows += bin_rows - rows_to;
        if ((k == 0 || previous <= hot_target) && rows_to > hot_target)  // the hot rows' shortest length
            found[4] = listed_entries + (bin_entries - entries_to) + (hot_left - (bin_rows - rows_to)) * k;
    }
};

// The warp summary: when every row is in the first WARP_SUMMARY_BINS bins (none past them: most
// meshes, stencils and uniform random matrices), one warp makes the same record as the block's
// summary with shuffles instead of the block's barriers, and its loads go out with the head words
// that decide it, in one round trip. It runs alone at the end of the call, so its length is the
// dependent chain of one warp: the bins go in rounds of 32 consecutive ones, lane l taking bin
// 32 t + l in round t, so that a round is one scan and every length's words at once (rows of up
// to 31 entries, most meshes and stencils: one round).
inline constexpr int WARP_BINS = 4;
inline constexpr int WARP_SUMMARY_BINS = 32 * WARP_BINS;
inline constexpr long long NO_COST = 0x7fffffffffffffffLL;  // a width no row has

// The record published to the host by one whole warp: lane w (RECORD_EPOCH < w < RECORD_WORDS)
// writes `word` as the record's word w where `write`, and then lane RECORD_EPOCH writes the
// call's epoch with a system-scope release after the warp's barrier, so every word (and every
// write the block made before that barrier) is visible before the epoch is. The host polls the
// epoch and reads the record as soon as it shows, without waiting for the kernel to end
// (sparsegpu/advisor/statistics.py _Workspace.await_record); the kernel writes nothing after it.
__device__ __forceinline__ void publish_record(long long* record, const bool write, const long long word,
                                               const unsigned long long epoch) {
    const int lane = threadIdx.x % 32;
    if (write && lane > RECORD_EPOCH && lane < RECORD_WORDS) record[lane] = word;
    __syncwarp();
    if (lane == RECORD_EPOCH) {
        asm volatile("fence.acq_rel.sys;" ::: "memory");
        *reinterpret_cast<volatile long long*>(record + RECORD_EPOCH) = (long long)epoch;
    }
}

// A 64-bit L2 load kept where it is written (not moved into the branch that uses it), so that
// loads written together are in flight together.
__device__ __forceinline__ long long load_now(const unsigned long long* p) {
    long long v;
    asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// The smallest of the warp's 32 values, each in [0, 2^63) (every lane gets it): two
// instructions, the high halves' minimum and then the low halves' among the lanes that hold it.
__device__ __forceinline__ long long warp_min(const long long v) {
#if __CUDA_ARCH__ >= 800
    const unsigned high = __reduce_min_sync(sg::FULL_MASK, unsigned(v >> 32));
    const unsigned low = __reduce_min_sync(sg::FULL_MASK, unsigned(v >> 32) == high ? unsigned(v) : 0xffffffffu);
    return (long long)high << 32 | low;
#else
    long long m = v;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
        const long long other = __shfl_xor_sync(sg::FULL_MASK, m, offset);
        m = other < m ? other : m;
    }
    return m;
#endif
}

// Whether the summaries' HYB costs and sum of squares are exact (the host's limits, with a margin
// of 2: the products are rounded here) for `rows` rows and `nnz` entries, the longest `longest`.
__device__ __forceinline__ bool costs_exact(const long long rows, const long long nnz, const double longest,
                                            const int value_bytes, const int index_bytes) {
    return double(rows) * (longest * (2 * value_bytes + 3 * index_bytes) + 2 * value_bytes) < 0x1p52 &&
           double(nnz) * longest < 0x1p62;
}

// Whether the warp summary takes a matrix whose rows are all in `bins` bins, from its shape alone:
// not where the block's summary would leave the head to the host (costs past float64's exact
// integers), nor for 2^32 rows or entries or more (the warp scans them packed in one word).
template <class I>
__device__ __forceinline__ bool warp_summary_applies(const int bins, const SummaryArguments& arguments) {
    return arguments.hot_rows > 0 && arguments.n_rows < (1LL << 32) && arguments.nnz < (1LL << 32) &&
           costs_exact(arguments.n_rows, arguments.nnz, double(bins - 1), arguments.value_bytes, sizeof(I));
}

// The warp summary of the bins 0 .. bins - 1 (bins <= WARP_SUMMARY_BINS; counts[t] holds the
// lane's bin 32 t + l, zero from `bins` on) and, lanes below OUT_BINS, the head's word `lane` (no
// rows past the bins: its OUT_OVERFLOW_ROWS word is zero), where warp_summary_applies. Returns
// true with the lane's word of the record (publish_record's), or false where the bins are not the
// matrix's rows and entries (where the block's summary, too, leaves the head to the host). Every
// lane calls it.
//  The words are the block's summary's (BinWalk's): below 2^52 (the exactness test) the HYB costs
// are integers that float64 holds exactly, so they are compared as integers here, the cheapest
// and, among equal costs, the shortest width winning as there; each quantile's length is the
// one bin where the rows counted up to it cross its target.
template <class I>
__device__ __forceinline__ bool warp_summarise(const long long (&counts)[WARP_BINS], const long long head_word,
                                               const int bins, const SummaryArguments& arguments, long long& word) {
    const auto& [n_rows, nnz, overflow_capacity, epoch, record, limit, hot_rows, value_bytes, target50, target90,
                 target99] = arguments;
    constexpr int index_bytes = sizeof(I);
    const int lane = threadIdx.x % 32;
    const long long targets[4] = {1, target50, target90, target99};  // the shortest length's, the quantiles'
    const long long hot_target = n_rows - hot_rows;  // the hot rows are those counted past it
    const long long limit_bin = limit < bins - 1 ? limit : bins - 1;
    const long long slot_bytes = value_bytes + index_bytes, spill_bytes = value_bytes + 2 * index_bytes;
    long long found[5] = {-1, -1, -1, -1, -1};  // the shortest length, p50, p90, p99; entries in the hot rows
    long long best_cost = NO_COST, best_width = 0, best_in_ell = 0, long_rows = 0;
    unsigned long long before = 0, squares = 0;  // rows << 32 | entries in the earlier rounds; the lane's squares
#pragma unroll
    for (int t = 0; t < WARP_BINS; ++t) {
        if (32 * t >= bins) break;
        const long long k = 32 * t + lane, count = counts[t];
        unsigned long long up_to = ((unsigned long long)count << 32) + (unsigned long long)(count * k);
#pragma unroll
        for (int offset = 1; offset < 32; offset *= 2) {
            const unsigned long long up = sg::shfl_up(up_to, offset);
            if (lane >= offset) up_to += up;
        }
        up_to += before;
        before = sg::shfl(up_to, 31);
        const long long rows_to = (long long)(up_to >> 32), entries_to = (long long)(up_to & 0xffffffffULL);
        const long long previous = rows_to - count, over = n_rows - rows_to;
        squares += (unsigned long long)(count * k * k);
        // HYB at width k: hyb_cost's terms, as integers.
        const long long cost = count ? n_rows * k * slot_bytes + (nnz - entries_to - k * over) * spill_bytes +
                                           over * (2 * value_bytes)
                                     : NO_COST;
        const long long round_best = warp_min(cost);
        if (round_best < best_cost) {  // (an earlier round's equal cost is a shorter width)
            const int owner = __ffs(__ballot_sync(sg::FULL_MASK, cost == round_best)) - 1;
            best_cost = round_best, best_width = 32 * t + owner;
            best_in_ell = sg::shfl(entries_to + k * over, owner);
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const unsigned crossing = __ballot_sync(sg::FULL_MASK, previous < targets[q] && targets[q] <= rows_to);
            if (found[q] < 0 && crossing) found[q] = 32 * t + __ffs(crossing) - 1;
        }
        const unsigned hot = __ballot_sync(sg::FULL_MASK, (k == 0 || previous <= hot_target) && rows_to > hot_target);
        const long long hot_entries = nnz - entries_to + (hot_rows - over) * k;
        if (found[4] < 0 && hot) found[4] = sg::shfl(hot_entries, __ffs(hot) - 1);
        if (limit_bin >= 32 * t && limit_bin < 32 * t + 32) long_rows = n_rows - sg::shfl(rows_to, int(limit_bin) % 32);
    }
    if ((long long)(before >> 32) != n_rows || (long long)(before & 0xffffffffULL) != nnz) return false;
    // A lane's squares are below 2^48 (rows < 2^32, lengths < 2^7, 4 rounds): summed in two 24-bit halves.
    const unsigned long long squares_total =
        ((unsigned long long)warp_total(unsigned(squares >> 24)) << 24) + warp_total(unsigned(squares & 0xffffff));
    // Lane w writes the record's word w, all in one go.
    const long long empty = sg::shfl(counts[0], 0), head_here = sg::shfl(head_word, (lane - RECORD_HEAD) & 31);
    const long long summary[SUMMARY_WORDS] = {
        found[0], empty, (long long)squares_total, found[1], found[2], found[3],
        best_width, best_in_ell, long_rows, found[4]};
    word = lane == RECORD_STATUS ? STATUS_SUMMARISED : head_here;
#pragma unroll
    for (int w = 0; w < SUMMARY_WORDS; ++w)
        if (lane == RECORD_SUMMARY + w) word = summary[w];
    return true;
}

// The summary, by one block, of `counters` and `out` as csr_stats (or csr_stats_direct) left them.
template <class I>
__device__ __forceinline__ void summarise(SummaryShared& shared, unsigned long long* __restrict__ counters,
                                          unsigned long long* __restrict__ out, const SummaryArguments& arguments) {
    auto& [counts, over, scratch, found, warp_best, words] = shared;
    const auto& [n_rows, nnz, overflow_capacity, epoch, record, limit, hot_rows, value_bytes, target50, target90,
                 target99] = arguments;
    constexpr int index_bytes = sizeof(I);
    // Warp 0's loads for the warp summary go out with the words that decide for it.
    const int lane = threadIdx.x % 32;
    long long warp_counts[WARP_BINS], head_word = 0;
    if (threadIdx.x < 32) {
#pragma unroll
        for (int t = 0; t < WARP_BINS; ++t) warp_counts[t] = load_now(out + OUT_BINS + 32 * t + lane);
        if (lane < OUT_BINS) head_word = load_now(out + lane);
    }
    const long long overflow_rows = load_now(out + OUT_OVERFLOW_ROWS);
    const unsigned long long longest = (unsigned long long)load_now(out + OUT_LONGEST);
    if (overflow_rows == 0 && longest < WARP_SUMMARY_BINS) {
        if (threadIdx.x >= 32) return;
        const int bins = int(longest) + 1;
#pragma unroll
        for (int t = 0; t < WARP_BINS; ++t)
            if (32 * t + lane >= bins) warp_counts[t] = 0;
        if (!warp_summary_applies<I>(bins, arguments)) {
            publish_record(record, lane == RECORD_STATUS, STATUS_HEAD_KEPT, epoch);
            return;
        }
        // Ready for the next call (as below) while the summary is made: the warp holds every word
        // it reads, and the stores have landed by the time the record's fence waits for them.
        for (int w = lane; w < STATS_COUNTERS; w += 32) counters[w] = 0;
        for (int w = lane; w < OUT_BINS + bins; w += 32) out[w] = 0;
        long long word;
        if (warp_summarise<I>(warp_counts, head_word, bins, arguments, word)) {
            publish_record(record, true, word, epoch);
        } else {
            // Bins that are not the matrix's rows (its arrays changed after their checks): the
            // head back as it was, left to the host.
            __syncwarp();  // (other lanes zeroed these words)
            if (lane < OUT_BINS) out[lane] = head_word;
#pragma unroll
            for (int t = 0; t < WARP_BINS; ++t)
                if (32 * t + lane < bins) out[OUT_BINS + 32 * t + lane] = warp_counts[t];
            publish_record(record, lane == RECORD_STATUS, STATUS_HEAD_KEPT, epoch);
        }
        return;
    }
    const int bins = longest < STATS_BINS ? int(longest) + 1 : STATS_BINS;
    const bool listed = overflow_rows <= SUMMARY_OVERFLOW_ROWS && overflow_rows <= overflow_capacity;
    // A thread takes consecutive bins, as few as spread the used ones over the block: its walk
    // over them is the summary's longest chain (16 bins a thread cost a quarter of the kernel's
    // time on a matrix with rows of up to 484 entries).
    const int bins_each = (bins + STATS_BLOCK - 1) / STATS_BLOCK, first_bin = threadIdx.x * bins_each;

    // The bins and the overflow list into shared memory, every load in flight at once.
    long long over_entries = 0;
#pragma unroll
    for (int v = 0; v < SUMMARY_BINS; ++v) {
        const int k = threadIdx.x + v * STATS_BLOCK;
        counts[k] = k < bins ? (long long)__ldcg(out + OUT_BINS + k) : 0;
    }
    if (listed) {
#pragma unroll
        for (int v = 0; v < SUMMARY_OVERFLOW_ROWS / STATS_BLOCK; ++v) {
            const int r = threadIdx.x + v * STATS_BLOCK;
            if (r < overflow_rows) {
                over[r] = (long long)__ldcg(out + OUT_OVERFLOW + r);
                over_entries += over[r];
            }
        }
    }
    if (threadIdx.x < OUT_BINS) words[RECORD_HEAD + threadIdx.x] = (long long)__ldcg(out + threadIdx.x);
    over_entries = sg::subwarp_sum<32>(over_entries);
    __syncthreads();
    long long rows_before = 0, entries_before = 0;
    for (int k = first_bin; k < first_bin + bins_each && k < bins; ++k)
        rows_before += counts[k], entries_before += counts[k] * k;
    long long bin_rows, bin_entries;
    block_exclusive_scan(rows_before, entries_before, bin_rows, bin_entries, scratch);
    if (threadIdx.x < 5) found[threadIdx.x] = -1;
    __syncthreads();  // scratch read; the overflow list in shared memory
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = over_entries;
    __syncthreads();
    long long listed_entries = 0;
    for (int w = 0; w < STATS_BLOCK / 32; ++w) listed_entries += scratch[w];
    const long long rows = bin_rows + overflow_rows, entries = bin_entries + listed_entries;
    if (!(listed && overflow_rows < hot_rows && rows == n_rows && entries == nnz &&
          costs_exact(rows, nnz, double(longest), value_bytes, index_bytes))) {
        if (threadIdx.x < 32) publish_record(record, threadIdx.x == RECORD_STATUS, STATUS_HEAD_KEPT, epoch);
        return;
    }

    // The bins, each thread's in order from its prefix.
    BinWalk walk{{1, target50, target90, target99}, rows, entries, bin_rows, bin_entries, listed_entries,
                 hot_rows - overflow_rows, limit < bins - 1 ? limit : bins - 1, value_bytes, index_bytes,
                 rows_before, entries_before};
    for (int k = first_bin; k < first_bin + bins_each && k < bins; ++k) walk.take(k, counts[k], found);
    const long long(&targets)[4] = walk.targets;
    Width& best = walk.best;
    unsigned long long &squares = walk.squares, &long_rows = walk.long_rows;
    // The rows past the bins: each length against the whole list (at most SUMMARY_OVERFLOW_ROWS).
    for (int r = threadIdx.x; r < overflow_rows; r += STATS_BLOCK) {
        const long long length = over[r];
        long long shorter = 0, up_to = 0, entries_up_to = 0, copies_before = 0;
        for (int j = 0; j < overflow_rows; ++j) {
            const long long other = over[j];
            shorter += other < length;
            up_to += other <= length;
            entries_up_to += other <= length ? other : 0;
            copies_before += j < r && other == length;
        }
        squares += (unsigned long long)length * (unsigned long long)length;
        long_rows += length > limit;
        const Width here{hyb_cost(length, bin_rows + up_to, bin_entries + entries_up_to, rows, entries, value_bytes,
                                  index_bytes),
                         length, bin_rows + up_to, bin_entries + entries_up_to};
        if (cheaper(here, best)) best = here;
        if (copies_before == 0)  // one writer per length
#pragma unroll
            for (int q = 0; q < 4; ++q)
                if (bin_rows + shorter < targets[q] && targets[q] <= bin_rows + up_to) found[q] = length;
    }
    squares = sg::subwarp_sum<32>(squares);
    long_rows = sg::subwarp_sum<32>(long_rows);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
        const Width other = shfl_down_width(best, offset);
        if (cheaper(other, best)) best = other;
    }
    __syncthreads();  // scratch is free again
    auto sums = reinterpret_cast<unsigned long long*>(scratch);
    if (threadIdx.x % 32 == 0) {
        const int warp = threadIdx.x / 32;
        warp_best[warp] = best, sums[warp] = squares, sums[STATS_BLOCK / 32 + warp] = long_rows;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        squares = long_rows = 0;
        for (int w = 0; w < STATS_BLOCK / 32; ++w) {
            if (cheaper(warp_best[w], best)) best = warp_best[w];
            squares += sums[w], long_rows += sums[STATS_BLOCK / 32 + w];
        }
        words[RECORD_STATUS] = STATUS_SUMMARISED;
        const long long summary[SUMMARY_WORDS] = {
            found[0], counts[0], (long long)squares, found[1], found[2], found[3],
            best.length, best.entries_to + best.length * (rows - best.rows_to), (long long)long_rows, found[4]};
        for (int w = 0; w < SUMMARY_WORDS; ++w) words[RECORD_SUMMARY + w] = summary[w];
    }
    __syncthreads();  // the record whole, every word of the head read before it is zeroed
    // Ready for the next call: the counters and the head's words this call counted into, zeroed
    // before the record shows.
    if (threadIdx.x < STATS_COUNTERS) counters[threadIdx.x] = 0;
    for (int w = threadIdx.x; w < OUT_BINS + bins; w += STATS_BLOCK) out[w] = 0;
    __syncthreads();
    // One store a lane, together (single stores to host memory one after another would each pay
    // a trip over the bus), then the epoch.
    if (threadIdx.x < 32) publish_record(record, true, threadIdx.x < RECORD_WORDS ? words[threadIdx.x] : 0, epoch);
}

#endif  // SPARSEGPU_MATRIX_STATS_SUMMARY_CUH
