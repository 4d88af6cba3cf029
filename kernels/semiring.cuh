// Semirings for the SpMV kernels (sparsegpu/semiring.py holds their Python side).
//
// A semiring S is a type with static identity(), add(a, b) and mul(a, b) over the value type;
// the SpMV kernels (spmv_csr.cu, spmv_ell.cu, spmv_sell.cu) take it as a template parameter
// defaulting to PlusTimes<V>, whose add and mul are the plain + and *: the arithmetic product's
// code is the same expression tree as before the parameter existed.
// sg::Semiring<V, Monoid, Op> composes one from a monoid (identity<V>(), apply) and an operator
// (apply); a user-made operator is a struct of the same shape prepended to the source.
// Min and max follow NumPy's minimum / maximum: a NaN operand gives NaN. MonoidAny is a logical
// or (1 where any term is nonzero), so it is deterministic.
#pragma once
#include "common.cuh"

namespace sg {

struct MonoidPlus {
    template <class V> static __device__ __forceinline__ V identity() { return V(0); }
    template <class V> static __device__ __forceinline__ V apply(V a, V b) { return a + b; }
};
struct MonoidMin {
    template <class V> static __device__ __forceinline__ V identity() { return limits<V>::highest(); }
    template <class V> static __device__ __forceinline__ V apply(V a, V b) { return (a != a || a < b) ? a : b; }
};
struct MonoidMax {
    template <class V> static __device__ __forceinline__ V identity() { return limits<V>::lowest(); }
    template <class V> static __device__ __forceinline__ V apply(V a, V b) { return (a != a || a > b) ? a : b; }
};
struct MonoidAny {
    template <class V> static __device__ __forceinline__ V identity() { return V(0); }
    template <class V> static __device__ __forceinline__ V apply(V a, V b) {
        return (a != V(0) || b != V(0)) ? V(1) : V(0);
    }
};

struct OpTimes { template <class V> static __device__ __forceinline__ V apply(V a, V b) { return a * b; } };
struct OpPlus { template <class V> static __device__ __forceinline__ V apply(V a, V b) { return a + b; } };
struct OpFirst { template <class V> static __device__ __forceinline__ V apply(V a, V) { return a; } };
struct OpSecond { template <class V> static __device__ __forceinline__ V apply(V, V b) { return b; } };
struct OpPair { template <class V> static __device__ __forceinline__ V apply(V, V) { return V(1); } };
struct OpMin {
    template <class V> static __device__ __forceinline__ V apply(V a, V b) { return (a != a || a < b) ? a : b; }
};
struct OpMax {
    template <class V> static __device__ __forceinline__ V apply(V a, V b) { return (a != a || a > b) ? a : b; }
};

template <class V, class Add, class Mul> struct Semiring {
    static __device__ __forceinline__ V identity() { return Add::template identity<V>(); }
    static __device__ __forceinline__ V add(V a, V b) { return Add::template apply<V>(a, b); }
    static __device__ __forceinline__ V mul(V a, V b) { return Mul::template apply<V>(a, b); }
};
template <class V> using PlusTimes = Semiring<V, MonoidPlus, OpTimes>;

// Fold over aligned groups of W lanes with S::add, offsets halving as in subwarp_sum (for
// PlusTimes the same additions in the same order); lane 0 of each group gets the result.
template <int W, class S, class V> __device__ __forceinline__ V subwarp_fold(V v) {
#pragma unroll
    for (int offset = W / 2; offset > 0; offset /= 2) v = S::add(v, shfl_down(v, offset, W));
    return v;
}

// Block fold as block_sum, with S::add and S::identity(); thread 0 gets the result.
template <int BLOCK, class S, class V> __device__ __forceinline__ V block_fold(V v, V* scratch) {
    v = subwarp_fold<32, S>(v);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = (threadIdx.x < BLOCK / 32) ? scratch[threadIdx.x] : S::identity();
    if (warp == 0) v = subwarp_fold<32, S>(v);
    return v;
}

// Whether a semiring product writes `row`: every row without a mask, else those whose mask byte
// is nonzero (zero with `complement`).
template <class I> __device__ __forceinline__ bool mask_allows(const unsigned char* mask, int complement, I row) {
    return mask == nullptr || ((ldg(mask + row) != 0) != (complement != 0));
}

// Whether column c's term counts: every column without presence flags, else the flagged ones
// (a sparse x given densely: its absent entries contribute nothing, whatever mul(a, 0) is).
template <class I> __device__ __forceinline__ bool present_at(const unsigned char* present, I c) {
    return present == nullptr || ldg(present + c) != 0;
}

}  // namespace sg
