// Fused vector steps of the Krylov solvers (CG, BiCGSTAB, MINRES, GMRES), one template family
// krylov_step<V, OP>. Longer than 700 lines on purpose: every op shares the grid-wide reduction
// and its ticket, so the family stays one translation unit, compiled once.
//
// A CG iteration is three launches: the operator's product with p.q in its epilogue
// (SparseMatrix.spmv_dot writes it to sc[PQ]), CG_UPDATE (alpha = rho / p.q computed by every
// block, r -= alpha q, r.r reduced) and CG_P (x += alpha p and p = z + beta p in one pass, so p
// is read once). CG_UPDATE leaves st[PENDING] set when it updated r; CG_P then updates x even if
// that iteration converged (or broke down, or hit maxiter), and its last block clears the flag.
// Op DOT is the deterministic dot product that spmv_dot falls back to for operators without a
// fused epilogue (it ignores the status).
//
// Each step does one pass over the vectors (an update, and up to two dot products of the
// updated values) and, when it reduces, ends with a scalar epilogue run by the last block to
// finish: the solver's scalar recurrences (alpha, beta, rho, omega), the convergence test and
// the breakdown tests. Scalars therefore never leave the device; the host reads the status
// word only every few iterations.
//
// Determinism: every block writes its partial sums to `partials`; the last block (found with
// an integer ticket, never a float atomic) adds them in block order. The result depends only
// on n and the grid size, so runs are bitwise reproducible.
//
// Freezing: every step first reads st[STATUS]; once it is not RUNNING the step does nothing
// (BI_XR still finishes a BiCGSTAB half step; GMRES's cycle-end steps run only at
// GM_INNER_DONE), so iterations launched after convergence or breakdown leave x, r and the
// scalars exactly as they were at the first converged step.
//
// MINRES (SciPy's minres, Paige-Saunders) is three steps after the operator's product q = A v:
// MR_LANCZOS (q -= shift v + (beta / oldb) r1; alfa = v.q), MR_RESIDUAL (r1 = r2 and
// r2 = q - (alfa / beta) r2 in one pass; r2.(dinv r2) reduced, or MR_RZ reduces r2.z after a
// general preconditioner z = M r2) and MR_UPDATE (w1, w2, w = (v - oldeps w1 - delta w2) denom,
// x += phi w, the next v = z / beta, and x.x reduced). The epilogue of the beta reduction runs
// SciPy's whole scalar recurrence (the Givens rotation, phi and phibar, the Anorm and Acond
// estimates); the epilogue of x.x runs its stopping tests (istop) and sets the status. The
// vectors keep fixed buffers (the r1 <- r2 and w1 <- w2 <- w shifts are copies inside the
// passes), so a CUDA graph of any number of iterations replays correctly.
//
// GMRES (SciPy's gmres: left preconditioning, modified Gram-Schmidt, Givens rotations, gh-8400's
// inner tolerance) keeps its Hessenberg matrix h (restart x (restart + 1), column-major as
// SciPy's h[col, row]), the rotations (c, s) and the rhs S in extra slots after the fixed ones
// (gmres_arrays): sc has SLOTS + restart (restart + 1) + 2 restart + restart + 1 doubles. The
// basis is one (restart + 1, n) array; w, the new direction, lives in its row col + 1. Inner
// iteration col (col is st[GM_COLS], kept by the device) is, after the host's products
// w = M A v[col]: GM_ARNOLDI_FIRST (h0 = ||w||, h[col, 0] = v[0].w; with dinv it forms
// w = dinv A v itself), then GM_ARNOLDI for k = 0..col-1 (w -= h[col, k] v[k];
// h[col, k + 1] = v[k + 1].w; flag = k), then GM_ARNOLDI_LAST (w -= h[col, col] v[col];
// h1 = ||w||) whose epilogue applies the previous rotations to column col, forms the new one
// (LAPACK lartg), updates S and presid and runs the breakdown (h1 <= eps h0) and inner tests
// (presid <= ptol, legacy maxiter, col + 1 == restart), then GM_SCALE (v[col + 1] = w / h1).
// The inner tests end a cycle by setting GM_INNER_DONE, which freezes the inner steps and
// enables the cycle-end steps: GM_SOLVE (one block: the triangular solve for y, in place of S),
// GM_UPDATE_X (x += V^T y), and after the host's product A x, GM_RESIDUAL (r = b - A x, the
// outer tests and the ptol update; with FLAG_START it also forms the next v[0] = r or dinv r
// and starts the cycle, else the host applies M and GM_NORM0 starts it), then GM_SCALE of v[0].
//
// The NumPy reference is sparsegpu/reference/krylov.py (same op codes, slots and arguments).
#include "common.cuh"

