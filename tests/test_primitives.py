"""sparsegpu.primitives: scans, segmented scans, reductions, segmented reductions, histograms.

CPU tests check the NumPy twins against plain NumPy (and per-segment loops) and the input
checks. GPU tests (marked ``gpu``) run the CUDA kernels on fresh random data of awkward sizes,
compare them with the twin and with NumPy, and check bitwise run-to-run reproducibility.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsegpu
from sparsegpu import primitives as P
from sparsegpu.primitives import _common as primitives_common
from sparsegpu.primitives import scan as primitives_scan
from sparsegpu._kernels import allow_dynamic_shared
from sparsegpu.reference import primitives as twin
from tests.conftest import to_numpy

DTYPES = [np.int32, np.int64, np.float32, np.float64]
OPS = ["sum", "min", "max"]
UFUNC = {"sum": np.add, "min": np.minimum, "max": np.maximum}
SMALL_SIZES = [0, 1, 31, 32, 33, 1023]
# Plain scan tiles hold SCAN_BLOCK * SCAN_THREAD_BYTES bytes (4096 8-byte or 8192 4-byte
# elements): one tile exactly, one more or less, for either size.
_SCAN_TILE_BYTES = P.SCAN_BLOCK * P.SCAN_THREAD_BYTES
GPU_SIZES = sorted({0, 1, 31, 32, 33, 1023, 2**20 + 7}
                   | {_SCAN_TILE_BYTES // size + d for size in (4, 8) for d in (-1, 0, 1)})


def random_values(rng, n, dtype, low=-1000, high=1000):
    """Fresh random data of ``dtype``: integers in [low, high), floats standard normal."""
    if np.dtype(dtype).kind == "i":
        return rng.integers(low, high, size=n, dtype=dtype)
    return rng.standard_normal(n).astype(dtype)


def random_offsets(rng, n, n_segments, *, empty_share=0.3, whole=True):
    """Sorted offsets into [0, n] with about ``empty_share`` of the segments empty."""
    cuts = np.sort(rng.integers(0, n + 1, size=max(n_segments - 1, 0)))
    offsets = np.concatenate([[0], cuts, [n]]) if whole else np.sort(rng.integers(0, n + 1, size=n_segments + 1))
    repeat = rng.random(offsets.size) < empty_share
    repeat[0] = repeat[-1] = False
    offsets[repeat] = offsets[np.flatnonzero(repeat) - 1]
    return np.maximum.accumulate(offsets).astype(np.int64)


def scan_loop(x, heads, inclusive, op):
    """The definition, one element at a time (small inputs only)."""
    out = np.empty_like(x)
    acc = twin.identity(op, x.dtype)
    with np.errstate(over="ignore"):
        for i, v in enumerate(x):
            if i == 0 or heads[i]:
                acc = twin.identity(op, x.dtype)
            before = acc
            acc = UFUNC[op](acc, v, dtype=x.dtype)
            out[i] = acc if inclusive else before
    return out


def scan_bound(x, dtype):
    """Elementwise error bound for a float sum-scan of x: eps times (a generous depth) times
    the running sum of |x|, the scale of every partial sum."""
    n = max(x.size, 1)
    depth = 64 + 4 * np.log2(n + 1) + n / 1024
    return np.finfo(dtype).eps * depth * np.cumsum(np.abs(x.astype(np.float64))) + np.finfo(np.float64).tiny


def assert_segment_sums(got, x, offsets, depth=128):
    """Float segment sums within eps * depth * (sum of |x| over the segment) of float64 sums."""
    got = to_numpy(got).astype(np.float64)
    want = twin.segmented_reduce(x.astype(np.float64), offsets)
    scale = twin.segmented_reduce(np.abs(x.astype(np.float64)), offsets)
    bound = np.finfo(x.dtype).eps * depth * scale + np.finfo(np.float64).tiny
    err = np.abs(got - want)
    assert np.all(err <= bound), f"worst segment {int(np.argmax(err - bound))}"


def assert_segmented_scan(got, x, offsets, inclusive):
    """Segmented sum-scans: integers exactly as the twin; floats within scan_bound's depth
    times the segment's running sum of |x|, against float64."""
    if x.dtype.kind == "i":
        np.testing.assert_array_equal(to_numpy(got), twin.segmented_scan(x, heads_of(offsets, x.size), inclusive))
        return
    got = to_numpy(got).astype(np.float64)
    want = twin.segmented_scan(x.astype(np.float64), heads_of(offsets, x.size), inclusive)
    scale = twin.segmented_scan(np.abs(x.astype(np.float64)), heads_of(offsets, x.size), True)
    n = max(x.size, 1)
    bound = np.finfo(x.dtype).eps * (64 + 4 * np.log2(n + 1) + n / 1024) * scale + np.finfo(np.float64).tiny
    err = np.abs(got - want)
    assert np.all(err <= bound), f"worst entry {int(np.argmax(err - bound))}"


def heads_of(offsets, n):
    heads = np.zeros(n, dtype=bool)
    heads[offsets[offsets < n]] = True
    return heads


