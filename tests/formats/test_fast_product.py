"""The per-call fast path of ``A @ x`` and ``A.spmv(x, y)`` (sparsegpu/formats/_fast_product.py):
argument packing and the signature cache on the CPU (stand-in arrays, no GPU), and on the GPU
bitwise agreement with the general path for every format."""

from __future__ import annotations

import ctypes
import re
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import _kernels
from sparsegpu.formats import _base, _fast_product
from sparsegpu.formats._fast_product import (
    ALPHA,
    BETA,
    POINTER,
    VALUE_TYPES,
    FastProduct,
    Launch,
    PackedProduct,
    Scratch,
    X,
    Y,
    parameter_type,
)
from tests.conftest import REAL_MATRICES, to_numpy
from tests.formats.helpers import TOLERANCE, random_values, real

# --------------------------------------------------------------------------- kernel signatures

INDEX_TYPES = {np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64}


def kernel_parameters(filename: str, kernel: str) -> list[str]:
    """The parameter declarations of ``kernel``'s definition in kernels/``filename``."""
    source = (_kernels.kernel_dir() / filename).read_text()
    found = re.search(rf"\b{kernel}\(([^)]*)\)\s*\{{", source)
    assert found, f"{kernel} not defined in {filename}"
    return [p.strip() for p in found.group(1).split(",")]


def expected_type(declaration: str, value: np.dtype, index: np.dtype) -> type:
    """The ctypes type a launch must pack for a parameter declared as ``declaration``."""
    if "*" in declaration:
        return POINTER
    words = declaration.replace("const", "").split()[:-1]  # the type, without the name
    spelled = " ".join(words)
    table = {"V": VALUE_TYPES[value], "I": INDEX_TYPES[index], "long long": ctypes.c_int64, "int": ctypes.c_int32,
             "unsigned int": ctypes.c_uint32}
    return table[spelled]


#: Every kernel the fast path launches: (file, name, how many parameters).
FAST_KERNELS = [
    ("spmv_csr.cu", "csr_spmv_rows", 13), ("spmv_csr.cu", "csr_spmv_long_chunks", 8),
    ("spmv_csr.cu", "csr_spmv_long_finish", 7), ("spmv_csc.cu", "csc_spmv_scatter", 7),
    ("spmv_coo.cu", "coo_reduce_tiles", 10), ("spmv_coo.cu", "coo_spmv_atomic", 7),
    ("spmv_ell.cu", "ell_spmv", 12), ("spmv_jds.cu", "jds_spmv", 10), ("spmv_sell.cu", "sell_spmv", 19),
    ("spmv_sell.cu", "sell_stage_hot", 4),
]


@pytest.mark.parametrize("filename,kernel,count", FAST_KERNELS)
def test_kernel_signatures_parse(filename, kernel, count):
    parameters = kernel_parameters(filename, kernel)
    assert len(parameters) == count
    types = [expected_type(p, np.dtype(np.complex128), np.dtype(np.int64)) for p in parameters]
    assert all(t in (POINTER, VALUE_TYPES[np.dtype(np.complex128)], ctypes.c_int64, ctypes.c_int32) for t in types)


def test_csr_rows_signature_is_what_gather_launches_pack():
    # indptr, indices, data, x, y, alpha, beta, n_rows, long_row, w, dot, partials, counter
    value, index = np.dtype(np.float32), np.dtype(np.int32)
    types = [expected_type(p, value, index) for p in kernel_parameters("spmv_csr.cu", "csr_spmv_rows")]
    assert types == [POINTER] * 5 + [ctypes.c_float] * 2 + [ctypes.c_int32] * 2 + [POINTER] * 4


# --------------------------------------------------------------------------- packing (CPU)


class FakeArray:
    """What the fast path reads of a CuPy array, without a GPU."""

    def __init__(self, ptr: int, n: int, dtype=np.float64, stride: int | None = None) -> None:
        self.dtype = np.dtype(dtype)
        self.data = SimpleNamespace(ptr=ptr)
        self.shape, self.size = (n,), n
        self.strides = (self.dtype.itemsize if stride is None else stride,)
        self.nbytes = n * self.dtype.itemsize
        self.flags = SimpleNamespace(c_contiguous=self.strides[0] == self.dtype.itemsize or n <= 1)
        self.scaled_by = None

    def __imul__(self, factor):
        self.scaled_by = factor
        return self


