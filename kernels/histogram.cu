// Histogram: counts[b] = number of values v with edges[b] <= v < edges[b + 1] (the last bin also
// takes v == edges[bins]). Values below edges[0], above edges[bins], or NaN are dropped. This is
// np.histogram's definition. Three ways to find a value's bin (EDGES):
//   UNIFORM_EDGES: equal-width bins over [lo, hi] (norm = bins / (hi - lo)); values compared as
//     doubles. The bin is estimated as (v - lo) * norm and corrected by one comparison with each
//     neighbouring edge, as NumPy does, so the result follows np.linspace's edges exactly.
//   ARRAY_EDGES: any non-decreasing edges; binary search, values compared as doubles.
//   INTEGER_EDGES: integer values, integer lo and integer bin width (edges exact in doubles):
//     b = (v - lo) / width in integer arithmetic, the same bins with no floating point at all
//     (32-bit arithmetic for int32 values whenever lo, the width and the bin count allow).
//
// Where the counts live (COUNTS), chosen by the caller from the bin count:
//   LANE_COLUMNS (few bins, e.g. 256): one block-wide table of 32-bit counters with a column per
//     lane, counter (b, lane) at b * 32 + lane. A lane always adds in its own bank, so a warp's
//     32 increments never meet in a bank whatever the keys: random keys and all-equal keys cost
//     the same (equal keys from different warps land on one address in different instructions,
//     which the atomic unit takes in turn). At the end, one thread per bin adds its 32 columns
//     (read in a rotated order: no bank conflicts) to the global 64-bit count.
//   WARP_REPLICAS (more bins, still in shared memory): `replicas` private tables, warp w adding
//     to table w % replicas, merged the same way.
//   GLOBAL_COUNTS (bins that do not fit in shared memory): values add to the global counts
//     directly, lanes of a warp with the same bin adding together (one atomic per group).
// Shared-memory tables sit next to a copy of the edges when they are an array. Values stream
// in with 16-byte loads, HIST_VECS per thread in flight, over a grid of a few blocks per SM.
// All counting uses integer atomics: exact, so the result is reproducible.
#include "common.cuh"

inline constexpr int HIST_BLOCK = 256;
inline constexpr int HIST_VECS = 8;
inline constexpr int UNIFORM_EDGES = 0, ARRAY_EDGES = 1, INTEGER_EDGES = 2;
inline constexpr int GLOBAL_COUNTS = 0, WARP_REPLICAS = 1, LANE_COLUMNS = 2;

// Bin edges, either equal-width (edge i = i * step + lo, the last one hi: np.linspace's values,
// rounded the same way, so no array is needed) or read from an array (global or shared memory).
struct UniformEdges {
    double lo, hi, step, norm;
    long long bins;
    __device__ __forceinline__ double operator[](long long i) const {
        // __dmul_rn / __dadd_rn: no fused multiply-add, to round as NumPy does.
        return i == bins ? hi : __dadd_rn(__dmul_rn((double)i, step), lo);
    }
    // NumPy's estimate, corrected below by comparing with the neighbouring edges.
    __device__ __forceinline__ long long guess(double v) const { return (long long)((v - lo) * norm); }
};
struct ArrayEdges {
    const double* edges;
    long long bins;
    __device__ __forceinline__ double operator[](long long i) const { return edges[i]; }
    // The last edge e with edges[e] <= v (binary search); v == edges[bins] joins the last bin below.
    __device__ __forceinline__ long long guess(double v) const {
        long long low = 0, high = bins;  // edges[low] <= v holds; search (low, high]
        while (low < high) {
            const long long mid = (low + high + 1) / 2;
            if (edges[mid] <= v) low = mid;
            else high = mid - 1;
        }
        return low;
    }
};

// The bin of v, or -1 when v is out of range or NaN.
template <class Edges> __device__ __forceinline__ long long bin_of(double v, const Edges& edges) {
    const long long bins = edges.bins;
    if (!(v >= edges[0] && v <= edges[bins])) return -1;
    long long b = edges.guess(v);
    if (b >= bins) b = bins - 1;
    if (b < 0) b = 0;
    if (v < edges[b]) --b;
    else if (b != bins - 1 && v >= edges[b + 1]) ++b;
    return b;
}

template <class V> struct is_int32 { static constexpr bool value = false; };
template <> struct is_int32<int> { static constexpr bool value = true; };

