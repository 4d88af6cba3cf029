// SELL-C-sigma SpMV, y = alpha * A x + beta * y. Rows are permuted (sorted by length inside
// windows of sigma rows) and cut into slices of C consecutive permuted rows; slice s is an ELL
// block of C rows and width (slice_ptr[s + 1] - slice_ptr[s]) / C, stored column-major from
// slice_ptr[s] (slot k of lane l at slice_ptr[s] + k * C + l), padding marked by column -1.
//
// One kernel, sell_spmv<V, I, C, MODE>, in two modes the host picks from the layout:
//
// SELL_DIRECT (no split slices, no hot columns: stencils, meshes, any matrix without long rows)
// is the plain SELL kernel: one thread per permuted row, a grid covering the rows, the row summed
// by padded_row_sum (shared with ELL, kernels/spmv_ell.cu), y[perm[rank]] written directly. C = 32
// makes a slice one warp, whose loads per slot are 32 consecutive entries. Nothing else is read:
// the unit loop below costs regular matrices bandwidth (measured on an H200, see
// docs/performance.md).
//
// SELL_UNITS and SELL_UNITS_HOT (the layout has split slices or hot columns: power-law graphs).
// One wave of resident blocks (sized by the host, sparsegpu/formats/sell.py) takes the units
// round after round, a group of C threads (a warp for C = 32) per unit, each thread a lane (one
// row): a whole slice, or, for a slice wider than `split`, one part of it (slots
// [part * split, part * split + split) of every lane). So a power-law hub row of 60,000 entries
// is summed by ~1,000 groups at once instead of one thread (which the whole product would wait
// for). The parts of split slices come first (units 0 .. n_split - 1, listed by split_slice /
// split_part, the widest work first), then every slice in order (units n_split ..), where the
// split ones are skipped. A whole slice's lane writes y[perm[rank]] directly. A part's lane
// writes its partial sum to partials[unit * C + lane], then takes a ticket for its row
// (tickets[(first part's unit) * C + lane], integer atomics); the lane that takes the last
// ticket adds the row's partials in part order and writes y, and sets the ticket back to 0 for
// the next product.
//
// Hot columns (SELL_UNITS_HOT): the n_hot most gathered columns of x (chosen at conversion) are
// staged in shared memory by each block at its start; their entries are stored as column -2 - j
// (j the staged position), so those gathers are served from shared memory instead of L2 sectors
// of 32 bytes per 8-byte value. The blocks are one resident wave that takes units round after
// round, so staging is paid once per block.
// Those blocks have SELL_HOT_BLOCK = 1024 threads, one per multiprocessor: the 2048 threads of an
// SM as four blocks of 256 would each stage the same columns, so one block holds four times as
// many (up to 192 KiB; on an R-MAT graph four times the columns serve about twice the gathers).
// With many hot columns the host first gathers them into one array (sell_stage_hot,
// `hot_values`), so each block copies them with coalesced loads instead of a 32-byte sector per
// value; with few, each block gathers them itself (hot_values null) and the product stays one
// launch.
//
// Every sum, in every mode, has a fixed order: bitwise reproducible run to run, no float atomics.
#include "spmv_ell.cu"

inline constexpr int SELL_BLOCK = 256;  // a multiple of every C, so no group straddles two blocks
inline constexpr int SELL_HOT_BLOCK = 1024;  // SELL_UNITS_HOT's block (see above)
inline constexpr int SELL_PAD = -1;  // a padding slot's column
// sell_spmv's MODE (the host's SELL_DIRECT, SELL_UNITS, SELL_UNITS_HOT in sparsegpu/formats/sell.py).
inline constexpr int SELL_DIRECT = 0;
inline constexpr int SELL_UNITS = 1;
inline constexpr int SELL_UNITS_HOT = 2;
// Threads per block of mode MODE.
__host__ __device__ constexpr int sell_block(int mode) { return mode == SELL_UNITS_HOT ? SELL_HOT_BLOCK : SELL_BLOCK; }