class FakeModule:
    """The parts of CuPy a fast call uses: a current stream, memsetAsync and empty."""

    def __init__(self) -> None:
        self.stream_ptr, self.memsets, self.allocations, self.next_ptr = 0, [], [], 1 << 40
        self.cuda = SimpleNamespace(get_current_stream=lambda: SimpleNamespace(ptr=self.stream_ptr),
                                    runtime=SimpleNamespace(memsetAsync=lambda *a: self.memsets.append(a)))

    def empty(self, n, dtype):
        self.next_ptr += 1 << 20
        array = FakeArray(self.next_ptr, n, dtype)
        self.allocations.append(array)
        return array


def recording(product: FastProduct) -> list[tuple]:
    """Make ``product``'s launches record (kernel handle, grid, block, shared, stream, arguments)."""
    calls = []
    for number, packed in enumerate(product.packed.launches):
        packed.handle = 100 + number

        def launch(handle, gx, gy, gz, bx, by, bz, shared, stream, parameters, extra, packed=packed):
            calls.append((handle, gx, bx, shared, stream, packed.values() if not any(
                isinstance(a, ctypes.Structure) for a in packed.arguments) else
                [(a.re, a.im) if isinstance(a, ctypes.Structure) else a.value for a in packed.arguments]))
        packed.launch_kernel = launch
    product.packed.bind_launches()
    return calls


def test_parameter_types():
    array = FakeArray(4096, 10)
    assert parameter_type(array, np.float64) is POINTER
    assert parameter_type(X, np.float32) is POINTER and parameter_type(Y, np.float32) is POINTER
    assert parameter_type(Scratch(3, np.float64), np.float32) is POINTER
    assert parameter_type(np.uint64(0), np.float32) is ctypes.c_uint64  # a null pointer
    assert parameter_type(np.int32(5), np.float64) is ctypes.c_int32
    assert parameter_type(np.int64(5), np.float64) is ctypes.c_int64
    assert parameter_type(ALPHA, np.float32) is ctypes.c_float
    assert parameter_type(BETA, np.float64) is ctypes.c_double
    for dtype, part, size in ((np.complex64, ctypes.c_float, 8), (np.complex128, ctypes.c_double, 16)):
        kind = parameter_type(ALPHA, dtype)
        assert ctypes.sizeof(kind) == size and [f[1] for f in kind._fields_] == [part, part]
    with pytest.raises(TypeError, match="NumPy integer scalar"):
        parameter_type(7, np.float64)  # a Python int's width is a guess
    with pytest.raises(TypeError):
        parameter_type(np.float64(1.0), np.float64)


def test_packed_product_holds_fixed_arguments_and_sets_call_ones():
    a, b = FakeArray(0x1000, 8, np.int32), FakeArray(0x2000, 8, np.complex128)
    carry = Scratch(4, np.complex128)
    launches = [Launch(None, 3, 256, (a, b, X, Y, ALPHA, BETA, np.int32(8), np.uint64(0), carry)),
                Launch(None, 1, 128, (carry, Y, ALPHA, np.int64(-5)), shared=64)]
    packed = PackedProduct(launches, np.complex128)
    assert packed.shapes == [(3, 256, 0), (1, 128, 64)]
    packed.set_call(0xA000, 0xB000, 2 - 1j, 0.5)
    packed.set_scratch([0xC000])
    first, second = (p.arguments for p in packed.launches)
    assert [first[i].value for i in (0, 1, 2, 3, 6, 7, 8)] == [0x1000, 0x2000, 0xA000, 0xB000, 8, 0, 0xC000]
    assert (first[4].re, first[4].im, first[5].re, first[5].im) == (2.0, -1.0, 0.5, 0.0)
    assert [second[0].value, second[1].value, second[2].re, second[2].im, second[3].value] == [0xC000, 0xB000, 2, -1, -5]
    packed.set_call(0xA100, 0xB100, 3, 0)  # a second call changes only the call's arguments
    assert (first[2].value, first[3].value, second[1].value, second[2].re) == (0xA100, 0xB100, 0xB100, 3.0)
    assert first[0].value == 0x1000 and first[8].value == 0xC000


