"""sparsegpu.primitives.scan: scans and segmented scans.

CPU tests check the NumPy references against plain NumPy and per-element loops, and the ordered
look-back reference against the kernel's lane-by-lane statement. GPU tests (marked ``gpu``) run
the CUDA kernels on fresh random data of awkward sizes, compare them with the reference and with
NumPy, and check bitwise run-to-run reproducibility.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsegpu
from sparsegpu import primitives as P
from sparsegpu._kernels import allow_dynamic_shared
from sparsegpu.primitives import _common as primitives_common
from sparsegpu.primitives import scan as primitives_scan
from sparsegpu.reference import primitives as reference
from tests.conftest import to_numpy
from tests.primitives.helpers import (
    DTYPES,
    GPU_SIZES,
    OPS,
    SMALL_SIZES,
    assert_same_bits,
    assert_scan,
    assert_segmented_scan,
    device,
    heads_of,
    poison_pool,
    random_offsets,
    random_values,
    scan_loop,
)

# =========================================================================== CPU: the references


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SMALL_SIZES + [2**20 + 7])
def test_reference_scans_match_numpy(rng, dtype, n):
    x = random_values(rng, n, np.dtype(dtype))
    assert_scan(P.inclusive_scan(x), x)
    assert_scan(P.exclusive_scan(x), x, inclusive=False)
    if n:
        np.testing.assert_array_equal(P.inclusive_scan(x, op="max"), np.maximum.accumulate(x))
        np.testing.assert_array_equal(P.exclusive_scan(x, op="min")[1:], np.minimum.accumulate(x)[:-1])
        assert P.exclusive_scan(x, op="min")[0] == reference.identity("min", x.dtype)


def test_int32_scan_wraps_like_numpy():
    x = np.full(5, np.iinfo(np.int32).max, dtype=np.int32)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(P.inclusive_scan(x), np.cumsum(x, dtype=np.int32))
    assert P.inclusive_scan(x).dtype == np.int32


def test_scan_constants_mirror_the_kernel(rng):
    """primitives.py's copies of kernels/scan.cu's shaping constants agree with the kernel (the
    sweep script and tuning edit scan.cu), and ordered_scan_reference hands them to the reference."""
    import re

    from sparsegpu._kernels import kernel_dir

    source = (kernel_dir() / "scan.cu").read_text()

    def constant(name):
        return int(re.search(rf"constexpr int {name} = (\d+);", source).group(1))

    for name in ("SCAN_BLOCK", "SCAN_THREAD_BYTES", "SCAN_SEGMENTED_THREAD_BYTES", "LOOKBACK_WARPS", "SCAN_CHUNKS_PER_SM"):
        assert getattr(primitives_common, name) == constant(name), name
    x = random_values(rng, 40 * P.SCAN_BLOCK * P.SCAN_THREAD_BYTES // 8 + 3, np.dtype(np.float64))
    want = reference.ordered_lookback_scan(x, block=P.SCAN_BLOCK, thread_bytes=P.SCAN_THREAD_BYTES, span=32 * P.LOOKBACK_WARPS)
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
    """The vectorised reference of the tile prefixes, bit for bit against the lane-by-lane
    statement of the kernel, across several rounds of the span (and a ragged last round)."""
    totals = (rng.standard_normal(3 * span + 5) * 10.0 ** rng.integers(-3, 4, size=3 * span + 5)).astype(dtype)
    assert_same_bits(reference.ordered_tile_prefixes(totals, span), tile_prefixes_by_lanes(totals, span))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 33, 4095, 4096, 4097, 8193, 2**20 + 7, 2**22 + 3])
def test_ordered_lookback_reference_is_a_scan(rng, dtype, n):
    """The association reference of the GPU's reproducible float scan is a scan within the bound."""
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
def test_ordered_lookback_reference_is_a_scan_for_every_variant(rng, dtype, warps, thread_bytes):
    """Any span and tile: still a scan within the bound, and exact on small integers, over two
    rounds of the span and a ragged last tile."""
    span = 32 * warps
    n = (2 * span + 5) * 256 * thread_bytes // np.dtype(dtype).itemsize + 7
    x = random_values(rng, n, np.dtype(dtype))
    knobs = dict(block=256, thread_bytes=thread_bytes, span=span)
    assert_scan(reference.ordered_lookback_scan(x, **knobs), x)
    assert_scan(reference.ordered_lookback_scan(x, False, **knobs), x, inclusive=False)
    whole = (np.arange(n) % 7 == 0).astype(dtype)  # sums of 0 and 1 below 2^24: exact in any association
    np.testing.assert_array_equal(reference.ordered_lookback_scan(whole, **knobs), np.cumsum(whole, dtype=dtype))


def test_ordered_lookback_reference_association_depends_on_the_span(rng):
    """Told the wrong span, the reference gives other bits: why every caller must pass the kernel's."""
    x = random_values(rng, 600 * 4096 + 1, np.dtype(np.float64))  # 601 tiles of 4096 doubles
    by_span = {span: reference.ordered_lookback_scan(x, block=256, thread_bytes=128, span=span) for span in (128, 256)}
    assert by_span[128][: 129 * 4096].tobytes() == by_span[256][: 129 * 4096].tobytes()  # tiles 0..128 agree
    assert by_span[128].tobytes() != by_span[256].tobytes()


def test_ordered_lookback_reference_checks_its_knobs():
    x = np.ones(10)
    with pytest.raises(ValueError, match="span"):
        reference.ordered_lookback_scan(x, block=256, thread_bytes=128, span=100)
    with pytest.raises(ValueError, match="thread_bytes"):
        reference.ordered_lookback_scan(x, block=256, thread_bytes=24, span=256)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("inclusive", [True, False])
def test_reference_segmented_scan_matches_loop(rng, dtype, op, inclusive):
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
def test_reference_segmented_scan_property(values, flags):
    x = np.array(values, dtype=np.int64)
    heads = np.array(flags[: x.size], dtype=bool)
    for inclusive in (True, False):
        np.testing.assert_array_equal(P.segmented_scan(x, flags=heads, inclusive=inclusive), scan_loop(x, heads, inclusive, "sum"))


def test_segmented_scan_single_segment_is_a_scan(rng):
    x = random_values(rng, 1023, np.dtype(np.int64))
    np.testing.assert_array_equal(P.segmented_scan(x, np.array([0, 1023])), np.cumsum(x))
    np.testing.assert_array_equal(P.segmented_scan(x, flags=np.zeros(1023, bool)), np.cumsum(x))


# =========================================================================== GPU: the kernels


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
            np.testing.assert_array_equal(to_numpy(got), fn(x))  # the reference, exactly
        else:
            if float_scan == "ordered-lookback":  # the association reference, bit for bit
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
def test_gpu_ordered_lookback_every_span_is_its_reference(rng, warps, thread_bytes):
    """Each look-back span (1 to 8 polling warps) and tile size: float scans bitwise the reference
    told the same span and tile, three runs alike; int32 exact through either look-back.
    2^23 + 3 elements: 513 to 2049 tiles, two or more rounds of the widest span."""
    knobs = dict(block=P.SCAN_BLOCK, thread_bytes=thread_bytes, span=32 * warps)
    for dtype in (np.float32, np.float64):
        x = random_values(rng, 2**23 + 3, np.dtype(dtype))
        xd = device(x)
        first = to_numpy(scan_variant(xd, True, warps, thread_bytes))
        assert_same_bits(first, reference.ordered_lookback_scan(x, **knobs))
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
def test_gpu_scan_2_27_float32_is_its_reference(rng):
    """The default float scan at 2^27: the association reference's bits, twice."""
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