// Sum of data[k * C] * x[col[k * C]] over one lane's slots k0 <= k < k1 (indices and data
// already point at the lane's slot 0), stopping at its first padding slot (padding trails a
// lane's entries). Without HOT, padded_row_sum itself. With HOT, column -2 - j reads hot_x[j]
// (shared memory), which padded_row_sum would take for padding: the same loop, that gather aside.
inline constexpr int HOT_UNROLL = 8;
template <class V, class I, int C, bool HOT>
__device__ __forceinline__ V sell_lane_sum(const I* __restrict__ indices, const V* __restrict__ data,
                                           const V* __restrict__ x, const V* hot_x, long long k0, long long k1) {
    if constexpr (!HOT) {
        return padded_row_sum(indices, data, x, k0 * C, (long long)C, k1 - k0);
    } else {
        const unsigned long long read_once = sg::l2_evict_first();  // as padded_row_sum
        V sum = V(0);
        for (long long k = k0; k < k1; k += HOT_UNROLL) {
            I col[HOT_UNROLL];
#pragma unroll
            for (int u = 0; u < HOT_UNROLL; ++u)
                col[u] = k + u < k1 ? sg::load_hint(indices + (k + u) * C, read_once) : I(SELL_PAD);
#pragma unroll
            for (int u = 0; u < HOT_UNROLL; ++u) {
                if (col[u] == I(SELL_PAD)) continue;
                const V xv = col[u] >= 0 ? sg::ldg(x + col[u]) : hot_x[-2 - (long long)col[u]];
                sum = sum + sg::load_hint(data + (k + u) * C, read_once) * xv;
            }
            if (col[HOT_UNROLL - 1] == I(SELL_PAD)) break;  // the lane's padding has begun (or its slots ended)
        }
        return sum;
    }
}

// The last of a row's parts to finish: the row's partial sums added in part order. The ticket
// is left at 0 for the next product. The loads of PARTS_IN_FLIGHT partials are issued before
// their additions (a hub row has hundreds of parts; one load per L2 round trip would serialise
// them), and the additions keep part order, so the bits are the same.
inline constexpr int PARTS_IN_FLIGHT = 8;
template <class V>
__device__ __forceinline__ V sell_parts_total(const V* partials, unsigned int* ticket, long long parts, int C) {
    __threadfence();  // the other parts' partials, published before their tickets, are seen
    V sum = V(0);
    for (long long p = 0; p < parts; p += PARTS_IN_FLIGHT) {
        V loaded[PARTS_IN_FLIGHT];
#pragma unroll
        for (int u = 0; u < PARTS_IN_FLIGHT; ++u) loaded[u] = p + u < parts ? sg::ldcg(partials + (p + u) * C) : V(0);
#pragma unroll
        for (int u = 0; u < PARTS_IN_FLIGHT; ++u)
            if (p + u < parts) sum = sum + loaded[u];
    }
    *ticket = 0u;
    return sum;
}

// SELL_DIRECT: the thread of permuted row `rank` (the grid covers the rows).
template <class V, class I, int C>
__device__ __forceinline__ void sell_direct(const long long* __restrict__ slice_ptr, const I* __restrict__ indices,
                                            const V* __restrict__ data, const I* __restrict__ perm,
                                            const long long n_rows, const V* __restrict__ x, V* __restrict__ y,
                                            const V alpha, const V beta) {
    const long long rank = (long long)blockIdx.x * SELL_BLOCK + threadIdx.x;
    if (rank >= n_rows) return;  // the last slice's padding rows
    const long long slice = rank / C;
    const long long begin = sg::ldg(slice_ptr + slice);
    const long long width = (sg::ldg(slice_ptr + slice + 1) - begin) / C;
    const V sum = padded_row_sum(indices, data, x, begin + rank % C, (long long)C, width);
    const I row = sg::ldg(perm + rank);
    y[row] = sg::axpby(alpha, sum, beta, y + row);
}