def make_fast(scale_first=False, n_rows=6, n_cols=5, dtype=np.float64, scratch=False):
    module = FakeModule()
    matrix_array = FakeArray(0x5000, 20, np.int32)
    arguments = (matrix_array, X, Y, ALPHA, BETA, np.int32(n_rows)) + ((Scratch(7, dtype),) if scratch else ())
    product = FastProduct([Launch(None, 2, 256, arguments)], n_rows, dtype, scale_first, xp=module)
    return product, module, recording(product)


def test_signature_cache_declines_until_accepted():
    product, module, calls = make_fast()
    x, y = FakeArray(0x10000, 5), FakeArray(0x20000, 6)
    assert product(x, y, 1, 0) is None and calls == []  # nothing accepted yet
    product.accept(x, x, y)
    assert product(x, y, 1.5, 0) is y
    assert calls == [(100, 2, 256, 0, 0, [0x5000, 0x10000, 0x20000, 1.5, 0.0, 6])]
    x2, y2 = FakeArray(0x30000, 5), FakeArray(0x40000, 6)  # other arrays of the same signature
    module.stream_ptr = 77
    assert product(x2, y2, 1, np.float32(2.0)) is y2
    assert calls[-1] == (100, 2, 256, 0, 77, [0x5000, 0x30000, 0x40000, 1.0, 2.0, 6])


def test_signature_cache_refuses_what_the_checks_must_see():
    product, _, calls = make_fast()
    x, y = FakeArray(0x10000, 5), FakeArray(0x20000, 6)
    product.accept(x, x, y)
    declined = [
        (FakeArray(0x10000, 4), y, 1, 0),  # x of another length
        (FakeArray(0x10000, 5, np.float32), y, 1, 0),  # x of another dtype
        (FakeArray(0x10000, 5, stride=16), y, 1, 0),  # strided x
        (np.zeros(5), y, 1, 0),  # NumPy x
        ([0.0] * 5, y, 1, 0),  # a list
        (x, FakeArray(0x20000, 7), 1, 0),  # y of another length
        (x, np.zeros(6), 1, 0),  # NumPy y
        (x, FakeArray(0x10000 + 8, 6), 1, 0),  # y overlapping x
        (x, FakeArray(0x10000 - 40, 6), 1, 0),  # y overlapping x from below
        (x, None, 1, 2.0),  # beta without y: the general path raises
        (x, y, True, 0),  # a bool alpha
        (x, y, 1j, 0),  # complex alpha for a real matrix
        (x, y, 1, np.int64(0)),  # a NumPy integer beta
    ]
    for args in declined:
        assert product(*args) is None, args
    assert calls == []
    square, _, _ = make_fast(n_rows=5)
    xs = FakeArray(0x10000, 5)
    square.accept(xs, xs, xs)
    assert square(xs, xs, 1, 0) is None  # y is x
    assert square(xs, FakeArray(0x10000 + 40, 5), 1, 0) is not None  # adjacent, not overlapping


def test_accept_records_only_what_was_used_as_given():
    product, module, calls = make_fast()
    x, cast = FakeArray(0x10000, 5, np.float32), FakeArray(0x50000, 5)
    product.accept(x, cast, None)  # x was cast: a later x like it must be cast again
    assert product.x_signature is None and product.y_signature is None
    strided = FakeArray(0x10000, 5, stride=16)
    product.accept(strided, strided, FakeArray(0x20000, 6, stride=16))
    assert product.x_signature is None and product.y_signature is None
    x = FakeArray(0x10000, 5)
    product.accept(x, x, None)
    assert product.x_signature is not None and product.y_signature is None
    y = product(x, None, 1, 0)  # y allocated
    assert y is module.allocations[-1] and y.shape == (6,) and y.dtype == np.float64
    assert calls[-1][5][2] == y.data.ptr


def test_complex_scalars_pack_as_pairs():
    product, _, calls = make_fast(dtype=np.complex64)
    x, y = FakeArray(0x10000, 5, np.complex64), FakeArray(0x20000, 6, np.complex64)
    product.accept(x, x, y)
    assert product(x, y, 1 + 2j, np.complex128(-0.5j)) is y
    assert calls[-1][5][3:5] == [(1.0, 2.0), (-0.0, -0.5)]
    assert product(x, y, 2, 0.25) is y
    assert calls[-1][5][3:5] == [(2.0, 0.0), (0.25, 0.0)]