def assert_scan(got, x, inclusive=True):
    """Integers exactly as np.cumsum(dtype=x.dtype); floats within scan_bound of float64."""
    got = to_numpy(got)
    assert got.dtype == x.dtype and got.shape == x.shape
    want = np.cumsum(x, dtype=x.dtype) if x.dtype.kind == "i" else np.cumsum(x.astype(np.float64))
    if not inclusive and x.size:
        want = np.concatenate([[0], want[:-1]]).astype(want.dtype)
    if x.dtype.kind == "i":
        np.testing.assert_array_equal(got, want)
    else:
        bound = scan_bound(x, x.dtype)
        err = np.abs(got.astype(np.float64) - want)
        assert np.all(err <= bound), f"worst entry {int(np.argmax(err - bound))}"


# =========================================================================== CPU: the twins


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SMALL_SIZES + [2**20 + 7])
def test_twin_scans_match_numpy(rng, dtype, n):
    x = random_values(rng, n, np.dtype(dtype))
    assert_scan(P.inclusive_scan(x), x)
    assert_scan(P.exclusive_scan(x), x, inclusive=False)
    if n:
        np.testing.assert_array_equal(P.inclusive_scan(x, op="max"), np.maximum.accumulate(x))
        np.testing.assert_array_equal(P.exclusive_scan(x, op="min")[1:], np.minimum.accumulate(x)[:-1])
        assert P.exclusive_scan(x, op="min")[0] == twin.identity("min", x.dtype)


def test_int32_scan_wraps_like_numpy():
    x = np.full(5, np.iinfo(np.int32).max, dtype=np.int32)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(P.inclusive_scan(x), np.cumsum(x, dtype=np.int32))
    assert P.inclusive_scan(x).dtype == np.int32


def test_scan_constants_mirror_the_kernel(rng):
    """primitives.py's copies of kernels/scan.cu's shaping constants agree with the kernel (the
    sweep script and tuning edit scan.cu), and ordered_scan_reference hands them to the twin."""
    import re

    from sparsegpu._kernels import kernel_dir

    source = (kernel_dir() / "scan.cu").read_text()

    def constant(name):
        return int(re.search(rf"constexpr int {name} = (\d+);", source).group(1))

    for name in ("SCAN_BLOCK", "SCAN_THREAD_BYTES", "SCAN_SEGMENTED_THREAD_BYTES", "LOOKBACK_WARPS", "SCAN_CHUNKS_PER_SM"):
        assert getattr(primitives_common, name) == constant(name), name
    x = random_values(rng, 40 * P.SCAN_BLOCK * P.SCAN_THREAD_BYTES // 8 + 3, np.dtype(np.float64))
    want = twin.ordered_lookback_scan(x, block=P.SCAN_BLOCK, thread_bytes=P.SCAN_THREAD_BYTES, span=32 * P.LOOKBACK_WARPS)
    assert_same_bits(P.ordered_scan_reference(x), want)


def tile_prefixes_by_lanes(totals, span):
    """kernels/scan.cu's ordered look-back as the kernel states it, tile by tile: thread k of
    the span polls the predecessor k + 1 tiles back (its inclusive prefix for k = span - 1,
    else its aggregate), each warp folds with shfl_down offsets 1..16 (v = down + v; out-of-range
    lanes read their own value), thread 0 folds warp span/32 - 1 first, then the nearer ones."""
    dtype = totals.dtype
    exclusive = np.zeros_like(totals)
    inclusive = np.zeros_like(totals)
    inclusive[0] = totals[0]
    for t in range(1, totals.size):
        slots = np.zeros(span, dtype=dtype)
        for k in range(span):
            p = t - 1 - k
            if p >= 0:
                slots[k] = inclusive[p] if k == span - 1 else totals[p]
        folds = []
        for w in range(span // 32):
            v = slots[32 * w: 32 * w + 32].copy()
            offset = 1
            while offset < 32:
                down = np.concatenate([v[offset:], v[32 - offset:]])  # lanes past 31 keep their own
                v = down + v
                offset *= 2
            folds.append(v[0])
        acc = folds[-1]
        for f in reversed(folds[:-1]):
            acc = dtype.type(acc + f)
        exclusive[t] = acc
        inclusive[t] = dtype.type(acc + totals[t])
    return exclusive


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("span", [32, 64, 96, 128, 192, 256])
def test_ordered_tile_prefixes_follow_the_kernel(rng, dtype, span):
    """The vectorised twin of the tile prefixes, bit for bit against the lane-by-lane
    statement of the kernel, across several rounds of the span (and a ragged last round)."""
    totals = (rng.standard_normal(3 * span + 5) * 10.0 ** rng.integers(-3, 4, size=3 * span + 5)).astype(dtype)
    assert_same_bits(twin.ordered_tile_prefixes(totals, span), tile_prefixes_by_lanes(totals, span))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 33, 4095, 4096, 4097, 8193, 2**20 + 7, 2**22 + 3])
