// COO SpMV as a segmented reduction over rows: y[r] += alpha * sum of data[j] * x[col[j]] over
// the entries j of row r, into a y the caller has already scaled by beta. Entries are sorted by
// row (the COO class keeps them so).
//
// coo_reduce_tiles: one warp per tile of TILE consecutive entries. The warp walks its tile 32
// entries at a time with a segmented inclusive scan over shuffles (keys are sorted, so a lane
// adds its neighbour's value exactly when their keys match) and a carry between steps. Rows
// that start and end inside the tile are complete and written to y directly. The tile's first
// and last rows may continue in neighbouring tiles: their sums go out as carries
// (key, value) at 2*tile and 2*tile+1, a sorted list that the next launch of the same kernel
// (GATHER = false) reduces again, until one tile is left, which writes everything.
// Every sum has a fixed order, so results are bitwise reproducible run to run.
//
// coo_spmv_atomic: one thread per entry with atomic adds; faster, NOT reproducible. Used only
// when the `deterministic` option is off.
#include "common.cuh"

inline constexpr int TILE = 512;
inline constexpr int TILE_BLOCK = 256;

template <class V, class I, bool GATHER>
__global__ void __launch_bounds__(TILE_BLOCK)
coo_reduce_tiles(const I* __restrict__ keys, const I* __restrict__ cols, const V* __restrict__ vals,
                 const V* __restrict__ x, const long long n, V* __restrict__ y, const V alpha,
                 I* __restrict__ carry_keys, V* __restrict__ carry_vals, const long long n_tiles) {
    const long long tile = ((long long)blockIdx.x * TILE_BLOCK + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (tile >= n_tiles) return;  // warp-uniform exit
    const long long begin = tile * TILE;
    const long long end = begin + TILE < n ? begin + TILE : n;
    const bool single = n_tiles == 1;
    const I none = (I)-1;  // never a real key
    // In a single tile every row is complete: no head or tail rows to hold back.
    const I head_key = single ? none : keys[begin];
    const I tail_key = single ? none : keys[end - 1];
    V head = V(0), tail = V(0), carry = V(0);
    I carry_key = none;
    for (long long base = begin; base < end; base += 32) {
        const long long j = base + lane;
        const bool valid = j < end;
        const I key = valid ? keys[j] : none;
        V v = V(0);
        if (valid) v = GATHER ? sg::ldg(vals + j) * sg::ldg(x + sg::ldg(cols + j)) : vals[j];
        // The carried row ended exactly at the previous step's lane 31: finish it now.
        if (carry_key != none && carry_key != sg::shfl(key, 0)) {
            if (carry_key == head_key) head = carry;
            else if (carry_key == tail_key) tail = carry;
            else if (lane == 0) y[carry_key] = y[carry_key] + sg::scaled(alpha, carry);
            carry_key = none;
        }
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
            const V up = sg::shfl_up(v, d);
            const I up_key = sg::shfl_up(key, d);
            if (lane >= d && up_key == key) v = up + v;
        }
        if (key == carry_key) v = carry + v;
        const I next_key = sg::shfl_down(key, 1);
        // Lane 31's row may go on in the next step: it leaves as the carry instead.
        const bool row_ends = valid && lane < 31 && next_key != key;
        const unsigned head_lanes = __ballot_sync(sg::FULL_MASK, row_ends && key == head_key);
        const unsigned tail_lanes = __ballot_sync(sg::FULL_MASK, row_ends && key == tail_key && key != head_key);
        if (head_lanes) head = sg::shfl(v, __ffs(head_lanes) - 1);
        if (tail_lanes) tail = sg::shfl(v, __ffs(tail_lanes) - 1);
        if (row_ends && key != head_key && key != tail_key) y[key] = y[key] + sg::scaled(alpha, v);
        carry = sg::shfl(v, 31);
        carry_key = sg::shfl(key, 31);
    }
    // A carry left after the last step is the row that reaches the tile's end.
    if (carry_key != none) {
        if (carry_key == head_key) head = carry;
        else if (carry_key == tail_key) tail = carry;
        else if (lane == 0) y[carry_key] = y[carry_key] + sg::scaled(alpha, carry);
    }
    if (!single && lane == 0) {
        carry_keys[2 * tile] = head_key;
        carry_vals[2 * tile] = head;
        carry_keys[2 * tile + 1] = tail_key;
        carry_vals[2 * tile + 1] = head_key == tail_key ? V(0) : tail;
    }
}

template <class V, class I>
__global__ void coo_spmv_atomic(const I* __restrict__ rows, const I* __restrict__ cols, const V* __restrict__ data,
                                const V* __restrict__ x, const long long n, V* __restrict__ y, const V alpha) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) sg::atomic_add(y + rows[j], sg::scaled(alpha, sg::ldg(data + j) * sg::ldg(x + sg::ldg(cols + j))));
}