namespace sg_krylov {

constexpr int BLOCK = 256;

// Scalar slots (double sc[SLOTS]); see sparsegpu/linalg/_fused.py.
// PQ: p.A p, written by the operator's spmv_dot just before CG_UPDATE reads it.
// MR_*: MINRES's scalars, named as in SciPy's minres (MR_BETA1 = beta1, MR_ATOL the optional
// absolute test on phibar that SciPy lacks, MR_EPS the working dtype's machine epsilon).
enum Slot { ATOL = 0, RHO = 1, ALPHA = 2, BETA = 3, OMEGA = 4, RNORM = 5, RHOTOL = 6, PQ = 7,
            MR_BETA1 = 8, MR_BETA = 9, MR_OLDB = 10, MR_ALFA = 11, MR_DBAR = 12, MR_EPSLN = 13,
            MR_OLDEPS = 14, MR_DELTA = 15, MR_PHI = 16, MR_PHIBAR = 17, MR_DENOM = 18, MR_CS = 19,
            MR_SN = 20, MR_ROOT = 21, MR_TNORM2 = 22, MR_ANORM = 23, MR_GMAX = 24, MR_GMIN = 25,
            MR_RHS1 = 26, MR_RHS2 = 27, MR_SHIFT = 28, MR_RTOL = 29, MR_EPS = 30, MR_ATOL = 31,
            MR_YNORM = 32, MR_ACOND = 33,
            GM_PTOL = 34, GM_FACTOR = 35, GM_PRESID = 36, GM_H0 = 37, GM_RECIPROCAL = 38, GM_EPS = 39,
            SLOTS = 40 };
// GM_*: GMRES's scalars: ptol and ptol_max_factor (gh-8400), the last presid, h0 = ||w|| before
// the Gram-Schmidt steps, the factor GM_SCALE multiplies by (1 / h1 or 1 / ||v[0]||), and the
// working dtype's machine epsilon. GMRES's arrays follow at sc[SLOTS] (gmres_arrays).
// Integer slots (long long st[]): status, completed iterations, iteration limit, the length of
// the `history` ring the host drains after every batch of iterations, and PENDING: CG's x
// update of the last CG_UPDATE is still to be done by CG_P. MR_ISTOP: SciPy's minres istop.
// GMRES: the restart length, the columns done in this cycle (the current col), the cycles
// done, the breakdown flag of this cycle, and GM_LEGACY (1: maxiter also bounds the inner
// iterations, SciPy's callback_type 'legacy'). COUNT counts GMRES's inner iterations.
enum Word { STATUS = 0, COUNT = 1, MAXITER = 2, HISTCAP = 3, PENDING = 4, MR_ISTOP = 5,
            GM_RESTART = 6, GM_COLS = 7, GM_CYCLES = 8, GM_BREAKDOWN = 9, GM_LEGACY = 10 };
// Status codes; negative ones are breakdowns and become the solver's info. LIMIT: the
// iteration limit was reached (info = maxiter); it freezes the steps like the others, so the
// host may launch whole batches past maxiter. GM_INNER_DONE: GMRES's inner loop of this cycle
// has stopped; inner steps are frozen, the cycle-end steps run (and GM_RESIDUAL sets RUNNING
// again for the next cycle, or a final status).
enum Status {
    RUNNING = 0, CONVERGED = 1, HALF_PENDING = 2, CONVERGED_HALF = 3, LIMIT = 4, GM_INNER_DONE = 5,
    NONFINITE = -1, RHO_BREAKDOWN = -10, DENOMINATOR_BREAKDOWN = -11,
    NOT_SYMMETRIC = -12,  // MINRES: r2.M r2 < 0 (SciPy raises ValueError('non-symmetric matrix'))
};
// Op codes. flag bit 0: the preconditioner is the inverse diagonal `dinv` (fused);
// flag bit 1 (CG_UPDATE): the start step (no update, no count); flag bit 2 (CG_UPDATE): a
// general preconditioner follows, rho comes later from CG_RHO (MR_RESIDUAL: beta from MR_RZ);
// FLAG_START (MR_UPDATE): only v = (1 / beta1) z, before the first iteration.
// GMRES: FLAG_DINV (GM_ARNOLDI_FIRST: w = dinv A v; GM_RESIDUAL: v[0] = dinv r);
// FLAG_START (GM_RESIDUAL): also start the next cycle from v[0] (r itself without dinv);
// GM_ARNOLDI's flag is k, the basis vector it orthogonalises against (no bits).
enum Op { DOT = 0, CG_UPDATE = 1, CG_RHO = 2, CG_P = 3,
          BI_START = 4, BI_P = 5, BI_ALPHA = 6, BI_S = 7, BI_OMEGA = 8, BI_XR = 9,
          MR_LANCZOS = 10, MR_RESIDUAL = 11, MR_RZ = 12, MR_UPDATE = 13,
          GM_NORM0 = 14, GM_SCALE = 15, GM_ARNOLDI_FIRST = 16, GM_ARNOLDI = 17, GM_ARNOLDI_LAST = 18,
          GM_SOLVE = 19, GM_UPDATE_X = 20, GM_RESIDUAL = 21 };
// The GMRES steps that run only at the end of a cycle (status GM_INNER_DONE).
template <int OP> struct cycle_end { static constexpr bool value = OP == GM_SOLVE || OP == GM_UPDATE_X || OP == GM_RESIDUAL; };
enum Flag { FLAG_DINV = 1, FLAG_START = 2, FLAG_LATE_RHO = 4 };

// Blocks resident per SM that the launch grid assumes (sparsegpu/linalg/_fused.py BLOCKS_PER_SM):
// the register budget is held to 32 so that all 8 fit and the grid runs in one wave, except for
// BI_XR, whose six vectors would spill at 32 (6 blocks: 40 registers, as before), MINRES's
// MR_RESIDUAL and MR_RZ, whose epilogue (the scalar recurrence) would spill at 32 (6 blocks),
// and MR_UPDATE (six vectors, five coefficients: 5 blocks, 48 registers, its loop not unrolled).
// GMRES's GM_RESIDUAL (outer tests and the cycle start) would spill at 32 too (6 blocks), and
// GM_ARNOLDI_LAST (the Givens epilogue) even at 40 (5 blocks, 48 registers).
template <int OP> struct min_blocks { static constexpr int value = 8; };
template <> struct min_blocks<GM_ARNOLDI_LAST> { static constexpr int value = 5; };
template <> struct min_blocks<GM_RESIDUAL> { static constexpr int value = 6; };
template <> struct min_blocks<BI_XR> { static constexpr int value = 6; };
template <> struct min_blocks<MR_RESIDUAL> { static constexpr int value = 6; };
template <> struct min_blocks<MR_RZ> { static constexpr int value = 6; };
template <> struct min_blocks<MR_UPDATE> { static constexpr int value = 5; };

template <int OP> struct reductions { static constexpr int value = 2; };
template <> struct reductions<CG_P> { static constexpr int value = 0; };
template <> struct reductions<BI_P> { static constexpr int value = 0; };
template <> struct reductions<GM_SCALE> { static constexpr int value = 0; };
template <> struct reductions<GM_SOLVE> { static constexpr int value = 0; };
template <> struct reductions<GM_UPDATE_X> { static constexpr int value = 0; };

__device__ __forceinline__ bool finite(double v) { return isfinite(v); }
// NaN and infinity without math_constants.h (NVRTC compiles this file without system headers).
__device__ __forceinline__ double quiet_nan() { return __longlong_as_double(0x7ff8000000000000LL); }
__device__ __forceinline__ double infinity() { return __longlong_as_double(0x7ff0000000000000LL); }

// The residual norm after `at` iterations, into the ring the host drains (null: not asked).
__device__ __forceinline__ void record(double* history, const long long* st, long long at, double rnorm) {
    if (history != nullptr) history[at % st[HISTCAP]] = rnorm;
}

// The test at the top of a CG iteration (SciPy: `if norm(r) < atol: return x, 0`), run after
// `count` completed iterations; SciPy never tests after its last one.
__device__ __forceinline__ bool top_converged(double rr, double* sc, long long* st, double* history) {
    const double rnorm = sqrt(rr);
    sc[RNORM] = rnorm;
    record(history, st, st[COUNT], rnorm);
    if (!finite(rr)) { st[STATUS] = NONFINITE; return true; }
    if (st[COUNT] >= st[MAXITER]) { st[STATUS] = LIMIT; return true; }  // info = maxiter
    if (rnorm < sc[ATOL]) { st[STATUS] = CONVERGED; return true; }
    return false;
}

// BiCGSTAB's top of iteration: the residual test, then the rho and omega breakdown tests,
// then beta.
__device__ __forceinline__ void bicgstab_top(double rr, double rho_new, double* sc, long long* st, double* history) {
    if (top_converged(rr, sc, st, history)) return;
    if (!finite(rho_new)) { st[STATUS] = NONFINITE; return; }
    if (fabs(rho_new) < sc[RHOTOL]) { st[STATUS] = RHO_BREAKDOWN; return; }
    if (st[COUNT] > 0) {
        if (fabs(sc[OMEGA]) < sc[RHOTOL]) { st[STATUS] = DENOMINATOR_BREAKDOWN; return; }
        sc[BETA] = (rho_new / sc[RHO]) * (sc[ALPHA] / sc[OMEGA]);
    } else {
        sc[BETA] = 0.0;
        sc[OMEGA] = 0.0;
    }
    sc[RHO] = rho_new;
}

// MINRES after the beta reduction (SciPy's minres from `oldb = beta` to `rhs2 = -epsln * z`,
// then Anorm): one iteration completed, the Lanczos coefficients checked, the previous Givens
// rotation applied, the next one computed. beta2 = r2.(M r2).
__device__ __forceinline__ void minres_rotate(double beta2, double* sc, long long* st, double* history) {
    st[COUNT] += 1;
    const double alfa = sc[MR_ALFA], oldb = sc[MR_BETA];
    if (!finite(alfa) || !finite(beta2)) { st[STATUS] = NONFINITE; record(history, st, st[COUNT], quiet_nan()); return; }
    if (beta2 < 0.0) { st[STATUS] = NOT_SYMMETRIC; record(history, st, st[COUNT], quiet_nan()); return; }
    const double beta = sqrt(beta2), eps = sc[MR_EPS];
    sc[MR_OLDB] = oldb;
    sc[MR_BETA] = beta;
    sc[MR_TNORM2] += alfa * alfa + oldb * oldb + beta * beta;
    if (st[COUNT] == 1 && beta / sc[MR_BETA1] <= 10.0 * eps) st[MR_ISTOP] = -1;  // terminate later
    const double cs = sc[MR_CS], sn = sc[MR_SN], dbar = sc[MR_DBAR], phibar = sc[MR_PHIBAR];
    sc[MR_OLDEPS] = sc[MR_EPSLN];
    const double delta = cs * dbar + sn * alfa;
    const double gbar = sn * dbar - cs * alfa;
    const double epsln = sn * beta;
    const double dbar_next = -cs * beta;
    sc[MR_ROOT] = sqrt(gbar * gbar + dbar_next * dbar_next);  // numpy.linalg.norm([gbar, dbar])
    const double gamma = fmax(sqrt(gbar * gbar + beta * beta), eps);
    const double cs_next = gbar / gamma, sn_next = beta / gamma;
    sc[MR_PHI] = cs_next * phibar;
    sc[MR_PHIBAR] = sn_next * phibar;
    sc[MR_DENOM] = 1.0 / gamma;
    sc[MR_DELTA] = delta;
    sc[MR_EPSLN] = epsln;
    sc[MR_DBAR] = dbar_next;
    sc[MR_CS] = cs_next;
    sc[MR_SN] = sn_next;
    sc[MR_GMAX] = fmax(sc[MR_GMAX], gamma);
    sc[MR_GMIN] = fmin(sc[MR_GMIN], gamma);
    const double z = sc[MR_RHS1] / gamma;
    sc[MR_RHS1] = sc[MR_RHS2] - delta * z;
    sc[MR_RHS2] = -epsln * z;
    sc[MR_ANORM] = sqrt(sc[MR_TNORM2]);
    sc[RNORM] = sc[MR_PHIBAR];
    record(history, st, st[COUNT], sc[MR_PHIBAR]);
}

// MINRES after the x.x reduction: SciPy's norm estimates and stopping tests, in its order (a
// later test overrides an earlier one), then the status that freezes the following steps.
__device__ __forceinline__ void minres_tests(double xx, double* sc, long long* st) {
    const double anorm = sc[MR_ANORM], ynorm = sqrt(xx), eps = sc[MR_EPS], rnorm = sc[MR_PHIBAR];
    const double epsx = anorm * ynorm * eps;
    const double test1 = (ynorm == 0.0 || anorm == 0.0) ? infinity() : rnorm / (anorm * ynorm);
    const double test2 = anorm == 0.0 ? infinity() : sc[MR_ROOT] / anorm;
    const double acond = sc[MR_GMAX] / sc[MR_GMIN];
    sc[MR_YNORM] = ynorm;
    sc[MR_ACOND] = acond;
    long long istop = st[MR_ISTOP];
    if (istop == 0) {
        if (1.0 + test2 <= 1.0) istop = 2;
        if (1.0 + test1 <= 1.0) istop = 1;
        if (st[COUNT] >= st[MAXITER]) istop = 6;
        if (acond >= 0.1 / eps) istop = 4;
        if (epsx >= sc[MR_BETA1]) istop = 3;
        if (test2 <= sc[MR_RTOL]) istop = 2;
        if (test1 <= sc[MR_RTOL]) istop = 1;
        if (rnorm <= sc[MR_ATOL]) istop = 1;  // the atol extension (0 by default: SciPy's tests)
        st[MR_ISTOP] = istop;
    }
    if (istop != 0) st[STATUS] = istop == 6 ? LIMIT : CONVERGED;  // info maxiter, else 0
}

// A quotient that must be finite and have a nonzero denominator, else a breakdown status.
__device__ __forceinline__ bool safe_quotient(double num, double den, double* out, long long* st) {
    if (!finite(num) || !finite(den)) { st[STATUS] = NONFINITE; return false; }
    if (den == 0.0) { st[STATUS] = DENOMINATOR_BREAKDOWN; return false; }
    *out = num / den;
    return true;
}

// GMRES's arrays in sc after the fixed slots: h[col * (restart + 1) + row] (SciPy's h[col, row]),
// the rotations givens[2 col], givens[2 col + 1] (c, s), and S (restart + 1 entries; the
// triangular solve overwrites its first entries with y).
struct GmresArrays {
    long long restart;
    double* h;
    double* givens;
    double* S;
    __device__ GmresArrays(double* sc, const long long* st)
        : restart(st[GM_RESTART]), h(sc + SLOTS), givens(sc + SLOTS + restart * (restart + 1)),
          S(sc + SLOTS + restart * (restart + 1) + 2 * restart) {}
    __device__ double* column(long long col) const { return h + col * (restart + 1); }
};

// LAPACK's dlartg (3.10 and later, as SciPy's lartg calls it): c, s, r with c f + s g = r and
// -s f + c g = 0, scaled only when f or g is outside [sqrt(safmin), sqrt(safmax / 2)].
struct Rotation { double c, s, r; };
__device__ __forceinline__ Rotation lartg(double f, double g) {
    const double safmin = 2.2250738585072014e-308, safmax = 1.0 / safmin;  // 2^-1022, 2^1022
    const double rtmin = sqrt(safmin), rtmax = sqrt(safmax / 2.0);
    const double f1 = fabs(f), g1 = fabs(g);
    if (g == 0.0) return {1.0, 0.0, f};
    if (f == 0.0) return {0.0, copysign(1.0, g), g1};
    if (f1 > rtmin && f1 < rtmax && g1 > rtmin && g1 < rtmax) {
        const double d = sqrt(f * f + g * g);
        const double r = copysign(d, f);
        return {f1 / d, g / r, r};
    }
    const double u = fmin(safmax, fmax(safmin, fmax(f1, g1)));
    const double fs = f / u, gs = g / u;
    const double d = sqrt(fs * fs + gs * gs);
    const double r = copysign(d, f);
    return {fabs(fs) / d, gs / r, r * u};
}

// The start of a GMRES cycle from vv = v[0].v[0] (v[0] = M r, not yet scaled): S = (||v[0]||,
// 0, ...), the scale 1 / ||v[0]|| for GM_SCALE, column 0. A zero M r (a singular
// preconditioner) is a breakdown: SciPy would divide by zero.
__device__ __forceinline__ void gmres_cycle_start(double vv, double* sc, long long* st) {
    if (!finite(vv)) { st[STATUS] = NONFINITE; return; }
    const double norm = sqrt(vv);
    if (norm == 0.0) { st[STATUS] = DENOMINATOR_BREAKDOWN; return; }
    const GmresArrays g(sc, st);
    g.S[0] = norm;
    for (long long j = 1; j <= g.restart; ++j) g.S[j] = 0.0;
    sc[GM_RECIPROCAL] = 1.0 / norm;
    st[GM_COLS] = 0;
    st[GM_BREAKDOWN] = 0;
}

// SciPy's inner iteration after h1 = ||w||: the exact-solution test, the previous rotations
// applied to column col, the new rotation, S and presid, then the inner stopping tests.
__device__ __forceinline__ void gmres_column(double h1, double* sc, long long* st, double* history) {
    const GmresArrays g(sc, st);
    const long long col = st[GM_COLS];
    double* h = g.column(col);
    const double h0 = sc[GM_H0];
    if (!finite(h0) || !finite(h1)) { st[STATUS] = NONFINITE; return; }
    const bool breakdown = h1 <= sc[GM_EPS] * h0;  // exact solution indicator
    h[col + 1] = breakdown ? 0.0 : h1;
    if (breakdown) st[GM_BREAKDOWN] = 1;
    else sc[GM_RECIPROCAL] = 1.0 / h1;
    for (long long k = 0; k < col; ++k) {
        const double c = g.givens[2 * k], s = g.givens[2 * k + 1], n0 = h[k], n1 = h[k + 1];
        h[k] = c * n0 + s * n1;
        h[k + 1] = -s * n0 + c * n1;
    }
    const Rotation rot = lartg(h[col], h[col + 1]);
    g.givens[2 * col] = rot.c;
    g.givens[2 * col + 1] = rot.s;
    h[col] = rot.r;
    h[col + 1] = 0.0;
    const double tmp = -rot.s * g.S[col];
    g.S[col] = rot.c * g.S[col];
    g.S[col + 1] = tmp;
    const double presid = fabs(tmp);
    sc[GM_PRESID] = presid;
    st[COUNT] += 1;
    st[GM_COLS] = col + 1;
    record(history, st, st[COUNT], presid);
    if ((st[GM_LEGACY] != 0 && st[COUNT] == st[MAXITER]) || presid <= sc[GM_PTOL] || breakdown ||
        col + 1 == g.restart)
        st[STATUS] = GM_INNER_DONE;
}

// GM_SOLVE, one block: SciPy's back substitution for y (h[:col+1, :col+1] upper triangular,
// in place of S), the column updates y[:k] -= y[k] h[k, :k] spread over the threads (each y[j]
// gets the same operations in the same order as the serial loop). A non-finite y is a
// breakdown before x changes, so x stays the last finite iterate.
__device__ __forceinline__ void gmres_solve(double* sc, long long* st) {
    __shared__ double y_k;
    __shared__ bool nonzero;
    const GmresArrays g(sc, st);
    const long long col = st[GM_COLS] - 1;
    double* y = g.S;
    if (threadIdx.x == 0 && g.column(col)[col] == 0.0) y[col] = 0.0;
    for (long long k = col; k >= 1; --k) {
        if (threadIdx.x == 0) {
            double v = y[k];
            nonzero = v != 0.0;
            if (nonzero) {
                v /= g.column(k)[k];
                y[k] = v;
            }
            y_k = v;
        }
        __syncthreads();
        if (nonzero) {
            const double* hk = g.column(k);
            for (long long j = threadIdx.x; j < k; j += BLOCK) y[j] -= y_k * hk[j];
        }
        __syncthreads();
    }
    if (threadIdx.x != 0) return;
    if (y[0] != 0.0) y[0] /= g.h[0];
    for (long long j = 0; j <= col; ++j) {
        if (!finite(y[j])) { st[STATUS] = NONFINITE; return; }
    }
}

// GM_UPDATE_X: x += sum_k y[k] v[k] over the cycle's columns, summed in float64 per element.
template <class V>
__device__ __forceinline__ void gmres_update_x(const long long n, V* x, const V* basis, const double* sc,
                                               const long long* st) {
    const long long restart = st[GM_RESTART], cols = st[GM_COLS];
    const double* y = sc + SLOTS + restart * (restart + 1) + 2 * restart;
    const long long stride = (long long)gridDim.x * BLOCK;
    for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < n; i += stride) {
        double sum = 0.0;
        for (long long k = 0; k < cols; ++k) sum += y[k] * double(basis[k * n + i]);
        x[i] = V(double(x[i]) + sum);
    }
}

