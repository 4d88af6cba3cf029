// Shared device code: value and index traits, the complex type, read-only loads, warp shuffles,
// sub-warp and block reductions, atomics. No standard headers, so the same source compiles
// under NVRTC (through sparsegpu._kernels) and under nvcc (CI).
//
// Namespace-scope constants in kernels/ are `inline constexpr`: every .cu file is also included
// by other units (the instantiation units CI compiles, spmv_sell.cu includes spmv_ell.cu), and
// an inline constant has one definition across them, like a header's. Most are read only inside
// templates, which a unit that instantiates none leaves unreferenced.
#pragma once

namespace sg {

// ---------------------------------------------------------------- complex with numpy's layout
template <class T>
struct __align__(2 * sizeof(T)) complex {
    T re, im;
    __host__ __device__ complex(T r = T(0), T i = T(0)) : re(r), im(i) {}
    __device__ complex& operator+=(const complex& o) { re += o.re; im += o.im; return *this; }
};
template <class T> __device__ __forceinline__ complex<T> operator+(complex<T> a, complex<T> b) {
    return complex<T>(a.re + b.re, a.im + b.im);
}
template <class T> __device__ __forceinline__ complex<T> operator*(complex<T> a, complex<T> b) {
    return complex<T>(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
template <class T> __device__ __forceinline__ bool operator==(complex<T> a, complex<T> b) {
    return a.re == b.re && a.im == b.im;
}

template <class V> __device__ __forceinline__ bool is_zero(V v) { return v == V(0); }
// alpha * v, and v itself when alpha is one: a complex one times an infinite or NaN part would
// turn the other part to NaN, where SciPy's product (no alpha) keeps it.
template <class V> __device__ __forceinline__ V scaled(V alpha, V v) { return alpha == V(1) ? v : alpha * v; }

// ---------------------------------------------------------------- read-only (non-coherent) loads
// A complex value loads as one float2 / double2 vector.
template <class T> struct complex_vector;
template <> struct complex_vector<float> { using type = float2; };
template <> struct complex_vector<double> { using type = double2; };
template <class T, class Load>
__device__ __forceinline__ complex<T> load_complex(const complex<T>* p, Load load) {
    const auto v = load(reinterpret_cast<const typename complex_vector<T>::type*>(p));
    return complex<T>(v.x, v.y);
}

template <class V> __device__ __forceinline__ V ldg(const V* p) { return __ldg(p); }
template <class T> __device__ __forceinline__ complex<T> ldg(const complex<T>* p) {
    return load_complex(p, [](const auto* q) { return __ldg(q); });
}

// Loads cached in L2 only (not L1, which is not coherent across multiprocessors): for data other
// blocks of the same kernel wrote (after a fence and a ticket, as in sg::grid_sums).
template <class V> __device__ __forceinline__ V ldcg(const V* p) { return __ldcg(p); }
template <class T> __device__ __forceinline__ complex<T> ldcg(const complex<T>* p) {
    return load_complex(p, [](const auto* q) { return __ldcg(q); });
}

// ---------------------------------------------------------------- L2 eviction hints (sm_80+)
// A policy from l2_evict_first() / l2_evict_last() (one createpolicy instruction; make it once
// per thread) marks the lines a load_hint / store_hint touches: evict-first for data read once
// (it then does not push reused data out of L2), evict-last for data written piecemeal that
// should stay until complete (a scattered y). L1 behaves as for ldg. Before sm_80 the hints are
// dropped (plain ldg and stores).
__device__ __forceinline__ unsigned long long l2_evict_first() {
    unsigned long long policy = 0;
#if __CUDA_ARCH__ >= 800
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#endif
    return policy;
}
__device__ __forceinline__ unsigned long long l2_evict_last() {
    unsigned long long policy = 0;
#if __CUDA_ARCH__ >= 800
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
#endif
    return policy;
}
#if __CUDA_ARCH__ >= 800
#define SG_LOAD_HINT(T, PTX, C)                                                                       \
    __device__ __forceinline__ T load_hint(const T* p, unsigned long long policy) {                  \
        T v;                                                                                          \
        asm("ld.global.nc.L2::cache_hint." PTX " %0, [%1], %2;" : "=" C(v) : "l"(p), "l"(policy));   \
        return v;                                                                                     \
    }
#define SG_STORE_HINT(T, PTX, C)                                                                      \
    __device__ __forceinline__ void store_hint(T* p, T v, unsigned long long policy) {               \
        asm volatile("st.global.L2::cache_hint." PTX " [%0], %1, %2;" ::"l"(p), C(v), "l"(policy)     \
                     : "memory");                                                                     \
    }
#else
#define SG_LOAD_HINT(T, PTX, C) \
    __device__ __forceinline__ T load_hint(const T* p, unsigned long long) { return __ldg(p); }
#define SG_STORE_HINT(T, PTX, C) \
    __device__ __forceinline__ void store_hint(T* p, T v, unsigned long long) { *p = v; }
#endif
SG_LOAD_HINT(int, "s32", "r")
SG_LOAD_HINT(long long, "s64", "l")
SG_LOAD_HINT(float, "f32", "f")
SG_LOAD_HINT(double, "f64", "d")
SG_STORE_HINT(float, "f32", "f")
SG_STORE_HINT(double, "f64", "d")
#undef SG_LOAD_HINT
#undef SG_STORE_HINT
#if __CUDA_ARCH__ >= 800
#define SG_COMPLEX_HINTS(T, PTX, C)                                                                        \
    __device__ __forceinline__ complex<T> load_hint(const complex<T>* p, unsigned long long policy) {     \
        T re, im;                                                                                          \
        asm("ld.global.nc.L2::cache_hint.v2." PTX " {%0, %1}, [%2], %3;"                                   \
            : "=" C(re), "=" C(im) : "l"(p), "l"(policy));                                                 \
        return complex<T>(re, im);                                                                         \
    }                                                                                                      \
    __device__ __forceinline__ void store_hint(complex<T>* p, complex<T> v, unsigned long long policy) {  \
        asm volatile("st.global.L2::cache_hint.v2." PTX " [%0], {%1, %2}, %3;" ::"l"(p), C(v.re), C(v.im), \
                     "l"(policy) : "memory");                                                              \
    }
#else
#define SG_COMPLEX_HINTS(T, PTX, C)                                                                        \
    __device__ __forceinline__ complex<T> load_hint(const complex<T>* p, unsigned long long) {            \
        return ldg(p);                                                                                     \
    }                                                                                                      \
    __device__ __forceinline__ void store_hint(complex<T>* p, complex<T> v, unsigned long long) { *p = v; }
#endif
SG_COMPLEX_HINTS(float, "f32", "f")
SG_COMPLEX_HINTS(double, "f64", "d")
#undef SG_COMPLEX_HINTS

// ---------------------------------------------------------------- shuffles over any value type
inline constexpr unsigned FULL_MASK = 0xffffffffu;

template <class V> __device__ __forceinline__ V shfl_down(V v, int delta, int width = 32) {
    return __shfl_down_sync(FULL_MASK, v, delta, width);
}
template <class T> __device__ __forceinline__ complex<T> shfl_down(complex<T> v, int delta, int width = 32) {
    return complex<T>(__shfl_down_sync(FULL_MASK, v.re, delta, width),
                      __shfl_down_sync(FULL_MASK, v.im, delta, width));
}
template <class V> __device__ __forceinline__ V shfl_up(V v, int delta) {
    return __shfl_up_sync(FULL_MASK, v, delta);
}
template <class T> __device__ __forceinline__ complex<T> shfl_up(complex<T> v, int delta) {
    return complex<T>(__shfl_up_sync(FULL_MASK, v.re, delta), __shfl_up_sync(FULL_MASK, v.im, delta));
}
template <class V> __device__ __forceinline__ V shfl(V v, int lane) {
    return __shfl_sync(FULL_MASK, v, lane);
}
template <class T> __device__ __forceinline__ complex<T> shfl(complex<T> v, int lane) {
    return complex<T>(__shfl_sync(FULL_MASK, v.re, lane), __shfl_sync(FULL_MASK, v.im, lane));
}

// ---------------------------------------------------------------- reductions (fixed order)
// Sum over aligned groups of W lanes; lane 0 of each group gets the total. Every lane of the
// warp must call it (full-mask shuffles).
template <int W, class V> __device__ __forceinline__ V subwarp_sum(V v) {
#pragma unroll
    for (int offset = W / 2; offset > 0; offset /= 2) v = v + shfl_down(v, offset, W);
    return v;
}

// Block-wide sum; thread 0 gets the total. `scratch` holds BLOCK / 32 values.
template <int BLOCK, class V> __device__ __forceinline__ V block_sum(V v, V* scratch) {
    v = subwarp_sum<32>(v);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = (threadIdx.x < BLOCK / 32) ? scratch[threadIdx.x] : V(0);
    if (warp == 0) v = subwarp_sum<32>(v);
    return v;
}

// One term w * y of a float64 dot product (real value types; complex ones give 0: the host never
// asks kernels for a dot over complex values, this keeps their instantiations compiling).
template <class V> __device__ __forceinline__ double dot_term(V w, V y) { return double(w) * double(y); }
template <class T> __device__ __forceinline__ double dot_term(complex<T>, complex<T>) { return 0.0; }

// Deterministic grid-wide sums of N doubles per thread, without float atomics. Every thread of
// every block calls it (it synchronises the block). Each block writes its N block sums to
// partials[N * blockIdx.x + k] and takes an integer ticket; the block that takes the last one
// returns true, and its thread 0 then holds the N grid totals in v (other threads: garbage),
// added in an order fixed by gridDim alone, so results are bitwise reproducible run to run.
// `counter` must be zero at launch; the last block leaves it zero again. `scratch` holds
// N * BLOCK / 32 doubles of shared memory. UNROLL: partial sums loaded at a time by the last
// block (more hide more latency over a large grid, at the price of registers).
template <int BLOCK, int N, int UNROLL = 8>
__device__ __forceinline__ bool grid_sums(double (&v)[N], double* partials, unsigned int* counter, double* scratch) {
    __shared__ bool last_block;
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = block_sum<BLOCK>(v[k], scratch + k * (BLOCK / 32));
    if (threadIdx.x == 0) {
#pragma unroll
        for (int k = 0; k < N; ++k) partials[N * blockIdx.x + k] = v[k];
        __threadfence();  // partials visible before the ticket is taken
        last_block = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last_block) return false;
    __threadfence();
    // Thread t adds blocks t, t + BLOCK, t + 2 BLOCK, ... in that order; UNROLL loads are in
    // flight at a time (a grid of thousands of blocks would otherwise pay one L2 latency per block).
    double total[N];
#pragma unroll
    for (int k = 0; k < N; ++k) total[k] = 0.0;
    const unsigned int blocks = gridDim.x;
    for (unsigned int base = threadIdx.x; base < blocks; base += BLOCK * UNROLL) {
        double loaded[UNROLL][N];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
#pragma unroll
            for (int k = 0; k < N; ++k)
                loaded[u][k] = base + u * BLOCK < blocks ? __ldcg(partials + N * (base + u * BLOCK) + k) : 0.0;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
#pragma unroll
            for (int k = 0; k < N; ++k) total[k] += loaded[u][k];
    }
    __syncthreads();  // scratch reuse
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = block_sum<BLOCK>(total[k], scratch + k * (BLOCK / 32));
    if (threadIdx.x == 0) *counter = 0u;
    return true;
}

// y = alpha * s + beta * y, never reading y when beta is zero (it may hold garbage or NaN).
template <class V> __device__ __forceinline__ V axpby(V alpha, V s, V beta, const V* y) {
    return is_zero(beta) ? scaled(alpha, s) : scaled(alpha, s) + beta * *y;
}

// ---------------------------------------------------------------- atomics (non-deterministic paths)
__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double* p, double v) { atomicAdd(p, v); }
template <class T> __device__ __forceinline__ void atomic_add(complex<T>* p, complex<T> v) {
    T* parts = reinterpret_cast<T*>(p);
    atomicAdd(parts, v.re);
    atomicAdd(parts + 1, v.im);
}

// ---------------------------------------------------------------- binary operators as objects
// One kernel family takes the operator as a template parameter (python-graphblas style).
// Each has identity() and operator(); min/max propagate NaN as NumPy does.
template <class V> struct limits;
template <> struct limits<int> {
    static __device__ __forceinline__ int lowest() { return -2147483647 - 1; }
    static __device__ __forceinline__ int highest() { return 2147483647; }
};
template <> struct limits<long long> {
    static __device__ __forceinline__ long long lowest() { return -9223372036854775807LL - 1; }
    static __device__ __forceinline__ long long highest() { return 9223372036854775807LL; }
};
template <> struct limits<float> {
    static __device__ __forceinline__ float lowest() { return -__int_as_float(0x7f800000); }
    static __device__ __forceinline__ float highest() { return __int_as_float(0x7f800000); }
};
template <> struct limits<double> {
    static __device__ __forceinline__ double lowest() { return -__longlong_as_double(0x7ff0000000000000LL); }
    static __device__ __forceinline__ double highest() { return __longlong_as_double(0x7ff0000000000000LL); }
};
template <class V> struct Sum {
    static __device__ __forceinline__ V identity() { return V(0); }
    __device__ __forceinline__ V operator()(V a, V b) const { return a + b; }
};
template <class V> struct Min {
    static __device__ __forceinline__ V identity() { return limits<V>::highest(); }
    __device__ __forceinline__ V operator()(V a, V b) const { return (a != a || a < b) ? a : b; }
};
template <class V> struct Max {
    static __device__ __forceinline__ V identity() { return limits<V>::lowest(); }
    __device__ __forceinline__ V operator()(V a, V b) const { return (a != a || a > b) ? a : b; }
};

// Fold over aligned groups of W lanes in lane order (lane 0 gets op(v_0, ..., v_{W-1})), so
// non-commutative operators work: offsets grow, so each lane always joins two adjacent ranges.
// Every lane of the warp must call it; only lane 0 of each group holds a meaningful result.
template <int W, class Op, class V> __device__ __forceinline__ V subwarp_reduce(V v, Op op) {
#pragma unroll
    for (int offset = 1; offset < W; offset *= 2) v = op(v, shfl_down(v, offset, W));
    return v;
}

// Block fold in thread order; thread 0 gets the result. `scratch` holds BLOCK / 32 values and
// may be reused only after a __syncthreads().
template <int BLOCK, class Op, class V> __device__ __forceinline__ V block_reduce(V v, Op op, V* scratch) {
    v = subwarp_reduce<32>(v, op);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < BLOCK / 32 ? scratch[lane] : Op::identity();
        v = subwarp_reduce<32>(v, op);
    }
    return v;
}

// Uninitialised storage for N values of V, for a function-scope __shared__ array: one of V
// itself would ask for a dynamic initialisation when V has a constructor (sg::complex), and
// shared memory runs none. Write before reading, as with any shared array.
template <class V, int N> struct alignas(V) uninitialised_array {
    unsigned char bytes[N * sizeof(V)];
    __device__ __forceinline__ V* data() { return reinterpret_cast<V*>(bytes); }
};

// 16 bytes of V, for vector loads and stores.
template <class V> struct __align__(16) vec16 {
    static constexpr int N = 16 / sizeof(V);
    V v[N];
};

// Calls f(x[i]) for this thread's share of x[0:n], grid-stride over 16-byte vectors with VECS
// vectors loaded before any is used (bytes in flight). x need only be aligned to sizeof(V) (a
// view may start anywhere): elements before its first 16-byte boundary and after its last whole
// vector go one per thread. The order in which a thread sees its elements is fixed by the grid.
template <int VECS, class V, class F>
__device__ __forceinline__ void for_each_strided(const V* __restrict__ x, long long n, F&& f) {
    using Vec = vec16<V>;
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long threads = (long long)gridDim.x * blockDim.x;
    long long head = (long long)(((16 - ((unsigned long long)x & 15)) & 15) / sizeof(V));
    if (head > n) head = n;
    const long long n_vec = (n - head) / Vec::N;
    const long long tail = head + n_vec * Vec::N;
    if (thread < head) f(x[thread]);
    if (thread < n - tail) f(x[tail + thread]);
    const Vec* body = reinterpret_cast<const Vec*>(x + head);
    long long v = thread;
    for (; v + (VECS - 1) * threads < n_vec; v += VECS * threads) {
        Vec chunk[VECS];
#pragma unroll
        for (int k = 0; k < VECS; ++k) chunk[k] = body[v + k * threads];
#pragma unroll
        for (int k = 0; k < VECS; ++k)
#pragma unroll
            for (int e = 0; e < Vec::N; ++e) f(chunk[k].v[e]);
    }
    for (; v < n_vec; v += threads) {
        const Vec chunk = body[v];
#pragma unroll
        for (int e = 0; e < Vec::N; ++e) f(chunk.v[e]);
    }
}

}  // namespace sg
