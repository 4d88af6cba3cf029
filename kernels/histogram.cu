// Histogram: counts[b] = number of values v with edges[b] <= v < edges[b + 1] (the last bin also
// takes v == edges[bins]). Values below edges[0], above edges[bins], or NaN are dropped. This is
// np.histogram's definition. Three ways to find a value's bin (EDGES):
//   UNIFORM_EDGES: equal-width bins over [lo, hi] (norm = bins / (hi - lo)); values compared as
//     doubles. The bin is estimated as (v - lo) * norm and corrected by one comparison with each
//     neighbouring edge, as NumPy does, so the result follows np.linspace's edges exactly.
//   ARRAY_EDGES: any non-decreasing edges; binary search, values compared as doubles.
//   INTEGER_EDGES: integer values, integer lo and integer bin width (edges exact in doubles):
//     b = (v - lo) / width in integer arithmetic, the same bins with no floating point at all.
//
// SHARED: each block keeps `replicas` private histograms of 32-bit counters in shared memory
// (warp w adds to replica w % replicas, which spreads the collisions of equal keys), next to a
// copy of the edges when they are an array; at the end it adds its totals to the global 64-bit
// counts, once per bin. When the bins do not fit in shared memory, values add to the global
// counts directly, lanes of a warp with the same bin adding together. All counting uses integer
// atomics: exact, so the result is reproducible.
#include "common.cuh"

constexpr int HIST_BLOCK = 256;
constexpr int HIST_VECS = 4;
constexpr int UNIFORM_EDGES = 0, ARRAY_EDGES = 1, INTEGER_EDGES = 2;

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

// Equal-width integer bins: [lo + b * width, lo + (b + 1) * width), the last one closed.
struct IntegerEdges {
    long long lo, hi, width, bins;
    template <class V> __device__ __forceinline__ long long bin(V value) const {
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

template <class V, int EDGES, bool SHARED>
__global__ void __launch_bounds__(HIST_BLOCK)
histogram_counts(const V* __restrict__ values, const long long n, const double* __restrict__ edge_array,
                 const long long bins, const double lo, const double hi, const double step, const double norm,
                 const long long lo_int, const long long hi_int, const long long width_int,
                 const int replicas, unsigned long long* __restrict__ counts) {
    const UniformEdges uniform{lo, hi, step, norm, bins};
    const IntegerEdges integer{lo_int, hi_int, width_int, bins};
    if (SHARED) {
        // Layout: [edges (bins + 1 doubles), for ARRAY_EDGES only][replicas * bins 32-bit counters].
        extern __shared__ double shared[];
        const long long n_edges = EDGES == ARRAY_EDGES ? bins + 1 : 0;
        unsigned int* shared_counts = reinterpret_cast<unsigned int*>(shared + n_edges);
        for (long long i = threadIdx.x; i < n_edges; i += HIST_BLOCK) shared[i] = edge_array[i];
        for (long long i = threadIdx.x; i < bins * replicas; i += HIST_BLOCK) shared_counts[i] = 0u;
        __syncthreads();
        unsigned int* mine = shared_counts + (long long)((threadIdx.x / 32) % replicas) * bins;
        const ArrayEdges from_shared{shared, bins};
        sg::for_each_strided<HIST_VECS>(values, n, [&](V value) {
            const long long b = bin_index<EDGES>(value, uniform, from_shared, integer);
            if (b >= 0) atomicAdd(mine + b, 1u);
        });
        __syncthreads();
        for (long long b = threadIdx.x; b < bins; b += HIST_BLOCK) {
            unsigned long long total = 0;
            for (int r = 0; r < replicas; ++r) total += shared_counts[(long long)r * bins + b];
            if (total) atomicAdd(counts + b, total);
        }
    } else {
        const ArrayEdges from_global{edge_array, bins};
        const int lane = threadIdx.x % 32;
        sg::for_each_strided<HIST_VECS>(values, n, [&](V value) {
            const long long b = bin_index<EDGES>(value, uniform, from_global, integer);
            // Lanes with the same bin add together (sorted keys, equal keys): one atomic per group.
            const unsigned peers = __match_any_sync(__activemask(), b);
            if (b >= 0 && lane == __ffs(peers) - 1) atomicAdd(counts + b, (unsigned long long)__popc(peers));
        });
    }
}