def test_scale_first_zeroes_or_scales_y():
    product, module, calls = make_fast(scale_first=True)
    x, y = FakeArray(0x10000, 5), FakeArray(0x20000, 6)
    product.accept(x, x, y)
    product(x, y, 1, 0)
    assert module.memsets == [(0x20000, 0, 48, 0)] and y.scaled_by is None
    product(x, y, 1, 3)
    assert len(module.memsets) == 1 and y.scaled_by == 3.0 and type(y.scaled_by) is np.float64
    assert len(calls) == 2


def test_scratch_is_allocated_once_per_stream():
    product, module, calls = make_fast(scratch=True)
    x, y = FakeArray(0x10000, 5), FakeArray(0x20000, 6)
    product.accept(x, x, y)
    product(x, y, 1, 0)
    product(x, y, 1, 0)
    assert len(module.allocations) == 1 and module.allocations[0].shape == (7,)
    first = module.allocations[0].data.ptr
    assert calls[-1][5][-1] == first
    module.stream_ptr = 5
    product(x, y, 1, 0)
    assert len(module.allocations) == 2 and calls[-1][5][-1] == module.allocations[1].data.ptr != first
    module.stream_ptr = 0
    product(x, y, 1, 0)
    assert len(module.allocations) == 2 and calls[-1][5][-1] == first


def test_cpu_matrices_never_take_the_fast_path(rng):
    S = sp.random(30, 20, density=0.2, random_state=int(rng.integers(1 << 30)), format="csr")
    for fmt in ("csr", "csc", "coo", "ell", "hyb", "jds", "sell"):
        A = sparsegpu.from_scipy(S, format=fmt, backend="cpu", **({"max_fill": None} if fmt == "ell" else {}))
        x = rng.standard_normal(20)
        np.testing.assert_allclose(A @ x, S @ x, rtol=1e-12, atol=1e-12)
        assert not any(isinstance(k, tuple) and k[0] == _fast_product.FAST for k in A._cache)
        with pytest.raises(ValueError, match="length"):
            A @ rng.standard_normal(21)


# --------------------------------------------------------------------------- GPU

FORMATS = [("csr", {}), ("csc", {}), ("coo", {}), ("ell", {"max_fill": None}), ("hyb", {}), ("hyb", {"width": 1}),
           ("jds", {}), ("sell", {}), ("sell", {"C": 8, "split": 2, "hot": 3}), ("sell", {"C": 4, "sigma": 1})]
FORMAT_IDS = [f"{f}-{'-'.join(f'{k}={v}' for k, v in p.items()) or 'default'}" for f, p in FORMATS]
DTYPES = [np.float32, np.float64, np.complex128]
#: Small real matrices of different shapes (rectangular, long rows, very sparse), when present.
REAL = [n for n in ("west0067", "1138_bus", "Franz6_id1959_aug", "Pd", "arrow", "lp_e226") if n in REAL_MATRICES]


def random_matrix(rng, m=700, n=500, dtype=np.float64):
    """Random rows of 0 to 12 entries, a few of thousands (long CSR rows, HYB overflow, SELL parts)."""
    S = sp.random(m, n, density=0.012, random_state=int(rng.integers(1 << 30)), format="lil", dtype=np.float64)
    for row in rng.choice(m, 3, replace=False):
        S[row, rng.choice(n, int(rng.integers(300, n)), replace=False)] = 1.0
    S = sp.csr_array(S)
    S.data = random_values(rng, S.nnz, dtype)
    return S


def build(S, fmt, params, dtype, index_dtype):
    return sparsegpu.from_scipy(S, format=fmt, dtype=dtype, index_dtype=index_dtype, backend="gpu", **params)


def general(A, x, y, alpha, beta):
    """The general path's product (the format's CuPy launches) into a copy of y."""
    out = y.copy()
    dtype = A.dtype
    return A._spmv(x, out, dtype.type(alpha), dtype.type(beta), False)