// Equal-width integer bins: [lo + b * width, lo + (b + 1) * width), the last one closed.
struct IntegerEdges {
    long long lo, hi, width, bins;
    // int32 values with lo in int32 and a 32-bit width and bin count: v is in range exactly when
    // the unsigned 32-bit difference v - lo is at most min(hi, INT_MAX) - lo (a value below lo
    // wraps above that, since every int32 is below 2^32 + INT_MIN).
    bool narrow;
    unsigned lo32, span32, width32, bins32;
    __device__ IntegerEdges(long long lo_, long long hi_, long long width_, long long bins_)
        : lo(lo_), hi(hi_), width(width_), bins(bins_) {
        const long long int_min = -2147483647LL - 1, int_max = 2147483647LL;
        narrow = lo >= int_min && lo <= int_max && width <= 0xffffffffLL && bins <= 0xffffffffLL;
        lo32 = (unsigned)lo;
        span32 = (unsigned)((hi < int_max ? hi : int_max) - lo);
        width32 = (unsigned)width;
        bins32 = (unsigned)bins;
    }
    template <class V> __device__ __forceinline__ long long bin(V value) const {
        if constexpr (is_int32<V>::value) {
            if (narrow) {  // uniform branch
                const unsigned d = (unsigned)value - lo32;
                if (d > span32) return -1;
                const unsigned b = width32 == 1 ? d : d / width32;
                return b < bins32 ? (long long)b : (long long)bins32 - 1;
            }
        }
        const long long v = (long long)value;
        if (v < lo || v > hi) return -1;
        const long long b = width == 1 ? v - lo : (v - lo) / width;  // uniform branch: no divergence
        return b < bins ? b : bins - 1;
    }
};

template <int EDGES, class V, class Array>
__device__ __forceinline__ long long bin_index(V value, const UniformEdges& uniform, const Array& array,
                                               const IntegerEdges& integer) {
    if constexpr (EDGES == INTEGER_EDGES) return integer.bin(value);
    else if constexpr (EDGES == UNIFORM_EDGES) return bin_of((double)value, uniform);
    else return bin_of((double)value, array);
}

template <class V, int EDGES, int COUNTS>
__global__ void __launch_bounds__(HIST_BLOCK)
histogram_counts(const V* __restrict__ values, const long long n, const double* __restrict__ edge_array,
                 const long long bins, const double lo, const double hi, const double step, const double norm,
                 const long long lo_int, const long long hi_int, const long long width_int,
                 const int replicas, unsigned long long* __restrict__ counts) {
    const UniformEdges uniform{lo, hi, step, norm, bins};
    const IntegerEdges integer(lo_int, hi_int, width_int, bins);
    const int lane = threadIdx.x % 32;
    if constexpr (COUNTS == GLOBAL_COUNTS) {
        const ArrayEdges from_global{edge_array, bins};
        sg::for_each_strided<HIST_VECS>(values, n, [&](V value) {
            const long long b = bin_index<EDGES>(value, uniform, from_global, integer);
            // Lanes with the same bin add together (sorted keys, equal keys): one atomic per group.
            const unsigned peers = __match_any_sync(__activemask(), b);
            if (b >= 0 && lane == __ffs(peers) - 1) atomicAdd(counts + b, (unsigned long long)__popc(peers));
        });
    } else {
        // Layout: [edges (bins + 1 doubles), for ARRAY_EDGES only][32-bit counters].
        extern __shared__ double shared[];
        const int n_edges = EDGES == ARRAY_EDGES ? (int)bins + 1 : 0;
        const int table = (int)bins;  // bins fit in shared memory here: int indices
        const int n_counters = COUNTS == LANE_COLUMNS ? table * 32 : table * replicas;
        unsigned int* shared_counts = reinterpret_cast<unsigned int*>(shared + n_edges);
        for (int i = threadIdx.x; i < n_edges; i += HIST_BLOCK) shared[i] = edge_array[i];
        for (int i = threadIdx.x; i < n_counters; i += HIST_BLOCK) shared_counts[i] = 0u;
        __syncthreads();
        const ArrayEdges from_shared{shared, bins};
        if constexpr (COUNTS == LANE_COLUMNS) {
            unsigned int* const column = shared_counts + lane;
            sg::for_each_strided<HIST_VECS>(values, n, [&](V value) {
                const long long b = bin_index<EDGES>(value, uniform, from_shared, integer);
                if (b >= 0) atomicAdd(column + (int)b * 32, 1u);
            });
        } else {
            unsigned int* const mine = shared_counts + ((threadIdx.x / 32) % replicas) * table;
            sg::for_each_strided<HIST_VECS>(values, n, [&](V value) {
                const long long b = bin_index<EDGES>(value, uniform, from_shared, integer);
                if (b >= 0) atomicAdd(mine + (int)b, 1u);
            });
        }
        __syncthreads();
        for (int b = threadIdx.x; b < table; b += HIST_BLOCK) {
            unsigned long long total = 0;
            if constexpr (COUNTS == LANE_COLUMNS) {
                // Column (l + b) % 32 first: the 32 threads of a warp read 32 different banks.
                for (int l = 0; l < 32; ++l) total += shared_counts[b * 32 + ((l + b) & 31)];
            } else {
                for (int r = 0; r < replicas; ++r) total += shared_counts[r * table + b];
            }
            if (total) atomicAdd(counts + b, total);
        }
    }
}