def test_ordered_lookback_twin_is_a_scan(rng, dtype, n):
    """The association twin of the GPU's reproducible float scan is a scan within the bound."""
    x = random_values(rng, n, np.dtype(dtype))
    assert_scan(P.ordered_scan_reference(x), x)
    assert_scan(P.ordered_scan_reference(x, inclusive=False), x, inclusive=False)
    whole = np.arange(n, dtype=dtype) % 7  # small integers: every association gives the same sums
    np.testing.assert_array_equal(P.ordered_scan_reference(whole), np.cumsum(whole, dtype=dtype))


# (look-back warps, bytes per thread) of scan_single_pass that the tests build: every span at the
# default tile, and the larger tiles (48 and 64 KiB) at two spans.
LOOKBACK_VARIANTS = [(1, 128), (2, 128), (4, 128), (6, 128), (8, 128), (4, 192), (8, 192), (4, 256), (8, 256)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("warps, thread_bytes", LOOKBACK_VARIANTS)
def test_ordered_lookback_twin_is_a_scan_for_every_variant(rng, dtype, warps, thread_bytes):
    """Any span and tile: still a scan within the bound, and exact on small integers, over two
    rounds of the span and a ragged last tile."""
    span = 32 * warps
    n = (2 * span + 5) * 256 * thread_bytes // np.dtype(dtype).itemsize + 7
    x = random_values(rng, n, np.dtype(dtype))
    knobs = dict(block=256, thread_bytes=thread_bytes, span=span)
    assert_scan(twin.ordered_lookback_scan(x, **knobs), x)
    assert_scan(twin.ordered_lookback_scan(x, False, **knobs), x, inclusive=False)
    whole = (np.arange(n) % 7 == 0).astype(dtype)  # sums of 0 and 1 below 2^24: exact in any association
    np.testing.assert_array_equal(twin.ordered_lookback_scan(whole, **knobs), np.cumsum(whole, dtype=dtype))


def test_ordered_lookback_twin_association_depends_on_the_span(rng):
    """Told the wrong span, the twin gives other bits: why every caller must pass the kernel's."""
    x = random_values(rng, 600 * 4096 + 1, np.dtype(np.float64))  # 601 tiles of 4096 doubles
    by_span = {span: twin.ordered_lookback_scan(x, block=256, thread_bytes=128, span=span) for span in (128, 256)}
    assert by_span[128][: 129 * 4096].tobytes() == by_span[256][: 129 * 4096].tobytes()  # tiles 0..128 agree
    assert by_span[128].tobytes() != by_span[256].tobytes()


def test_ordered_lookback_twin_checks_its_knobs():
    x = np.ones(10)
    with pytest.raises(ValueError, match="span"):
        twin.ordered_lookback_scan(x, block=256, thread_bytes=128, span=100)
    with pytest.raises(ValueError, match="thread_bytes"):
        twin.ordered_lookback_scan(x, block=256, thread_bytes=24, span=256)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("inclusive", [True, False])
def test_twin_segmented_scan_matches_loop(rng, dtype, op, inclusive):
    x = random_values(rng, 200, np.dtype(dtype))
    offsets = random_offsets(rng, 200, 40)
    heads = np.zeros(200, dtype=bool)
    heads[offsets[offsets < 200]] = True
    want = scan_loop(x, heads, inclusive, op)
    by_offsets = P.segmented_scan(x, offsets, inclusive=inclusive, op=op)
    by_flags = P.segmented_scan(x, flags=heads.astype(np.int8), inclusive=inclusive, op=op)
    if x.dtype.kind == "i" or op != "sum":
        np.testing.assert_array_equal(by_offsets, want)
        np.testing.assert_array_equal(by_flags, want)
    else:
        assert_segmented_scan(by_offsets, x, offsets, inclusive)
        np.testing.assert_array_equal(by_offsets, by_flags)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-50, 50), max_size=70), st.lists(st.booleans(), min_size=70, max_size=70))
def test_twin_segmented_scan_property(values, flags):
    x = np.array(values, dtype=np.int64)
    heads = np.array(flags[: x.size], dtype=bool)
    for inclusive in (True, False):
        np.testing.assert_array_equal(P.segmented_scan(x, flags=heads, inclusive=inclusive), scan_loop(x, heads, inclusive, "sum"))


def test_segmented_scan_single_segment_is_a_scan(rng):
    x = random_values(rng, 1023, np.dtype(np.int64))
    np.testing.assert_array_equal(P.segmented_scan(x, np.array([0, 1023])), np.cumsum(x))
    np.testing.assert_array_equal(P.segmented_scan(x, flags=np.zeros(1023, bool)), np.cumsum(x))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", SMALL_SIZES + [2**20 + 7])
def test_twin_reduce_matches_numpy(rng, dtype, op, n):
    x = random_values(rng, n, np.dtype(dtype))
    got = P.reduce(x, op)
    assert isinstance(got, np.generic) and got.dtype == x.dtype
    if n == 0:
        assert got == twin.identity(op, x.dtype)
    elif x.dtype.kind == "i" or op != "sum":
        assert got == UFUNC[op].reduce(x, dtype=x.dtype)
    else:
        assert abs(float(got) - float(np.sum(x.astype(np.float64)))) <= 1e-5 * n * np.abs(x).max()