// GM_RESIDUAL after rr = r.r: SciPy's outer tests (legacy exit, rnorm <= atol, breakdown) and
// gh-8400's ptol update, then the cycle limit; RUNNING again when another cycle follows.
__device__ __forceinline__ void gmres_cycle_end(double rr, double* sc, long long* st) {
    const double rnorm = sqrt(rr), atol = sc[ATOL];
    sc[RNORM] = rnorm;
    if (!finite(rr)) { st[STATUS] = NONFINITE; return; }
    st[GM_CYCLES] += 1;
    if (st[GM_LEGACY] != 0 && st[COUNT] == st[MAXITER]) { st[STATUS] = rnorm <= atol ? CONVERGED : LIMIT; return; }
    if (rnorm <= atol) { st[STATUS] = CONVERGED; return; }
    if (st[GM_BREAKDOWN] != 0) { st[STATUS] = LIMIT; return; }  // SciPy: info = maxiter
    const double presid = sc[GM_PRESID];
    double factor = sc[GM_FACTOR];
    factor = presid <= sc[GM_PTOL] ? fmax(sc[GM_EPS], 0.25 * factor) : fmin(1.0, 1.5 * factor);
    sc[GM_FACTOR] = factor;
    sc[GM_PTOL] = presid * fmin(factor, atol / rnorm);
    st[STATUS] = st[GM_CYCLES] >= st[MAXITER] ? LIMIT : RUNNING;
}