// SELL_UNITS / SELL_UNITS_HOT: the group's units, round after round.
template <class V, class I, int C, bool HOT, int BLOCK>
__device__ __forceinline__ void sell_units(const long long* __restrict__ slice_ptr, const I* __restrict__ indices,
                                           const V* __restrict__ data, const I* __restrict__ perm,
                                           const I* __restrict__ split_slice, const I* __restrict__ split_part,
                                           const long long n_split, const long long split,
                                           const I* __restrict__ hot_cols, const long long n_hot,
                                           const V* __restrict__ hot_values, const long long n_slices, const long long n_rows,
                                           const V* __restrict__ x, V* __restrict__ y, const V alpha, const V beta,
                                           V* partials, unsigned int* tickets) {
    extern __shared__ __align__(16) unsigned char sell_shared[];
    V* hot_x = reinterpret_cast<V*>(sell_shared);
    if (HOT && hot_values != nullptr) {
#pragma unroll 8
        for (long long j = threadIdx.x; j < n_hot; j += BLOCK) hot_x[j] = sg::ldg(hot_values + j);
        __syncthreads();
    } else if (HOT) {
        // STAGE_IN_FLIGHT columns per thread per round, their loads issued together: every block
        // stages at once when the product starts, so this is latency, not bandwidth.
        constexpr int STAGE_IN_FLIGHT = 8;
        for (long long j0 = threadIdx.x; j0 < n_hot; j0 += (long long)BLOCK * STAGE_IN_FLIGHT) {
            I col[STAGE_IN_FLIGHT];
            V value[STAGE_IN_FLIGHT];
#pragma unroll
            for (int u = 0; u < STAGE_IN_FLIGHT; ++u) {
                const long long j = j0 + (long long)u * BLOCK;
                col[u] = j < n_hot ? sg::ldg(hot_cols + j) : I(0);
            }
#pragma unroll
            for (int u = 0; u < STAGE_IN_FLIGHT; ++u) value[u] = sg::ldg(x + col[u]);
#pragma unroll
            for (int u = 0; u < STAGE_IN_FLIGHT; ++u) {
                const long long j = j0 + (long long)u * BLOCK;
                if (j < n_hot) hot_x[j] = value[u];
            }
        }
        __syncthreads();
    }
    constexpr int GROUPS = BLOCK / C;
    const int lane = threadIdx.x % C;
    const long long n_units = n_split + n_slices;
    // Rounds of one unit per group, in snake order (group g takes unit g of even rounds and unit
    // groups - 1 - g of odd ones): the units come widest first (parts, then slices sorted by
    // length), so every group's total evens out, as in a greedy longest-first schedule. No atomic
    // counter hands out units: one counter for every warp is slower (measured on an H200, see
    // docs/performance.md).
    const long long groups = (long long)gridDim.x * GROUPS, group = (long long)blockIdx.x * GROUPS + threadIdx.x / C;
    bool forward = true;
    for (long long round = 0; round < n_units; round += groups, forward = !forward) {
        const long long unit = round + (forward ? group : groups - 1 - group);
        if (unit >= n_units) continue;  // the last round's missing units
        const bool is_part = unit < n_split;
        const long long slice = is_part ? (long long)sg::ldg(split_slice + unit) : unit - n_split;
        const long long part = is_part ? (long long)sg::ldg(split_part + unit) : 0;
        const long long begin = sg::ldg(slice_ptr + slice) + lane;
        const long long width = (sg::ldg(slice_ptr + slice + 1) - sg::ldg(slice_ptr + slice)) / C;
        if (!is_part && width > split) continue;  // summed by its parts
        const long long rank = slice * C + lane;
        if (rank >= n_rows) continue;  // the last slice's padding lanes
        const long long k0 = is_part ? part * split : 0;
        const long long k1 = is_part && k0 + split < width ? k0 + split : width;
        V sum = sell_lane_sum<V, I, C, HOT>(indices + begin, data + begin, x, hot_x, k0, k1);
        if (is_part) {
            const long long parts = (width + split - 1) / split;
            const long long first = (unit - part) * C + lane;  // the row's first part's entries
            partials[unit * C + lane] = sum;
            __threadfence();  // the partial is visible before the ticket is taken
            if (atomicAdd(tickets + first, 1u) != (unsigned int)(parts - 1)) continue;
            sum = sell_parts_total(partials + first, tickets + first, parts, C);
        }
        const I row = sg::ldg(perm + rank);
        y[row] = sg::axpby(alpha, sum, beta, y + row);
    }
}

