"""The streamed CSR upload (:func:`upload_csr`): a scipy matrix to a device
:class:`~sparsegpu.CSR`, validated on the device as its chunks arrive (:class:`CsrChecks`) and
made canonical there when it is not; and the size above which ``from_scipy`` streams."""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np

from sparsegpu import _validate, convert
from sparsegpu.convert import inspect_csr_chunk
from sparsegpu._backend import resolve_backend
from sparsegpu.formats._base import as_scipy_sparse, canonical_scipy
from sparsegpu.formats.csr import CSR
from sparsegpu.primitives import expand_pointers
from sparsegpu.reference.convert import decode_key
from sparsegpu.transfer._checks import (
    PackStrategy,
    check_casting,
    check_csr_ends,
    check_pack,
    csr_input,
    optional_positive_int,
    positive_int,
)
from sparsegpu.transfer.arrays import device_bytes
from sparsegpu.transfer.pinned import DEFAULT_BUFFER_BYTES, PinnedPool
from sparsegpu.transfer.report import Progress, Timeline
from sparsegpu.transfer.staging import (
    Chunk,
    join_streams,
    plan_for,
    staged_streams,
    stream_arrays,
)

#: ``from_scipy`` streams matrices of at least this many bytes (values and indices) through
#: :func:`upload_csr` on the GPU; below it one plain copy costs less than setting up streams.
STREAM_MIN_BYTES = 16 << 20


def worth_streaming(S: Any) -> bool:
    """Whether ``from_scipy`` uploads the scipy matrix ``S`` with :func:`upload_csr`.

    >>> import scipy.sparse as sp
    >>> worth_streaming(sp.eye(10, format="csr"))
    False
    """
    S = as_scipy_sparse(S)
    return S.nnz * (S.dtype.itemsize + 4) >= STREAM_MIN_BYTES


class CsrChecks:
    """Per-chunk validation of a CSR upload, run on the device as chunks arrive: one kernel a
    chunk of indices (:func:`sparsegpu.convert.inspect_csr_chunk`: the index range, and columns
    strictly increasing within rows, into four words every chunk shares), one comparison a
    chunk of pointers (monotone). Results stay on the device until :meth:`verdict` reads them
    once."""

    def __init__(self, indptr_host: np.ndarray, n_cols: int) -> None:
        import cupy

        self.indptr_host = indptr_host
        self.n_cols = n_cols
        self.words = cupy.zeros(4, np.uint64)  # max ~key(col), max key(col), pairs down, at row starts
        self.pointer_drops: list[Any] = []
        self.indptr_device: Any = None
        self.indptr_ready: list[Any] = []
        self.waited: set[int] = set()

    def _search(self, positions: Any, side: Literal["left", "right"]) -> Any:
        """``np.searchsorted`` over the host row pointers with needles of their own dtype: a
        needle of another dtype (a Python int, int64 against int32 pointers) makes NumPy cast
        the whole pointer array on every call (40 ms at 20M rows)."""
        return np.searchsorted(self.indptr_host, np.asarray(positions, dtype=self.indptr_host.dtype), side=side)

    def __call__(self, chunk: Chunk, arrived: Any, stream: Any) -> None:
        import cupy

        if chunk.array == 2:  # indptr
            if arrived.size > 1:
                self.pointer_drops.append(cupy.count_nonzero(arrived[1:] < arrived[:-1]))
            return
        if chunk.array != 1:
            return
        if id(stream) not in self.waited:  # the row starts must have arrived
            for event in self.indptr_ready:
                stream.wait_event(event)
            self.waited.add(id(stream))
        # The rows starting strictly inside the chunk (garbage when the pointers are not
        # monotone, which the verdict refuses whatever the words say).
        first = int(self._search(chunk.start, "right"))
        last = max(int(self._search(chunk.stop, "left")), first)
        # The chunk arrives in the source's index type (cast to the stored one after the checks);
        # the kernel reads both arrays in one type.
        cols = arrived if arrived.dtype in _KERNEL_INDEX_DTYPES else arrived.astype(np.int64)
        starts = self.indptr_device[first:last].astype(cols.dtype, copy=False)
        inspect_csr_chunk(cols, starts, chunk.start, self.words)

    def verdict(self, indices: Any, indptr: Any, index_chunks: list[Chunk], pointer_chunks: list[Chunk]) -> bool:
        """Raise ValueError for bad indices or pointers; True when canonical."""
        import cupy

        counts = [cupy.zeros(1, np.uint64)]
        # Pairs across chunk boundaries (those not at a row start), checked once at the end.
        starts = np.array([c.start for c in index_chunks[1:]], dtype=np.int64)
        if starts.size:
            position = np.minimum(self._search(starts, "left"), self.indptr_host.size - 1)
            at_row_start = self.indptr_host[position] == starts
            inner = cupy.asarray(starts[~at_row_start])
            if inner.size:
                counts.append(cupy.count_nonzero(indices[inner] <= indices[inner - 1]).reshape(1))
        cuts = np.array([c.start for c in pointer_chunks[1:]], dtype=np.int64)
        drops = [d.reshape(1) for d in self.pointer_drops]
        if cuts.size:
            device_cuts = cupy.asarray(cuts)
            drops.append(cupy.count_nonzero(indptr[device_cuts] < indptr[device_cuts - 1]).reshape(1))
        total = [cupy.concatenate([c.astype(np.uint64) for c in group]).sum(keepdims=True)
                 for group in (counts, drops or [cupy.zeros(1, np.uint64)])]
        words = cupy.concatenate([self.words, *total]).get()  # the one read back
        unsorted, pointer_drops = int(words[2]) - int(words[3]) + int(words[4]), int(words[5])
        if pointer_drops:
            raise ValueError("indptr is not monotone (row pointers go down somewhere)")
        if index_chunks:
            low, high = decode_key(~int(words[0]) & _MASK), decode_key(int(words[1]))
            if low < 0:
                raise ValueError(f"indices holds a negative index ({low})")
            if high >= self.n_cols:
                raise ValueError(f"indices holds index {high}, out of range for {self.n_cols} columns")
        return not unsorted