template <int OP>
__device__ __forceinline__ void epilogue(const double* s, const int flag, double* sc, long long* st, double* history) {
    if (OP == DOT) {
        sc[0] = s[0];  // sc is the caller's output scalar here
    } else if (OP == CG_UPDATE) {
        if (!(flag & FLAG_START)) {
            sc[ALPHA] = sc[RHO] / sc[PQ];  // every block used this quotient (checked safe)
            st[COUNT] += 1;
            st[PENDING] = 1;  // CG_P adds alpha p to x, whatever the tests below decide
        }
        if (top_converged(s[0], sc, st, history) || (flag & FLAG_LATE_RHO)) return;
        const double rz = (flag & FLAG_DINV) ? s[1] : s[0];
        if (!finite(rz)) { st[STATUS] = NONFINITE; return; }
        sc[BETA] = (flag & FLAG_START) ? 0.0 : rz / sc[RHO];
        sc[RHO] = rz;
    } else if (OP == CG_RHO) {
        if (!finite(s[0])) { st[STATUS] = NONFINITE; return; }
        sc[BETA] = st[COUNT] > 0 ? s[0] / sc[RHO] : 0.0;
        sc[RHO] = s[0];
    } else if (OP == BI_START) {
        bicgstab_top(s[0], s[1], sc, st, history);
    } else if (OP == BI_ALPHA) {
        safe_quotient(sc[RHO], s[0], &sc[ALPHA], st);
    } else if (OP == BI_S) {
        const double snorm = sqrt(s[0]);
        if (!finite(s[0])) { st[STATUS] = NONFINITE; return; }
        if (snorm < sc[ATOL]) {
            sc[RNORM] = snorm;
            record(history, st, st[COUNT] + 1, snorm);
            st[STATUS] = HALF_PENDING;
        }
    } else if (OP == BI_OMEGA) {
        safe_quotient(s[0], s[1], &sc[OMEGA], st);
    } else if (OP == BI_XR) {
        st[COUNT] += 1;
        if (st[STATUS] == HALF_PENDING) { st[STATUS] = CONVERGED_HALF; return; }
        bicgstab_top(s[0], s[1], sc, st, history);
    } else if (OP == MR_LANCZOS) {
        sc[MR_ALFA] = s[0];
    } else if (OP == MR_RESIDUAL) {
        if (!(flag & FLAG_LATE_RHO)) minres_rotate((flag & FLAG_DINV) ? s[1] : s[0], sc, st, history);
    } else if (OP == MR_RZ) {
        minres_rotate(s[0], sc, st, history);
    } else if (OP == MR_UPDATE) {
        if (flag & FLAG_START) {
            record(history, st, 0, sc[MR_PHIBAR]);  // phibar = beta1 before the first iteration
            return;
        }
        minres_tests(s[0], sc, st);
    } else if (OP == GM_NORM0) {
        gmres_cycle_start(s[0], sc, st);
    } else if (OP == GM_ARNOLDI_FIRST) {
        sc[GM_H0] = sqrt(s[0]);
        GmresArrays(sc, st).column(st[GM_COLS])[0] = s[1];
    } else if (OP == GM_ARNOLDI) {
        GmresArrays(sc, st).column(st[GM_COLS])[flag + 1] = s[0];
    } else if (OP == GM_ARNOLDI_LAST) {
        gmres_column(sqrt(s[0]), sc, st, history);
    } else if (OP == GM_RESIDUAL) {
        gmres_cycle_end(s[0], sc, st);
        if ((flag & FLAG_START) && st[STATUS] == RUNNING) gmres_cycle_start((flag & FLAG_DINV) ? s[1] : s[0], sc, st);
    }
}