// One argument list for every mode; SELL_DIRECT reads only slice_ptr, indices, data, perm,
// n_rows, x, y, alpha and beta. `split`: the widest whole slice (LLONG_MAX when nothing is
// split). `partials` and `tickets`: n_split * C entries each (null when n_split is 0), tickets
// zero at launch (left zero). The dynamic shared memory holds n_hot values with SELL_UNITS_HOT,
// staged from `hot_values` (x[hot_cols], by sell_stage_hot) when not null, else from x.
template <class V, class I, int C, int MODE>
__global__ void __launch_bounds__(sell_block(MODE))
sell_spmv(const long long* __restrict__ slice_ptr, const I* __restrict__ indices, const V* __restrict__ data,
          const I* __restrict__ perm, const I* __restrict__ split_slice, const I* __restrict__ split_part,
          const long long n_split, const long long split, const I* __restrict__ hot_cols, const long long n_hot,
          const V* __restrict__ hot_values,
          const long long n_slices, const long long n_rows, const V* __restrict__ x, V* __restrict__ y,
          const V alpha, const V beta, V* partials, unsigned int* tickets) {
    static_assert(SELL_BLOCK % C == 0 && SELL_HOT_BLOCK % C == 0, "C must divide the block");
    static_assert(MODE == SELL_DIRECT || MODE == SELL_UNITS || MODE == SELL_UNITS_HOT, "unknown SELL mode");
    if constexpr (MODE == SELL_DIRECT)
        sell_direct<V, I, C>(slice_ptr, indices, data, perm, n_rows, x, y, alpha, beta);
    else
        sell_units<V, I, C, MODE == SELL_UNITS_HOT, sell_block(MODE)>(
            slice_ptr, indices, data, perm, split_slice, split_part, n_split, split, hot_cols, n_hot, hot_values,
            n_slices, n_rows,
            x, y, alpha, beta, partials, tickets);
}

// Semiring form of SELL_DIRECT (layouts with split slices or hot columns run semiring products
// through their CSR instead): y[perm[rank]] = the row's fold (padded_row_sum over S), for rows
// the mask allows (others untouched).
template <class V, class I, int C, class S>
__global__ void __launch_bounds__(SELL_BLOCK)
sell_semiring_direct(const long long* __restrict__ slice_ptr, const I* __restrict__ indices,
                     const V* __restrict__ data, const I* __restrict__ perm, const long long n_rows,
                     const V* __restrict__ x, V* __restrict__ y, const unsigned char* __restrict__ mask,
                     const int complement) {
    const long long rank = (long long)blockIdx.x * SELL_BLOCK + threadIdx.x;
    if (rank >= n_rows) return;  // the last slice's padding rows
    const I row = sg::ldg(perm + rank);
    if (!sg::mask_allows(mask, complement, row)) return;
    const long long slice = rank / C;
    const long long begin = sg::ldg(slice_ptr + slice);
    const long long width = (sg::ldg(slice_ptr + slice + 1) - begin) / C;
    y[row] = padded_row_sum<V, I, S>(indices, data, x, begin + rank % C, (long long)C, width);
}

// hot_values[j] = x[hot_cols[j]], a thread per staged column: the contiguous copy that products
// with many hot columns stage from.
template <class V, class I>
__global__ void __launch_bounds__(SELL_BLOCK)
sell_stage_hot(const V* __restrict__ x, const I* __restrict__ hot_cols, const long long n_hot, V* __restrict__ hot_values) {
    const long long j = (long long)blockIdx.x * SELL_BLOCK + threadIdx.x;
    if (j < n_hot) hot_values[j] = sg::ldg(x + sg::ldg(hot_cols + j));
}

// What sigma = SELL_BLOCK would cost, without building that layout: out[0] += the slots of
// the rows sorted by length inside windows of SELL_BLOCK rows and cut into slices of C (C
// divides SELL_BLOCK), out[1] = max(out[1], the longest row). A block per window sorts its
// lengths, longest first (rows past n_rows count -1 and sort last), with a bitonic network whose
// exchanges within a warp are shuffles (30 of its 36 steps) and the others go through shared
// memory; a slice is as wide as its first row, so rank r adds C times its length when C divides
// r. Integer atomics, one pair per block: exact, the same every run.
template <class I>
__global__ void __launch_bounds__(SELL_BLOCK)
sell_window_slots(const I* __restrict__ indptr, const long long n_rows, const long long C,
                  unsigned long long* __restrict__ out) {
    __shared__ long long exchange[SELL_BLOCK];
    __shared__ unsigned long long warp_slots[SELL_BLOCK / 32];
    const int t = threadIdx.x;
    const long long row = (long long)blockIdx.x * SELL_BLOCK + t;
    long long length = row < n_rows ? (long long)sg::ldg(indptr + row + 1) - (long long)sg::ldg(indptr + row) : -1;
    for (int size = 2; size <= SELL_BLOCK; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            long long other;
            if (stride >= 32) {
                exchange[t] = length;
                __syncthreads();
                other = exchange[t ^ stride];
                __syncthreads();
            } else {
                other = __shfl_xor_sync(0xffffffffu, length, stride);
            }
            // The pair's lower thread keeps the longer length in runs sorted longest first
            // ((t & size) == 0, every run of the last merge), the shorter in the others.
            const bool keeps_longer = ((t & stride) == 0) == ((t & size) == 0);
            length = keeps_longer == (other > length) ? other : length;
        }
    }
    unsigned long long slots = t % C == 0 && length > 0 ? (unsigned long long)(length * C) : 0;
    for (int delta = 16; delta > 0; delta >>= 1) slots += __shfl_down_sync(0xffffffffu, slots, delta);
    if (t % 32 == 0) warp_slots[t / 32] = slots;
    __syncthreads();
    if (t == 0) {
        for (int w = 1; w < SELL_BLOCK / 32; ++w) slots += warp_slots[w];
        atomicAdd(out, slots);
        if (length > 0) atomicMax(out + 1, (unsigned long long)length);
    }
}