_MASK = (1 << 64) - 1
_KERNEL_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def upload_csr(S: Any, *, dtype: Any = None, index_dtype: Any = None, casting: str = "same_kind",
               chunk_bytes: int | None = None, streams: int = 2, pool: PinnedPool | None = None,
               pack: PackStrategy = "auto", pack_threads: int | None = None, progress: bool = False,
               report: bool = False, check: bool = True, backend: str | None = None) -> Any:
    """A :class:`~sparsegpu.CSR` from a scipy sparse matrix, streamed to the device.

    The arrays go in chunks through pinned staging buffers on several CUDA streams, as in
    :func:`upload`. While later chunks are still in flight, each arrived chunk is converted
    to the stored dtypes and validated on the device (indices in range, pointers monotone,
    columns strictly increasing within rows). Non-canonical input (unsorted columns or
    duplicates) is then made canonical on the device, so the result equals
    ``CSR.from_scipy(S)``. The caller's matrix is never modified.

    Parameters
    ----------
    S : scipy sparse matrix or array
        CSR is streamed as it is; other formats are checked in full and converted to CSR on
        the host first.
    dtype : dtype, optional
        Stored value type: float32, float64, complex64 or complex128 (default: from S's,
        integers and booleans becoming float64).
    index_dtype : {int32, int64}, optional
        Default: int32 when the shape and the entries fit, else int64.
    casting : {"no", "equiv", "safe", "same_kind", "unsafe"}, default "same_kind"
        NumPy's rule for the value cast to ``dtype``: complex to real needs "unsafe".
    chunk_bytes, streams, pool, pack, pack_threads, progress
        As for :func:`upload`.
    report : bool, default False
        Also return a :class:`TransferReport`.
    check : bool, default True
        Validate the structure: on the device as chunks arrive (GPU), or in full on the host
        before SciPy reads the arrays (CPU). False skips these checks for trusted input: the
        caller guarantees a valid CSR (the ends of ``indptr`` are still checked), and whether
        it is canonical is taken from SciPy's ``has_canonical_format`` (read from the host
        arrays unless SciPy already knows it).
    backend : {"cpu", "gpu"} or None
        None picks the GPU when there is one.

    Returns
    -------
    CSR, or (CSR, TransferReport) when ``report``
        On the CPU backend a CSR whose arrays never share memory with ``S``'s.

    Raises
    ------
    TypeError
        ``S`` is not a scipy sparse matrix; an unsupported ``dtype`` or a cast ``casting``
        forbids; an option of the wrong type.
    ValueError
        Malformed arrays (indices out of range or negative, row pointers not monotone or with
        wrong ends, lengths that disagree), a size option below 1, or a matrix that cannot fit
        in free memory.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> S = sp.csr_array((np.array([1.0, 2.0, 3.0]), np.array([2, 0, 2]), np.array([0, 3, 3])), shape=(2, 3))
    >>> A = upload_csr(S, backend="cpu")            # unsorted, with a duplicate
    >>> A.to_scipy().toarray().tolist()
    [[2.0, 0.0, 4.0], [0.0, 0.0, 0.0]]
    >>> upload_csr(S.astype(np.complex128), dtype=np.float64, backend="cpu")
    Traceback (most recent call last):
    ...
    TypeError: cannot cast values from complex128 to float64 under casting='same_kind' (pass casting="unsafe" to drop imaginary parts)
    """
    streams = positive_int("streams", streams)
    pack = check_pack(pack)
    pack_threads = optional_positive_int("pack_threads", pack_threads)
    chunk_bytes = optional_positive_int("chunk_bytes", chunk_bytes)
    progress = _validate.check_bool("progress", progress)
    report = _validate.check_bool("report", report)
    check = _validate.check_bool("check", check)
    casting = check_casting(casting)
    target_backend = resolve_backend(backend)
    given = as_scipy_sparse(S)
    S = csr_input(given)
    if check and target_backend == "cpu" and S is given:  # converted input was checked in full already
        _validate.check_scipy(S)
    check_csr_ends(S)
    value_dt = _validate.stored_dtype(S.dtype, dtype, casting)
    index_dt = _validate.index_dtype(S.shape, S.nnz, index_dtype)
    if target_backend == "cpu":
        return _upload_cpu(given, S, value_dt, index_dt, report)
    chunk_bytes = chunk_bytes or (pool.buffer_bytes if pool is not None else DEFAULT_BUFFER_BYTES)
    return _upload_gpu(S, value_dt, index_dt, chunk_bytes, streams, pool, pack, pack_threads, progress, report,
                       check)