def test_reduce_extremes():
    for dtype in (np.int32, np.int64):
        info = np.iinfo(dtype)
        x = np.array([info.max, info.min, 0, info.max], dtype=dtype)
        assert P.reduce(x, "min") == info.min and P.reduce(x, "max") == info.max
    x = np.array([1.0, np.inf, -np.inf, 2.0])
    assert P.reduce(x, "min") == -np.inf and P.reduce(x, "max") == np.inf
    assert np.isnan(P.reduce(np.array([1.0, np.nan, 0.0]), "min"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_twin_segmented_reduce_matches_loop(rng, dtype, op):
    x = random_values(rng, 500, np.dtype(dtype))
    for whole in (True, False):
        offsets = random_offsets(rng, 500, 60, whole=whole)
        got = P.segmented_reduce(x, offsets, op)
        want = [P.reduce(x[a:b], op) for a, b in zip(offsets[:-1], offsets[1:])]
        if x.dtype.kind == "i" or op != "sum":
            np.testing.assert_array_equal(got, np.array(want, dtype=x.dtype))
        else:
            assert_segment_sums(got, x, offsets)


def test_segmented_reduce_empty_segments_give_identity():
    x = np.arange(4, dtype=np.int32)
    offsets = np.array([0, 0, 2, 2, 4, 4])
    assert P.segmented_reduce(x, offsets).tolist() == [0, 1, 0, 5, 0]
    big, small = np.iinfo(np.int32).max, np.iinfo(np.int32).min
    assert P.segmented_reduce(x, offsets, "min").tolist() == [big, 0, big, 2, big]
    assert P.segmented_reduce(x, offsets, "max").tolist() == [small, 1, small, 3, small]
    assert P.segmented_reduce(x, np.array([3])).size == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_twin_histogram_matches_numpy(rng, dtype):
    values = random_values(rng, 5000, np.dtype(dtype), low=-20, high=300)
    for bins, range_ in [(256, (0, 256)), (7, None), (1, (5, 5)), (100, (-3.5, 17.25)), (64, (-64, 320))]:
        got = P.histogram(values, bins, range=range_)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, np.histogram(values.astype(np.float64), bins, range=range_)[0])
    edges = np.array([-25.0, -1.0, 0.0, 0.0, 3.5, 100.0, 299.0])
    np.testing.assert_array_equal(P.histogram(values, edges), np.histogram(values.astype(np.float64), edges)[0])


def test_histogram_drops_out_of_range_and_nan():
    values = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, np.nan, np.inf], dtype=np.float64)
    assert P.histogram(values, 2, range=(0, 1)).tolist() == [1, 2]
    ints = np.array([np.iinfo(np.int64).min, 0, 3, np.iinfo(np.int64).max], dtype=np.int64)
    assert P.histogram(ints, 4, range=(0, 4)).tolist() == [1, 0, 0, 1]


def test_histogram_all_equal_values():
    values = np.full(1000, 7, dtype=np.int32)
    assert P.histogram(values, 3).tolist() == [0, 1000, 0]  # range (6.5, 7.5), as NumPy widens it


# =========================================================================== CPU: bad input


@pytest.mark.parametrize("fn", [P.inclusive_scan, P.exclusive_scan, P.reduce])
def test_bad_arrays_raise(fn):
    with pytest.raises(ValueError, match="1-D"):
        fn(np.zeros((2, 2)))
    for bad in (np.zeros(3, dtype=np.uint8), np.zeros(3, dtype=np.float16), np.zeros(3, dtype=bool), np.zeros(3, dtype=np.complex64)):
        with pytest.raises(TypeError, match="dtype"):
            fn(bad)


def test_bad_ops_and_offsets_raise():
    x = np.arange(10.0)
    with pytest.raises(ValueError, match="op must be"):
        P.reduce(x, "prod")
    with pytest.raises(ValueError, match="non-decreasing"):
        P.segmented_reduce(x, np.array([0, 5, 3, 10]))
    with pytest.raises(ValueError, match="lie in"):
        P.segmented_reduce(x, np.array([0, 11]))
    with pytest.raises(ValueError, match="lie in"):
        P.segmented_reduce(x, np.array([-1, 4]))
    with pytest.raises(TypeError, match="integers"):
        P.segmented_reduce(x, np.array([0.0, 10.0]))
    with pytest.raises(ValueError, match="at least one"):
        P.segmented_reduce(x, np.array([], dtype=np.int64))
    with pytest.raises(ValueError, match="from 0 to"):
        P.segmented_scan(x, np.array([1, 10]))
    with pytest.raises(ValueError, match="exactly one"):
        P.segmented_scan(x)
    with pytest.raises(ValueError, match="exactly one"):
        P.segmented_scan(x, np.array([0, 10]), flags=np.zeros(10))
    with pytest.raises(ValueError, match="length"):
        P.segmented_scan(x, flags=np.zeros(9, dtype=bool))
    with pytest.raises(TypeError, match="boolean or integer"):
        P.segmented_scan(x, flags=np.zeros(10))