class CheckCounter:
    """Counts the general path's vector checks (a fast call makes none)."""

    def __init__(self, monkeypatch):
        self.count = 0
        real_check = _base._validate.check_vector

        def counted(*args, **kwargs):
            self.count += 1
            return real_check(*args, **kwargs)
        monkeypatch.setattr(_base._validate, "check_vector", counted)


def assert_bitwise(a, b):
    a, b = to_numpy(a), to_numpy(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), f"max difference {np.max(np.abs(a - b))}"


def check_fast_against_general(A, rng, monkeypatch, calls=3):
    """Warm up (general path, accepts the signatures), then fast calls with fresh x and y of the
    same signatures, compared bitwise with the general path and with the NumPy reference."""
    import cupy

    m, n = A.shape
    dtype = A.dtype
    x0 = cupy.asarray(random_values(rng, n, dtype))
    A.spmv(x0, cupy.empty(m, dtype))
    A @ x0
    counter = CheckCounter(monkeypatch)
    scalars = [(1, 0), (2.5, 0), (-1.0, 0.5), (0.75, 1)]
    if dtype.kind == "c":
        scalars += [(1 - 2j, 0), (0.5j, 2 + 1j), (np.complex128(1 + 1j), np.float64(-1))]
    for alpha, beta in scalars[:calls + 4]:
        x = cupy.asarray(random_values(rng, n, dtype))
        y_start = cupy.asarray(random_values(rng, m, dtype)) if beta != 0 else cupy.full(m, np.nan, dtype)
        expected = general(A, x, y_start, alpha, beta)
        y = y_start.copy()
        counter.count = 0
        assert A.spmv(x, y, alpha, beta) is y
        product = A @ x
        assert counter.count == 0, "a call took the general path"
        assert_bitwise(y, expected)
        assert_bitwise(product, general(A, x, cupy.full(m, np.nan, dtype), 1, 0))
        reference = A.reference_spmv(to_numpy(x), to_numpy(y_start), alpha, beta)
        np.testing.assert_allclose(to_numpy(y), reference, rtol=TOLERANCE[dtype.type] * 100,
                                   atol=TOLERANCE[dtype.type] * 100 * max(1.0, float(np.abs(reference).max(initial=0))))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("fmt,params", FORMATS, ids=FORMAT_IDS)
def test_fast_path_matches_general_path_random(fmt, params, index_dtype, dtype, rng, monkeypatch):
    A = build(random_matrix(rng, dtype=dtype), fmt, params, dtype, index_dtype)
    check_fast_against_general(A, rng, monkeypatch)


@pytest.mark.gpu
@pytest.mark.parametrize("name", REAL)
@pytest.mark.parametrize("fmt,params", FORMATS, ids=FORMAT_IDS)
def test_fast_path_matches_general_path_real(fmt, params, name, rng, monkeypatch):
    S = real(name)
    for dtype, index_dtype in ((np.float64, np.int32), (np.complex128, np.int64)):
        A = build(S, fmt, params, dtype, index_dtype)
        check_fast_against_general(A, rng, monkeypatch, calls=2)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt,params", FORMATS, ids=FORMAT_IDS)
def test_launch_types_match_kernel_sources(fmt, params, rng):
    """Every packed parameter has the C type the kernel's definition declares."""
    import cupy

    from sparsegpu.formats import _compressed, coo, ell, jds, sell

    files = [_compressed.GATHER_KERNELS, _compressed.SCATTER_KERNELS, coo.COO_KERNELS, ell.ELL_KERNELS,
             jds.JDS_KERNELS, sell.SELL_KERNELS]
    for dtype, index_dtype in ((np.float32, np.int64), (np.complex128, np.int32)):
        A = build(random_matrix(rng, dtype=dtype), fmt, params, dtype, index_dtype)
        for deterministic in (True, False):
            with sparsegpu.options(deterministic=deterministic):
                x = cupy.asarray(random_values(rng, A.shape[1], dtype))
                A @ x
                fast = A._cache[(_fast_product.FAST, A._fast_key())]
            names = {}
            for kernels in files:
                for expression in kernels.expressions:
                    function = kernels.function(expression, dtype, index_dtype)
                    names[id(function)] = (kernels.filename, expression.split("<")[0])
            assert fast.packed.records
            for record, packed in zip(fast.packed.records, fast.packed.launches):
                filename, kernel = names[id(record.function)]
                declared = [expected_type(p, np.dtype(dtype), np.dtype(index_dtype))
                            for p in kernel_parameters(filename, kernel)]
                assert [type(a) for a in packed.arguments] == declared, kernel