// Slice widths times C, from the rows in rank order (perm sorted by length, longest first, inside
// windows of sigma ranks): the longest row of slice s is at its first rank or at the start of a
// window inside it, so a thread per slice reads 1 + C / sigma lengths. widths has n_slices + 1
// entries, the last 0, so its exclusive scan is slice_ptr.
template <class I>
__global__ void __launch_bounds__(SELL_BLOCK)
sell_slice_widths(const I* __restrict__ indptr, const I* __restrict__ perm, const long long n_rows,
                  const long long C, const long long sigma, const long long n_slices, long long* __restrict__ widths) {
    const long long slice = (long long)blockIdx.x * SELL_BLOCK + threadIdx.x;
    if (slice > n_slices) return;
    long long width = 0;
    if (slice < n_slices) {
        const long long first = slice * C, end = first + C < n_rows ? first + C : n_rows;
        for (long long rank = first; rank < end; rank = (rank / sigma + 1) * sigma) {
            const long long row = (long long)sg::ldg(perm + rank);
            const long long length = (long long)sg::ldg(indptr + row + 1) - (long long)sg::ldg(indptr + row);
            width = length > width ? length : width;
        }
    }
    widths[slice] = width * C;
}

// parts[s] = the parts of slice s when it is wider than `split` slots (ceil(width / split)),
// else 0; parts[n_slices] = 0, so the exclusive scan of parts lists every part's unit.
template <class I>
__global__ void __launch_bounds__(SELL_BLOCK)
sell_part_counts(const long long* __restrict__ slice_ptr, const long long n_slices, const long long C,
                 const long long split, I* __restrict__ parts) {
    const long long slice = (long long)blockIdx.x * SELL_BLOCK + threadIdx.x;
    if (slice > n_slices) return;
    long long count = 0;
    if (slice < n_slices) {
        const long long width = (sg::ldg(slice_ptr + slice + 1) - sg::ldg(slice_ptr + slice)) / C;
        count = width > split ? (width + split - 1) / split : 0;
    }
    parts[slice] = (I)count;
}

// The staged columns: column c is staged when counts[c] >= threshold and fewer than n_hot
// columns before it are (first[c], the exclusive scan of counts >= threshold); then
// hot_cols[first[c]] = c and hot_slot[c] = first[c], else hot_slot[c] = -1. A thread per column.
template <class I>
__global__ void __launch_bounds__(SELL_BLOCK)
sell_select_hot(const long long* __restrict__ counts, const I* __restrict__ first, const long long n_cols,
                const long long threshold, const long long n_hot, I* __restrict__ hot_cols, I* __restrict__ hot_slot) {
    const long long col = (long long)blockIdx.x * SELL_BLOCK + threadIdx.x;
    if (col >= n_cols) return;
    const I position = sg::ldg(first + col);
    const bool staged = sg::ldg(counts + col) >= threshold && position < n_hot;
    hot_slot[col] = staged ? position : I(-1);
    if (staged) hot_cols[position] = (I)col;
}