// The elementwise body of each op at index i; adds its products to acc[0..1].
// The step's coefficients, loaded once per thread: the vectors carry no __restrict__, so a
// load of sc inside the loop could not be hoisted past the stores.
// CG_UPDATE computes alpha = rho / p.q itself (the product's epilogue left p.q in sc[PQ]).
// MINRES's coefficients in m (see minres_coefficients); with_r1: MR_LANCZOS subtracts the
// (beta / oldb) r1 term (from the second iteration on, as SciPy's `if itn >= 2`).
template <class V> struct Coefficients {
    V alpha, beta, omega;
    V m[5] = {V(0), V(0), V(0), V(0), V(0)};  // MINRES's, or GMRES's one (m[0])
    bool with_r1 = false;
    __device__ Coefficients(const double* sc, double cg_alpha)
        : alpha(V(cg_alpha)), beta(V(sc[BETA])), omega(V(sc[OMEGA])) {}
};

// The scalars of a MINRES step, rounded to V once as SciPy's scalar * array expressions are.
// MR_LANCZOS: shift, beta / oldb. MR_RESIDUAL: alfa / beta (the beta before this iteration's).
// MR_UPDATE: oldeps, delta, denom, phi, 1 / beta (SciPy's `s = 1.0 / beta; v = s * y`).
template <class V, int OP>
__device__ __forceinline__ void minres_coefficients(Coefficients<V>& k, const double* sc, const long long* st) {
    if (OP == MR_LANCZOS) {
        k.m[0] = V(sc[MR_SHIFT]);
        k.with_r1 = st[COUNT] > 0;
        if (k.with_r1) k.m[1] = V(sc[MR_BETA] / sc[MR_OLDB]);
    } else if (OP == MR_RESIDUAL) {
        k.m[0] = V(sc[MR_ALFA] / sc[MR_BETA]);
    } else if (OP == MR_UPDATE) {
        k.m[0] = V(sc[MR_OLDEPS]);
        k.m[1] = V(sc[MR_DELTA]);
        k.m[2] = V(sc[MR_DENOM]);
        k.m[3] = V(sc[MR_PHI]);
        k.m[4] = V(1.0 / sc[MR_BETA]);
    }
}