@pytest.mark.gpu
def test_fast_path_on_a_non_default_stream(rng, monkeypatch):
    import cupy

    for fmt, params in FORMATS:
        A = build(random_matrix(rng), fmt, params, np.float64, np.int32)
        x = cupy.asarray(rng.standard_normal(A.shape[1]))
        expected = A @ x  # general path, default stream
        cupy.cuda.Device().synchronize()
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            counter = CheckCounter(monkeypatch)
            for _ in range(3):
                y = cupy.full(A.shape[0], np.nan)
                A.spmv(x, y)  # the first call on this stream may take the general path to accept y
                z = A @ x
            stream.synchronize()
        assert_bitwise(y, expected)
        assert_bitwise(z, expected)
        assert counter.count <= 1
        monkeypatch.undo()


@pytest.mark.gpu
@pytest.mark.parametrize("fmt,params", FORMATS, ids=FORMAT_IDS)
def test_bad_input_after_good_calls_still_raises(fmt, params, rng):
    import cupy

    A = build(random_matrix(rng), fmt, params, np.float64, np.int32)
    m, n = A.shape
    x = cupy.asarray(rng.standard_normal(n))
    y = cupy.empty(m)
    for _ in range(2):
        A.spmv(x, y)
        A @ x
    with pytest.raises(ValueError, match="length"):
        A @ cupy.ones(n + 1)
    with pytest.raises(ValueError, match="length"):
        A.spmv(cupy.ones(n - 1), y)
    with pytest.raises(ValueError, match="y must be 1-D"):
        A.spmv(x, cupy.empty(m + 1))
    with pytest.raises(TypeError, match="dtype"):
        A.spmv(x, cupy.empty(m, np.float32))
    with pytest.raises(ValueError, match="beta is nonzero"):
        A.spmv(x, None, 1, 2.0)
    with pytest.raises(TypeError, match="complex"):
        A.spmv(x, y, 1j, 0)
    with pytest.raises(TypeError, match="number"):
        A.spmv(x, y, None, 0)
    square = build(random_matrix(rng, m=400, n=400), fmt, params, np.float64, np.int32)
    xs = cupy.asarray(rng.standard_normal(800))
    square.spmv(xs[:400], cupy.empty(400))
    square.spmv(xs[:400], cupy.empty(400))
    with pytest.raises(ValueError, match="overlap"):
        square.spmv(xs[:400], xs[200:600])
    with pytest.raises(ValueError, match="overlap"):
        square.spmv(xs[:400], xs[:400])
    # Other x the fast path does not take still give the right product.
    np.testing.assert_allclose(to_numpy(A @ to_numpy(x)), to_numpy(A @ x), rtol=1e-13)
    np.testing.assert_allclose(to_numpy(A @ x.astype(np.float32)), to_numpy(A @ x.astype(np.float32).astype(np.float64)),
                               rtol=1e-13)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_threads_per_row_change_drops_the_fast_product(fmt, rng, monkeypatch):
    import cupy

    A = build(random_matrix(rng), fmt, {}, np.float64, np.int64)
    x = cupy.asarray(rng.standard_normal(A.shape[1]))
    A @ x
    A @ x
    before = A._cache[(_fast_product.FAST, A._fast_key())]
    for tpr in (1, 32, 4, None):
        A.threads_per_row = tpr
        assert (_fast_product.FAST, A._fast_key()) not in A._cache
        expected = general(A, x, cupy.full(A.shape[0], np.nan), 1, 0)
        A @ x  # general path: builds the new launches
        fast = A._cache[(_fast_product.FAST, A._fast_key())]
        assert fast is not before
        counter = CheckCounter(monkeypatch)
        assert_bitwise(A @ x, expected)
        assert counter.count == 0
        monkeypatch.undo()
        before = fast