def _stored_arrays(S: Any) -> list[np.ndarray]:
    """The NumPy arrays a scipy matrix holds (CSR/CSC/BSR arrays, COO coordinates, DIA data)."""
    found: list[np.ndarray] = []
    for value in vars(S).values():
        items = value if isinstance(value, tuple) else (value,)
        found += [a for a in items if isinstance(a, np.ndarray)]
    return found


def _owned(array: np.ndarray, caller_arrays: list[np.ndarray]) -> np.ndarray:
    """``array``, copied when it may share memory with one of the caller's arrays."""
    return array.copy() if any(np.may_share_memory(array, a) for a in caller_arrays) else array


def _upload_cpu(given: Any, S: Any, value_dt: np.dtype, index_dt: np.dtype, report: bool) -> Any:
    """The CPU backend's upload: a canonical CSR in host memory that owns its arrays."""
    m, n = S.shape
    _validate.ensure_fits(S.nnz * (value_dt.itemsize + index_dt.itemsize) + (m + 1) * index_dt.itemsize,
                          f"upload_csr of a {m}x{n} matrix with {S.nnz} entries", "cpu")
    timeline = Timeline(report, "cpu")
    with timeline.host("pack"):
        C = canonical_scipy(S, "csr", None, index_dt)
        # Complex -> real only when ``casting`` allowed it: the caller asked for the real part.
        values = C.data.real if C.data.dtype.kind == "c" and value_dt.kind != "c" else C.data
        caller_arrays = _stored_arrays(given)
        data, indices, indptr = (_owned(a, caller_arrays)
                                 for a in (np.ascontiguousarray(values, dtype=value_dt), C.indices, C.indptr))
        csr = CSR._make(data, indices, indptr, (m, n), "cpu")
    timeline.report.nbytes = csr.nbytes
    result = timeline.finish()
    return (csr, result) if report else csr


def _upload_gpu(S: Any, value_dt: np.dtype, index_dt: np.dtype, chunk_bytes: int, streams: int,
                pool: PinnedPool | None, pack: str, pack_threads: int | None, progress: bool, report: bool,
                check: bool) -> Any:
    """The streamed upload of a scipy CSR whose array ends were checked on the host."""
    import cupy

    m, n = S.shape
    # indptr first: the indices checks need the row starts on the device.
    sources = [np.ascontiguousarray(a) for a in (S.data, S.indices, S.indptr)]
    dtypes = [value_dt, index_dt, index_dt]
    order = [2, 1, 0]
    chunks = sorted(plan_for(sources, chunk_bytes, pack), key=lambda c: order.index(c.array))
    _validate.ensure_fits(device_bytes(sources, dtypes, chunks, streams),
                          f"upload_csr of a {m}x{n} matrix with {S.nnz} entries", "gpu")
    targets = [cupy.empty(s.size, d) for s, d in zip(sources, dtypes)]
    checks = CsrChecks(S.indptr, n) if check else None
    timeline = Timeline(report)
    bar = Progress(progress, len(chunks), "upload_csr")
    pointer_chunks = [c for c in chunks if c.array == 2]
    index_chunks = [c for c in chunks if c.array == 1]
    try:
        with staged_streams(pool, streams, pack, pack_threads, timeline) as (stager, stream_list), \
                warnings.catch_warnings():
            if S.dtype.kind == "c" and value_dt.kind != "c":  # the caller chose casting="unsafe"
                warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            # The pointers go up (and are converted) first; their completion events gate the
            # indices checks on every stream.
            staging: dict[tuple[int, str, int], Any] = {}
            stream_arrays(sources, targets, pointer_chunks, stager, stream_list, timeline, bar, staging, checks)
            if checks is not None:
                checks.indptr_device = targets[2]
                checks.indptr_ready = [s.record() for s in stream_list]
            stream_arrays(sources, targets, index_chunks + [c for c in chunks if c.array == 0], stager,
                          stream_list, timeline, bar, staging, checks)
            join_streams(stream_list)
    finally:
        bar.close()
    data, indices, indptr = targets
    if checks is not None:
        canonical = checks.verdict(indices, indptr, index_chunks, pointer_chunks)
    else:
        canonical = bool(S.has_canonical_format)
    if not canonical:
        with timeline.device("device", cupy.cuda.get_current_stream()):
            rows = expand_pointers(indptr, cupy)
            indptr, indices, data = convert.coo_to_csr(rows, indices, data, (m, n), index_dtype=index_dt)
        cupy.cuda.get_current_stream().synchronize()
    timeline.report.chunks = len(chunks)
    result = timeline.finish()
    csr = CSR._make(data, indices, indptr, (m, n), "gpu")
    return (csr, result) if report else csr