def test_bad_histogram_arguments_raise():
    values = np.arange(10, dtype=np.int32)
    with pytest.raises(ValueError, match="positive"):
        P.histogram(values, 0)
    with pytest.raises(ValueError, match="positive"):
        P.histogram(values, -3)
    with pytest.raises(TypeError, match="bins"):
        P.histogram(values, 2.5)
    with pytest.raises(TypeError, match="bins"):
        P.histogram(values, True)
    with pytest.raises(ValueError, match="lo <= hi"):
        P.histogram(values, 4, range=(5, 1))
    with pytest.raises(ValueError, match="finite"):
        P.histogram(values, 4, range=(0, np.inf))
    with pytest.raises(ValueError, match="non-decreasing"):
        P.histogram(values, np.array([0.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match="range applies"):
        P.histogram(values, np.array([0.0, 1.0]), range=(0, 1))
    with pytest.raises(ValueError, match="not finite"):
        P.histogram(np.array([0.0, np.inf]), 4)


# =========================================================================== GPU: the kernels


def device(x):
    import cupy

    return cupy.asarray(x)


def poison_pool(nbytes):
    """Fill a pool block of ``nbytes`` with 0xA5 bytes and free it, so the next output of that
    size most likely lands on it: entries a kernel leaves unwritten then show (NaN-free but
    absurd values for every dtype)."""
    import cupy

    if nbytes:
        block = cupy.empty(nbytes, dtype=np.uint8)
        block.fill(0xA5)
        del block


def assert_same_bits(got, want):
    got, want = to_numpy(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), f"first differing entry {int(np.argmax(got != want))}"


FLOAT_SCANS = ["reduce-then-scan", "ordered-lookback"]


@pytest.fixture(params=FLOAT_SCANS)
def float_scan(request, monkeypatch):
    """Each way the default (deterministic) float scan can run."""
    monkeypatch.setattr(primitives_scan, "DETERMINISTIC_FLOAT_SCAN", request.param)
    return request.param


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", GPU_SIZES)
def test_gpu_scans(rng, dtype, n, float_scan):
    x = random_values(rng, n, np.dtype(dtype))
    xd = device(x)
    for inclusive, fn in ((True, P.inclusive_scan), (False, P.exclusive_scan)):
        poison_pool(x.nbytes)
        got = fn(xd)
        assert type(got) is type(xd)
        assert_scan(got, x, inclusive)
        if x.dtype.kind == "i":
            np.testing.assert_array_equal(to_numpy(got), fn(x))  # the twin, exactly
        else:
            if float_scan == "ordered-lookback":  # the association twin, bit for bit
                assert_same_bits(got, P.ordered_scan_reference(x, inclusive))
            poison_pool(x.nbytes)
            assert to_numpy(fn(xd)).tobytes() == to_numpy(got).tobytes(), "not bitwise reproducible"
            with sparsegpu.options(deterministic=False):
                assert_scan(fn(xd), x, inclusive)  # the unordered single-pass path
        for op in ("min", "max"):
            np.testing.assert_array_equal(to_numpy(fn(xd, op=op)), fn(x, op=op))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_float_scans_bitwise_reproducible(rng, dtype, float_scan):
    """Many tiles, many runs: the look-back meets predecessors in varying states each time."""
    x = random_values(rng, 2**23 + 5, np.dtype(dtype))
    xd = device(x)
    first = to_numpy(P.inclusive_scan(xd))
    assert_scan(first, x)
    if float_scan == "ordered-lookback":
        assert_same_bits(first, P.ordered_scan_reference(x))
    for _ in range(10):
        assert to_numpy(P.inclusive_scan(xd)).tobytes() == first.tobytes()


@functools.cache
def lookback_variant_kernels():
    """scan_single_pass (plain, inclusive, 16-byte vectors) at each of LOOKBACK_VARIANTS, named
    through its template parameters: the floats ordered, int32 ordered and unordered."""
    from sparsegpu._kernels import KernelFile

    def expression(ordered, warps, thread_bytes):
        return f"scan_single_pass<{{V}}, sg::Sum<{{V}}>, true, false, true, {str(ordered).lower()}, {warps}, {thread_bytes}>"

    floats = KernelFile("scan.cu", [expression(True, w, b) for w, b in LOOKBACK_VARIANTS], (np.float32, np.float64), (np.int32,))
    ints = KernelFile("scan.cu", [expression(o, w, b) for w, b in LOOKBACK_VARIANTS for o in (True, False)],
                      (np.int32,), (np.int32,))
    for test_only in (floats, ints):  # not what the library launches (CI instantiates the registry)
        KernelFile.registry.remove(test_only)
    return floats, ints, expression


def scan_variant(xd, ordered, warps, thread_bytes):
    """An inclusive sum-scan of xd by one scan_single_pass variant, launched as primitives.py
    launches its own (the look-back state of the stream, the tile in dynamic shared memory)."""
    import cupy

    floats, ints, expression = lookback_variant_kernels()
    n = xd.size
    n_tiles = -(-n // (P.SCAN_BLOCK * thread_bytes // xd.dtype.itemsize))
    y = cupy.full(n, np.nan if xd.dtype.kind == "f" else -7, dtype=xd.dtype)
    shared = primitives_scan._scan_shared_bytes(False, thread_bytes)
    kernel = (floats if xd.dtype.kind == "f" else ints).function(expression(ordered, warps, thread_bytes), xd.dtype)
    words = primitives_scan._lookback_state(n_tiles, xd.dtype.itemsize // 4)
    allow_dynamic_shared(kernel, shared)((n_tiles,), (P.SCAN_BLOCK,), (xd, xd, y, np.int64(n), words), shared_mem=shared)
    return y


@pytest.mark.gpu
@pytest.mark.parametrize("warps, thread_bytes", LOOKBACK_VARIANTS)
def test_gpu_ordered_lookback_every_span_is_its_twin(rng, warps, thread_bytes):
    """Each look-back span (1 to 8 polling warps) and tile size: float scans bitwise the twin
    told the same span and tile, three runs alike; int32 exact through either look-back.
    2^23 + 3 elements: 513 to 2049 tiles, two or more rounds of the widest span."""
    knobs = dict(block=P.SCAN_BLOCK, thread_bytes=thread_bytes, span=32 * warps)
    for dtype in (np.float32, np.float64):
        x = random_values(rng, 2**23 + 3, np.dtype(dtype))
        xd = device(x)
        first = to_numpy(scan_variant(xd, True, warps, thread_bytes))
        assert_same_bits(first, twin.ordered_lookback_scan(x, **knobs))
        for _ in range(2):
            assert to_numpy(scan_variant(xd, True, warps, thread_bytes)).tobytes() == first.tobytes(), "not reproducible"
    x = random_values(rng, 2**23 + 3, np.dtype(np.int32))
    xd = device(x)
    for ordered in (True, False):
        np.testing.assert_array_equal(to_numpy(scan_variant(xd, ordered, warps, thread_bytes)), np.cumsum(x, dtype=np.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_gpu_integer_scans_through_the_ordered_lookback(rng, dtype, monkeypatch):
    """ORDERED_LOOKBACK_FOR_INTEGERS: plain and segmented integer scans stay exact."""
    monkeypatch.setattr(primitives_scan, "ORDERED_LOOKBACK_FOR_INTEGERS", True)
    for n in GPU_SIZES + [2**22 + 3]:
        x = random_values(rng, n, np.dtype(dtype))
        xd = device(x)
        for inclusive, fn in ((True, P.inclusive_scan), (False, P.exclusive_scan)):
            poison_pool(x.nbytes)
            np.testing.assert_array_equal(to_numpy(fn(xd)), fn(x))
        if n:
            offsets = random_offsets(rng, n, max(n // 50, 1))
            np.testing.assert_array_equal(to_numpy(P.segmented_scan(xd, device(offsets))), P.segmented_scan(x, offsets))


@pytest.mark.gpu
def test_gpu_unknown_float_scan_raises(monkeypatch):
    monkeypatch.setattr(primitives_scan, "DETERMINISTIC_FLOAT_SCAN", "fastest")
    with pytest.raises(ValueError, match="DETERMINISTIC_FLOAT_SCAN"):
        P.inclusive_scan(device(np.ones(100_000)))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_scans_of_misaligned_views(rng, dtype):
    x = random_values(rng, 100_003, np.dtype(dtype))
    xd = device(x)
    assert_scan(P.inclusive_scan(xd[1:]), x[1:])
    assert_scan(P.exclusive_scan(xd[3:-2]), x[3:-2], inclusive=False)
    assert_scan(P.inclusive_scan(xd[::3]), x[::3])  # strided: copied first


@pytest.mark.gpu
def test_gpu_scan_2_27_int32(rng):
    x = rng.integers(-100, 100, size=2**27, dtype=np.int32)
    poison_pool(x.nbytes)
    got = P.inclusive_scan(device(x))
    np.testing.assert_array_equal(to_numpy(got), np.cumsum(x, dtype=np.int32))


@pytest.mark.gpu
def test_gpu_scan_2_27_float32_is_its_twin(rng):
    """The default float scan at 2^27: the association twin's bits, twice."""
    x = rng.standard_normal(2**27, dtype=np.float32)
    xd = device(x)
    want = P.ordered_scan_reference(x)
    assert_same_bits(P.inclusive_scan(xd), want)
    assert_same_bits(P.inclusive_scan(xd), want)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_scan_all_equal_values(dtype):
    x = np.full(2**20 + 7, 3, dtype=dtype)
    for inclusive, fn in ((True, P.inclusive_scan), (False, P.exclusive_scan)):
        np.testing.assert_array_equal(to_numpy(fn(device(x))), fn(x))  # small integers: exact in any order


@pytest.mark.gpu
def test_gpu_scan_lookback_state_survives_reuse(rng):
    """The look-back state (epoch, tickets, descriptors) is reused without a reset: scans of
    shrinking and growing sizes, of several value layouts, on two streams, in a row."""
    import cupy

    for stream in (None, cupy.cuda.Stream(non_blocking=True)):
        with stream if stream is not None else cupy.cuda.Stream.null:
            for n in (70_001, 5_000, 2**20 + 7, 3, 4096, 2**20 + 7, 9_000):
                for dtype in (np.int32, np.int64):
                    x = random_values(rng, n, np.dtype(dtype))
                    np.testing.assert_array_equal(to_numpy(P.inclusive_scan(device(x))), np.cumsum(x, dtype=dtype))
                x = random_values(rng, n, np.dtype(np.float64))
                assert_same_bits(P.exclusive_scan(device(x)), P.ordered_scan_reference(x, inclusive=False))
                offsets = random_offsets(rng, n, max(n // 50, 1))
                xi = random_values(rng, n, np.dtype(np.int64))
                np.testing.assert_array_equal(to_numpy(P.segmented_scan(device(xi), device(offsets))),
                                              P.segmented_scan(xi, offsets))


@pytest.mark.gpu
def test_gpu_scan_extremes_wrap_like_numpy():
    for dtype in (np.int32, np.int64):
        info = np.iinfo(dtype)
        x = np.tile(np.array([info.max, info.min, info.max, 1, -1], dtype=dtype), 3000)
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(to_numpy(P.inclusive_scan(device(x))), np.cumsum(x, dtype=dtype))
    x = np.array([1.0, np.inf, 2.0, -np.inf, 3.0] * 2000)
    np.testing.assert_array_equal(to_numpy(P.inclusive_scan(device(x))), np.cumsum(x))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 33, 1023, 70_001, 2**20 + 7])
@pytest.mark.parametrize("inclusive", [True, False])
def test_gpu_segmented_scans(rng, dtype, n, inclusive, float_scan):
    x = random_values(rng, n, np.dtype(dtype))
    xd = device(x)
    for n_segments in (1, 5, max(n // 3, 1)):
        offsets = random_offsets(rng, n, n_segments)
        got = P.segmented_scan(xd, device(offsets), inclusive=inclusive)
        assert_segmented_scan(got, x, offsets, inclusive)
        by_flags = P.segmented_scan(xd, flags=device(heads_of(offsets, n)), inclusive=inclusive)
        assert to_numpy(by_flags).tobytes() == to_numpy(got).tobytes(), "flags and offsets differ, or not reproducible"
        for op in ("min", "max"):
            np.testing.assert_array_equal(to_numpy(P.segmented_scan(xd, device(offsets), inclusive=inclusive, op=op)),
                                          P.segmented_scan(x, offsets, inclusive=inclusive, op=op))
        if x.dtype.kind == "f":
            with sparsegpu.options(deterministic=False):
                assert_segmented_scan(P.segmented_scan(xd, device(offsets), inclusive=inclusive), x, offsets, inclusive)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", GPU_SIZES)
def test_gpu_reduce(rng, dtype, op, n):
    x = random_values(rng, n, np.dtype(dtype))
    xd = device(x)
    got = P.reduce(xd, op)
    assert got.shape == () and got.dtype == x.dtype
    if n == 0:
        assert to_numpy(got) == twin.identity(op, x.dtype)
    elif x.dtype.kind == "i" or op != "sum":
        assert to_numpy(got) == UFUNC[op].reduce(x, dtype=x.dtype)
    else:
        want = np.sum(x.astype(np.float64))
        assert abs(float(got) - want) <= np.finfo(x.dtype).eps * 64 * np.abs(x).astype(np.float64).sum() + 1e-300
        assert to_numpy(P.reduce(xd, op)).tobytes() == to_numpy(got).tobytes(), "not bitwise reproducible"
    if n > 8:  # a view that is not 16-byte aligned
        view = x[3:-1]
        got = P.reduce(xd[3:-1], op)
        if x.dtype.kind == "f" and op == "sum":
            assert_segment_sums(to_numpy(got).reshape(1), view, np.array([0, view.size]))
        else:
            assert to_numpy(got) == P.reduce(view, op)


@pytest.mark.gpu
def test_gpu_reduce_extremes():
    for dtype in (np.int32, np.int64):
        info = np.iinfo(dtype)
        x = np.full(100_001, info.max, dtype=dtype)
        x[77_777] = info.min
        assert int(P.reduce(device(x), "min")) == info.min and int(P.reduce(device(x), "max")) == info.max
    x = np.zeros(100_001)
    x[5], x[99_000] = np.inf, -np.inf
    assert float(P.reduce(device(x), "max")) == np.inf and float(P.reduce(device(x), "min")) == -np.inf
    x[1234] = np.nan
    assert np.isnan(float(P.reduce(device(x), "min"))) and np.isnan(float(P.reduce(device(x), "sum")))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gpu_segmented_reduce(rng, dtype, op, index_dtype):
    n = 2**20 + 7
    x = random_values(rng, n, np.dtype(dtype))
    xd = device(x)
    cases = [
        random_offsets(rng, n, n // 4),  # short segments, many empty
        random_offsets(rng, n, 300),  # long ones: the chunk kernels
        np.array([0, n]),  # a single segment
        np.array([0, 0, 5, 5, n, n]),  # empty segments around a long one
        random_offsets(rng, n, 1000, whole=False),  # offsets not starting at 0
    ]
    for offsets in cases:
        offsets = offsets.astype(index_dtype)
        got = P.segmented_reduce(xd, device(offsets), op)
        if x.dtype.kind == "f" and op == "sum":
            assert_segment_sums(got, x, offsets)
        else:
            np.testing.assert_array_equal(to_numpy(got), P.segmented_reduce(x, offsets, op))
        assert to_numpy(P.segmented_reduce(xd, device(offsets), op)).tobytes() == to_numpy(got).tobytes()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 33, 1023, 2**20 + 7])
def test_gpu_histogram(rng, dtype, n):
    values = random_values(rng, n, np.dtype(dtype), low=-10, high=300)
    vd = device(values)
    reference = values.astype(np.float64)
    # Integer-width bins (integer values: integer arithmetic), others, shared and global memory.
    # 256 and 384 bins: a column per lane; 1000 and 3000: a table per warp; 100000: global.
    cases = [(256, (0, 256)), (64, (-64, 320)), (100_000, (0, 300_000)), (256, None), (13, (-2.5, 200.0)),
             (100_000, (0, 300)), (1, (0, 1)), (384, (-84, 300)), (1000, (-10, 290)), (3000, (-10.0, 300.0))]
    for bins, range_ in cases:
        if range_ is None and n == 0:
            continue
        got = P.histogram(vd, bins, range=range_)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(to_numpy(got), P.histogram(values, bins, range=range_))
        np.testing.assert_array_equal(to_numpy(got), np.histogram(reference, bins, range=range_)[0])
    for edges in (np.array([-5.0, 0.0, 0.0, 1.5, 64.0, 299.0]), np.linspace(-10, 300, 6001), np.linspace(-10, 300, 258)):
        got = P.histogram(vd, edges)
        np.testing.assert_array_equal(to_numpy(got), np.histogram(reference, edges)[0])


@pytest.mark.gpu
def test_gpu_histogram_equal_keys_and_extremes():
    values = np.full(2**20 + 7, 42, dtype=np.int32)
    np.testing.assert_array_equal(to_numpy(P.histogram(device(values), 256, range=(0, 256))), np.bincount(values, minlength=256))
    np.testing.assert_array_equal(to_numpy(P.histogram(device(values), 50_000, range=(0, 50_000))), np.bincount(values, minlength=50_000))
    info = np.iinfo(np.int64)
    ints = np.array([info.min, 0, 1, 255, 256, info.max] * 1000, dtype=np.int64)
    np.testing.assert_array_equal(to_numpy(P.histogram(device(ints), 256, range=(0, 256))), P.histogram(ints, 256, range=(0, 256)))
    floats = np.array([np.nan, -np.inf, np.inf, 0.0, 1.0, 0.5] * 1000)
    np.testing.assert_array_equal(to_numpy(P.histogram(device(floats), 4, range=(0, 1))), [1000, 0, 1000, 1000])


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 33, 4097, 2**20 + 7])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_histogram_all_equal_keys(n, dtype):
    """All-equal keys land in one bin: every lane of every warp adds to the same bin."""
    for key, bins, range_ in ((200, 256, (0, 256)), (0, 256, (0, 256)), (255, 256, (0, 256)), (7, 1000, (0, 1000))):
        values = np.full(n, key, dtype=dtype)
        poison_pool(8 * bins)
        got = P.histogram(device(values), bins, range=range_)
        np.testing.assert_array_equal(to_numpy(got), np.histogram(values.astype(np.float64), bins, range=range_)[0])


@pytest.mark.gpu
def test_gpu_histogram_int32_extremes_at_the_32_bit_limits(rng):
    """int32 keys binned in 32-bit arithmetic when the range allows, 64-bit otherwise: the
    same counts as NumPy at the ends of int32 and of ranges beyond it."""
    info = np.iinfo(np.int32)
    values = np.concatenate([np.array([info.min, info.min + 1, -1, 0, 1, 255, 256, info.max - 1, info.max] * 100, dtype=np.int32),
                             rng.integers(info.min, info.max, size=100_000, dtype=np.int32, endpoint=True)])
    ranges = [(0, 256), (-(2**31), 2**31), (2**31 - 256, 2**31), (2**31 - 1, 2**31 - 1 + 2**32), (-(2**40), 2**40),
              (-(2**31) - 256, -(2**31)), (-(2**31), -(2**31) + 256)]
    for range_ in ranges:
        got = P.histogram(device(values), 256, range=range_)
        np.testing.assert_array_equal(to_numpy(got), P.histogram(values, 256, range=range_), err_msg=str(range_))
        np.testing.assert_array_equal(to_numpy(got), np.histogram(values.astype(np.float64), 256, range=range_)[0],
                                      err_msg=str(range_))