// GMRES's one coefficient, rounded to V as SciPy's `tmp * v[k]`: GM_SCALE's 1 / h1 (or
// 1 / ||v[0]||), GM_ARNOLDI's h[col, k] (k = flag), GM_ARNOLDI_LAST's h[col, col].
template <class V, int OP>
__device__ __forceinline__ void gmres_coefficient(Coefficients<V>& k, double* sc, const long long* st, const int flag) {
    if (OP == GM_SCALE) {
        k.m[0] = V(sc[GM_RECIPROCAL]);
    } else if (OP == GM_ARNOLDI || OP == GM_ARNOLDI_LAST) {
        const long long col = st[GM_COLS];
        k.m[0] = V(GmresArrays(sc, st).column(col)[OP == GM_ARNOLDI ? (long long)flag : col]);
    }
}

// half: BI_XR finishes a half step (x only); CG_P does only its pending x update (p frozen).
// pending: CG_P adds alpha p to x.
// The six vector arguments a..f take a role per op (sparsegpu/reference/krylov.py ROLES, the
// names the Python call sites use); each branch names them by role before using them.
template <class V, int OP>
__device__ __forceinline__ void element(long long i, V* a, V* b, V* c, V* d, V* e, V* f, const V* dinv,
                                        const int flag, const Coefficients<V>& k, const bool half,
                                        const bool pending, double* acc) {
    if (OP == DOT) {  // w.y
        const V* w = a;
        const V* y = b;
        acc[0] += double(w[i]) * double(y[i]);
    } else if (OP == CG_UPDATE) {  // r -= alpha q; r.r, r.dinv.r
        V* r = a;
        const V* q = b;
        V ri = r[i];
        if (!(flag & FLAG_START)) {
            ri = ri - k.alpha * q[i];
            r[i] = ri;
        }
        acc[0] += double(ri) * double(ri);
        if (flag & FLAG_DINV) acc[1] += double(ri) * double(dinv[i] * ri);
    } else if (OP == CG_RHO) {  // r.z
        const V* r = a;
        const V* z = b;
        acc[0] += double(r[i]) * double(z[i]);
    } else if (OP == CG_P) {  // x += alpha p; p = z + beta p (z is r with dinv)
        V* p = a;
        const V* z = b;
        V* x = c;
        const V pi = p[i];
        if (pending) x[i] = x[i] + k.alpha * pi;
        if (!half) {
            const V zi = (flag & FLAG_DINV) ? dinv[i] * z[i] : z[i];
            p[i] = zi + k.beta * pi;
        }
    } else if (OP == BI_START) {  // r.r, rtilde.r
        const V* r = a;
        const V* rtilde = b;
        acc[0] += double(r[i]) * double(r[i]);
        acc[1] += double(rtilde[i]) * double(r[i]);
    } else if (OP == BI_P) {  // p = r + beta (p - omega v); phat = dinv p
        V* p = a;
        const V* r = b;
        const V* v = c;
        V* phat = d;
        const V pi = r[i] + k.beta * (p[i] - k.omega * v[i]);
        p[i] = pi;
        if (flag & FLAG_DINV) phat[i] = dinv[i] * pi;
    } else if (OP == BI_ALPHA) {  // rtilde.v
        const V* rtilde = a;
        const V* v = b;
        acc[0] += double(rtilde[i]) * double(v[i]);
    } else if (OP == BI_S) {  // s = r - alpha v (in r); shat = dinv s; s.s
        V* r = a;
        const V* v = b;
        V* shat = c;
        const V s = r[i] - k.alpha * v[i];
        r[i] = s;
        if (flag & FLAG_DINV) shat[i] = dinv[i] * s;
        acc[0] += double(s) * double(s);
    } else if (OP == BI_OMEGA) {  // t.s, t.t
        const V* t = a;
        const V* s = b;
        const double ti = double(t[i]);
        acc[0] += ti * double(s[i]);
        acc[1] += ti * ti;
    } else if (OP == BI_XR) {  // x += alpha phat + omega shat; r -= omega t; r.r, rtilde.r
        V* x = a;
        V* r = b;
        const V* phat = c;
        const V* shat = d;
        const V* t = e;
        const V* rtilde = f;
        if (half) {
            x[i] = x[i] + k.alpha * phat[i];
        } else {
            x[i] = x[i] + k.alpha * phat[i] + k.omega * shat[i];
            const V ri = r[i] - k.omega * t[i];
            r[i] = ri;
            acc[0] += double(ri) * double(ri);
            acc[1] += double(rtilde[i]) * double(ri);
        }
    } else if (OP == MR_LANCZOS) {  // q (A v in, y out): y = q - shift v - (beta/oldb) r1; v.y
        V* q = a;
        const V* v = b;
        const V* r1 = c;
        const V vi = v[i];
        V y = q[i] - k.m[0] * vi;
        if (k.with_r1) y = y - k.m[1] * r1[i];
        q[i] = y;
        acc[0] += double(vi) * double(y);
    } else if (OP == MR_RESIDUAL) {  // r1 = r2; r2 = y - (alfa/beta) r2; r2.r2, r2.dinv.r2
        V* r1 = a;
        V* r2 = b;
        const V* y = c;
        const V r_old = r2[i];
        const V r = y[i] - k.m[0] * r_old;
        r1[i] = r_old;
        r2[i] = r;
        acc[0] += double(r) * double(r);
        if (flag & FLAG_DINV) acc[1] += double(r) * double(dinv[i] * r);
    } else if (OP == MR_RZ) {  // r2.z, z = M r2
        const V* r2 = a;
        const V* z = b;
        acc[0] += double(r2[i]) * double(z[i]);
    } else if (OP == MR_UPDATE) {  // w1, w2 (in: w2, w), x += phi w, the next v = z / beta; x.x (z is r2 with dinv)
        V* x = a;
        V* v = b;
        V* w1 = c;
        V* w2 = d;
        const V* z = e;
        const V zi = (flag & FLAG_DINV) ? dinv[i] * z[i] : z[i];
        if (!(flag & FLAG_START)) {
            const V w2i = w2[i];
            const V w = (v[i] - k.m[0] * w1[i] - k.m[1] * w2i) * k.m[2];
            w1[i] = w2i;
            w2[i] = w;
            const V xi = x[i] + k.m[3] * w;
            x[i] = xi;
            acc[0] += double(xi) * double(xi);
        }
        v[i] = k.m[4] * zi;  // the next iteration's v
    } else if (OP == GM_NORM0) {  // v[0].v[0]
        const V* v0 = a;
        acc[0] += double(v0[i]) * double(v0[i]);
    } else if (OP == GM_SCALE) {  // v[col + 1] (or v[0]) *= 1 / norm
        V* v = a;
        v[i] = k.m[0] * v[i];
    } else if (OP == GM_ARNOLDI_FIRST) {  // w = dinv A v (with dinv); w.w, v[0].w
        V* w = a;
        const V* v0 = b;
        const V* av = c;
        V wi = w[i];
        if (flag & FLAG_DINV) {
            wi = dinv[i] * av[i];
            w[i] = wi;
        }
        acc[0] += double(wi) * double(wi);
        acc[1] += double(v0[i]) * double(wi);
    } else if (OP == GM_ARNOLDI) {  // w -= h[col, k] v[k]; v[k + 1].w
        V* w = a;
        const V* vk = b;
        const V* vnext = c;
        const V wi = w[i] - k.m[0] * vk[i];
        w[i] = wi;
        acc[0] += double(vnext[i]) * double(wi);
    } else if (OP == GM_ARNOLDI_LAST) {  // w -= h[col, col] v[col]; w.w
        V* w = a;
        const V* vcol = b;
        const V wi = w[i] - k.m[0] * vcol[i];
        w[i] = wi;
        acc[0] += double(wi) * double(wi);
    } else if (OP == GM_RESIDUAL) {  // r = b - A x; r.r; with dinv v[0] = dinv r, v[0].v[0]
        V* r = a;
        const V* rhs = b;  // the role "b" (the right-hand side)
        const V* ax = c;
        V* v0 = d;
        const V ri = rhs[i] - ax[i];
        r[i] = ri;
        acc[0] += double(ri) * double(ri);
        if (flag & FLAG_DINV) {
            const V z = dinv[i] * ri;
            v0[i] = z;
            acc[1] += double(z) * double(z);
        }
    }
}

}  // namespace sg_krylov