@pytest.mark.gpu
@pytest.mark.parametrize("fmt,params", [("csc", {}), ("coo", {}), ("hyb", {"width": 1})])
def test_deterministic_switch_picks_its_own_launches(fmt, params, rng):
    import cupy

    A = build(random_matrix(rng), fmt, params, np.float64, np.int32)
    x = cupy.asarray(rng.standard_normal(A.shape[1]))
    exact = [A @ x for _ in range(3)][-1]
    with sparsegpu.options(deterministic=False):
        loose = [A @ x for _ in range(3)]
        fast_loose = A._cache[(_fast_product.FAST, False)]
    fast_exact = A._cache[(_fast_product.FAST, True)]
    assert fast_loose is not fast_exact
    assert [type(r.function) for r in fast_loose.packed.records]  # launches exist
    kernels = {id(r.function) for r in fast_loose.packed.records} ^ {id(r.function) for r in fast_exact.packed.records}
    assert kernels, "the atomic and the deterministic products must launch different kernels"
    for y in loose:
        np.testing.assert_allclose(to_numpy(y), to_numpy(exact), rtol=1e-12, atol=1e-12)
    assert_bitwise(A @ x, exact)  # back in deterministic mode: the same bits


@pytest.mark.gpu
def test_empty_matrices(rng):
    import cupy

    for fmt, params in FORMATS:
        for shape in ((0, 5), (5, 0), (4, 3)):
            A = build(sp.csr_array(shape), fmt, params, np.float64, np.int32)
            x = cupy.ones(shape[1])
            for _ in range(3):
                y = cupy.full(shape[0], np.nan)
                assert A.spmv(x, y) is y
                assert not bool(cupy.isnan(y).any()) and not bool(y.any())
                assert (A @ x).shape == (shape[0],)


@pytest.mark.gpu
@pytest.mark.parametrize("many", [False, True])
def test_sell_staged_hot_columns(many, rng, monkeypatch):
    """SELL with sell_stage_hot before the product (two launches): 4 hot columns staged first,
    and over 4096 (float64 values past the default 48 KiB: the kernel opted in to more shared
    memory)."""
    from sparsegpu.formats import sell
    from tests.formats.test_sell_long_rows import hot_matrix

    if many:
        S = sp.csr_array(sp.random_array((300, 9000), density=0.05, rng=rng))
        A = sell.SELL.from_scipy(S, backend="gpu", hot=9000)
        assert A.hot >= sell.HOT_STAGE_FIRST
    else:
        monkeypatch.setattr(sell, "HOT_STAGE_FIRST", 1)
        A = sell.SELL.from_scipy(hot_matrix(rng), backend="gpu", hot=4)
        assert A.hot == 4
    check_fast_against_general(A, rng, monkeypatch)
    fast = A._cache[(_fast_product.FAST, A._fast_key())]
    assert len(fast.packed.records) == 2 and fast.packed.shapes[-1][2] == A.hot * 8


@pytest.mark.gpu
@pytest.mark.parametrize("fmt,params", FORMATS, ids=FORMAT_IDS)
def test_strided_x_and_y_are_read_and_written_as_views(fmt, params, rng):
    """Every other entry of a bigger array as x, and as y (beta reads it): the product equals
    SciPy's, and y's neighbours in memory stay poisoned. Also after the fast path accepted
    contiguous vectors, and for the transpose."""
    import cupy

    S = random_matrix(rng)
    A = build(S, fmt, params, np.float64, np.int32)
    m, n = S.shape
    A @ cupy.asarray(rng.standard_normal(n))  # a contiguous x accepted first
    for transpose in (False, True):
        op, Sop = (A.T, S.T) if transpose else (A, S)
        rows, cols = Sop.shape
        x_host = rng.standard_normal(cols)
        x_big = cupy.asarray(np.repeat(x_host, 2) * np.tile([1.0, np.inf], cols))
        x = x_big[::2]
        y0 = rng.standard_normal(rows)
        y_big = cupy.full(2 * rows, np.nan)
        y_big[::2] = cupy.asarray(y0)
        y = y_big[::2]
        np.testing.assert_allclose((op @ x).get(), Sop @ x_host, rtol=1e-12, atol=1e-12)
        assert op.spmv(x, y, 2.0, -0.5) is y
        np.testing.assert_allclose(y.get(), 2 * (Sop @ x_host) - 0.5 * y0, rtol=1e-12, atol=1e-12)
        assert np.isnan(y_big[1::2].get()).all()