// The part list: slice s wider than `split` slots has ceil(width / split) parts, listed from
// unit_first[s] (the exclusive scan of the part counts) as (split_slice, split_part) = (s, 0),
// (s, 1), ... One thread per slice.
template <class I>
__global__ void __launch_bounds__(SELL_BLOCK)
sell_split_units(const long long* __restrict__ slice_ptr, const I* __restrict__ unit_first,
                 const long long n_slices, const long long C, const long long split, I* __restrict__ split_slice,
                 I* __restrict__ split_part) {
    const long long slice = (long long)blockIdx.x * SELL_BLOCK + threadIdx.x;
    if (slice >= n_slices) return;
    const long long width = (sg::ldg(slice_ptr + slice + 1) - sg::ldg(slice_ptr + slice)) / C;
    if (width <= split) return;
    const long long first = sg::ldg(unit_first + slice);
    const long long parts = (width + split - 1) / split;
    for (long long p = 0; p < parts; ++p) {
        split_slice[first + p] = (I)slice;
        split_part[first + p] = (I)p;
    }
}

// The slots of the layout from a CSR, over the same units as the product (a thread per lane of
// each whole slice or part), so a hub row is copied by its parts' threads, not by one thread.
// Each thread writes its lane's slots [k0, k1): the row's entries k (column c stored as
// -2 - hot_slot[c] when hot_slot is non-null and hot_slot[c] >= 0), then padding (column -1,
// value 0). Every slot is written once, so the outputs need no initialisation. The host uses it
// when the layout has parts or hot columns; otherwise csr_to_slots (LAYOUT_SELL, spmv_ell.cu)
// writes the same slots.
// A thread copies FILL_UNROLL slots a round, their loads issued together: its row's entries
// share sectors that a load at a time would fetch again once the SM's other 2047 threads have
// pushed them out of L1, and the hot_slot gathers of a round overlap.
inline constexpr int FILL_UNROLL = 8;
template <class V, class I>
__global__ void __launch_bounds__(SELL_BLOCK)
sell_fill_slots(const I* __restrict__ indptr, const I* __restrict__ indices, const V* __restrict__ data,
                const I* __restrict__ perm, const I* __restrict__ hot_slot, const long long* __restrict__ slice_ptr,
                const I* __restrict__ split_slice, const I* __restrict__ split_part, const long long n_split,
                const long long split, const long long n_slices, const long long n_rows, const long long C,
                I* __restrict__ out_indices, V* __restrict__ out_data) {
    const long long thread = (long long)blockIdx.x * SELL_BLOCK + threadIdx.x;
    const long long unit = thread / C, lane = thread % C;
    if (unit >= n_split + n_slices) return;
    const bool is_part = unit < n_split;
    const long long slice = is_part ? (long long)sg::ldg(split_slice + unit) : unit - n_split;
    const long long begin = sg::ldg(slice_ptr + slice) + lane;
    const long long width = (sg::ldg(slice_ptr + slice + 1) - sg::ldg(slice_ptr + slice)) / C;
    if (!is_part && width > split) return;  // copied by its parts
    const long long k0 = is_part ? (long long)sg::ldg(split_part + unit) * split : 0;
    const long long k1 = is_part && k0 + split < width ? k0 + split : width;
    const long long rank = slice * C + lane;
    long long first = 0, length = 0;
    if (rank < n_rows) {
        const I row = sg::ldg(perm + rank);
        first = sg::ldg(indptr + row);
        length = sg::ldg(indptr + row + 1) - first;
    }
    for (long long k = k0; k < k1; k += FILL_UNROLL) {
        I col[FILL_UNROLL];
        V value[FILL_UNROLL];
#pragma unroll
        for (int u = 0; u < FILL_UNROLL; ++u) {
            const bool stored = k + u < length;
            col[u] = stored ? sg::ldg(indices + first + k + u) : I(SELL_PAD);
            value[u] = stored ? sg::ldg(data + first + k + u) : V(0);
        }
        if (hot_slot != nullptr) {
#pragma unroll
            for (int u = 0; u < FILL_UNROLL; ++u) {
                if (col[u] != I(SELL_PAD)) {
                    const I staged = sg::ldg(hot_slot + col[u]);
                    if (staged >= 0) col[u] = I(-2) - staged;
                }
            }
        }
#pragma unroll
        for (int u = 0; u < FILL_UNROLL; ++u) {
            if (k + u < k1) {
                out_indices[begin + (k + u) * C] = col[u];
                out_data[begin + (k + u) * C] = value[u];
            }
        }
    }
}