// One fused step. Grid-stride over n; `partials` holds 2 * gridDim.x doubles and `counter` one
// unsigned int that is zero between launches (the last block resets it). For OP == DOT, `sc` is
// the output scalar and `st` is not read. The vectors a..f take a role per op (see element);
// GM_UPDATE_X reads x = a and the basis = b (restart + 1 rows of n).
// No __restrict__: without a preconditioner the solvers pass one vector in two roles.
template <class V, int OP>
__global__ void __launch_bounds__(sg_krylov::BLOCK, sg_krylov::min_blocks<OP>::value)
krylov_step(const long long n, V* a, V* b, V* c, V* d, V* e, V* f, const V* dinv, const int flag,
            double* sc, long long* st, double* partials, unsigned int* counter, double* history) {
    using namespace sg_krylov;
    constexpr int NRED = reductions<OP>::value;
    const long long status = OP == DOT ? (long long)RUNNING : st[STATUS];
    const bool pending = OP == CG_P && st[PENDING] != 0;
    const bool half = (OP == BI_XR && status == HALF_PENDING) || (OP == CG_P && status != RUNNING);
    if (cycle_end<OP>::value) {
        if (status != GM_INNER_DONE) return;  // GMRES's cycle-end steps: only after the inner loop stopped
    } else if (status != RUNNING && !(OP == BI_XR && half) && !pending) {
        return;  // uniform across the grid: frozen
    }
    if (OP == GM_SOLVE) {  // launched with one block
        gmres_solve(sc, st);
        return;
    }
    if (OP == GM_UPDATE_X) {  // a = x, b = the basis (restart + 1 rows of n)
        gmres_update_x<V>(n, a, b, sc, st);
        return;
    }

    double cg_alpha = 0.0;
    if (OP == CG_UPDATE && !(flag & FLAG_START)) {
        // SciPy's alpha = rho / p.q. Every block evaluates the same test on the same values, so
        // either all update or none does; on a breakdown one thread records the status (a block
        // that reads it first just returns earlier: it would have skipped the update anyway).
        const double rho = sc[RHO], pq = sc[PQ];
        const bool finite_inputs = sg_krylov::finite(rho) && sg_krylov::finite(pq);
        if (!finite_inputs || pq == 0.0) {
            if (blockIdx.x == 0 && threadIdx.x == 0) st[STATUS] = finite_inputs ? DENOMINATOR_BREAKDOWN : NONFINITE;
            return;
        }
        cg_alpha = rho / pq;
    }
    Coefficients<V> k(sc, OP == CG_UPDATE ? cg_alpha : sc[ALPHA]);
    minres_coefficients<V, OP>(k, sc, st);
    gmres_coefficient<V, OP>(k, sc, st, flag);
    double acc[2] = {0.0, 0.0};
    const long long stride = (long long)gridDim.x * BLOCK;
    if (OP == MR_UPDATE) {
        // Unrolled, this loop would spill in double even at 48 registers.
#pragma unroll 1
        for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < n; i += stride)
            element<V, OP>(i, a, b, c, d, e, f, dinv, flag, k, half, pending, acc);
    } else {
        for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < n; i += stride)
            element<V, OP>(i, a, b, c, d, e, f, dinv, flag, k, half, pending, acc);
    }
    if (OP == CG_P && pending) {
        // Clear PENDING once every block has read it: the last block to take a ticket does.
        __syncthreads();
        if (threadIdx.x == 0 && atomicAdd(counter, 1u) == gridDim.x - 1) {
            st[PENDING] = 0;
            *counter = 0u;
        }
    }
    if (NRED == 0) return;

    __shared__ double scratch[2 * (BLOCK / 32)];
    // The grid is at most 8 blocks per SM (sparsegpu/linalg/_fused.py): 4 loads in flight per
    // thread cover it, and keep the kernel at 32 registers (full occupancy).
    if (!sg::grid_sums<BLOCK, 2, 4>(acc, partials, counter, scratch)) return;
    if (threadIdx.x == 0) epilogue<OP>(acc, flag, sc, st, history);
}
