"""Streamed upload of plain arrays (:func:`upload`): 1-D NumPy arrays, or the arrays of a
scipy CSR, CSC or COO matrix, copied in chunks through the staging engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate
from sparsegpu._backend import resolve_backend
from sparsegpu.formats._base import as_scipy_sparse
from sparsegpu.transfer._checks import (
    PackStrategy,
    check_pack,
    optional_positive_int,
    positive_int,
)
from sparsegpu.transfer.pinned import DEFAULT_BUFFER_BYTES, PinnedPool
from sparsegpu.transfer.report import Progress, Timeline
from sparsegpu.transfer.staging import (
    Chunk,
    join_streams,
    plan_for,
    staged_streams,
    stream_arrays,
)


def _sources_of(arrays: Any) -> list[np.ndarray]:
    """Host arrays to upload (contiguous: copies are made of strided ones) from an array, a
    sequence of arrays or a scipy matrix."""
    if sp.issparse(arrays):
        S = as_scipy_sparse(arrays)
        if S.format in ("csr", "csc"):
            return [np.ascontiguousarray(a) for a in (S.data, S.indices, S.indptr)]
        if S.format == "coo":
            return [np.ascontiguousarray(a) for a in (S.data, S.row, S.col)]
        raise TypeError(f"upload takes a CSR, CSC or COO scipy matrix, got {S.format}; convert it first (S.tocsr())")
    items = [arrays] if isinstance(arrays, np.ndarray) else arrays
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TypeError("upload takes a NumPy array, a sequence of them or a scipy matrix, "
                        f"got {type(arrays).__name__}")
    sources = []
    for number, item in enumerate(items):
        if not isinstance(item, np.ndarray):
            raise TypeError(f"item {number} is a {type(item).__name__}, not a NumPy array")
        if item.ndim != 1:
            raise ValueError(f"item {number} must be 1-D (reshape(-1) it), got shape {item.shape}")
        if not item.flags.c_contiguous:
            _validate.ensure_fits(item.nbytes, f"a contiguous copy of item {number}", "cpu")
        sources.append(np.ascontiguousarray(item))
    return sources


def _target_dtypes(dtypes: Any, sources: list[np.ndarray]) -> list[np.dtype]:
    if dtypes is None:
        return [s.dtype for s in sources]
    if isinstance(dtypes, (str, bytes)) or not isinstance(dtypes, Sequence):
        raise TypeError(f"dtypes must be a sequence of dtypes, one per array, got {dtypes!r}")
    if len(dtypes) != len(sources):
        raise ValueError(f"dtypes has {len(dtypes)} entries for {len(sources)} arrays")
    targets = []
    for number, dtype in enumerate(dtypes):
        try:
            targets.append(np.dtype(dtype))
        except TypeError:
            raise TypeError(f"dtypes[{number}] is not a NumPy dtype: {dtype!r}") from None
    return targets


def device_bytes(sources: Sequence[np.ndarray], targets: Sequence[np.dtype], chunks: Sequence[Chunk],
                 streams: int) -> int:
    """Device bytes an upload of ``sources`` as ``targets`` allocates: the arrays, plus a
    staging slot per stream (at least two) of the largest chunk for each array that is cast."""
    largest = max((c.stop - c.start for c in chunks), default=0)
    cast = {s.dtype.str: s.dtype.itemsize for s, t in zip(sources, targets) if s.dtype != t}
    staging = max(2, streams) * largest * sum(cast.values())
    return sum(s.size * t.itemsize for s, t in zip(sources, targets)) + staging


def upload(arrays: Any, *, dtypes: Sequence[Any] | None = None, chunk_bytes: int | None = None, streams: int = 2,
           pool: PinnedPool | None = None, pack: PackStrategy = "auto", pack_threads: int | None = None,
           progress: bool = False, report: bool = False, backend: str | None = None) -> Any:
    """Upload 1-D host arrays in chunks through pinned staging buffers on several CUDA streams.

    Each chunk is packed into a pinned buffer by several host threads and copied with
    ``cudaMemcpyAsync`` on one of ``streams`` streams; arrays already pinned are copied
    without packing. Returns once the copies are complete.

    Parameters
    ----------
    arrays : numpy.ndarray, sequence of numpy.ndarray, or scipy sparse matrix
        1-D arrays; a CSR/CSC matrix gives ``(data, indices, indptr)``, a COO matrix
        ``(data, row, col)``.
    dtypes : sequence of dtypes, optional
        One per array: each is cast to it on the device (as ``astype`` does, so integer
        narrowing wraps and complex to real drops the imaginary part).
    chunk_bytes : int, optional
        Bytes per chunk (default: the pool's buffer size).
    streams : int, default 2
        CUDA streams the chunks go round (at least 1).
    pool : PinnedPool, optional
        Staging buffers (default: a shared pool of 3 x 256 MiB).
    pack : {"auto", "threads", "register"}
        How pageable arrays reach pinned memory: ``"threads"`` copies them into the pool's
        buffers with ``pack_threads`` threads, ``"register"`` page-locks the chunk's own pages
        for the copy (``cudaHostRegister``); ``"auto"`` is ``"threads"`` (faster, measured on
        an H200, see docs/performance.md).
    pack_threads : int, optional
        Packing threads (default: one per core, at most 16).
    progress : bool, default False
        Show a progress bar over chunks (tqdm or rich).
    report : bool, default False
        Also return a :class:`TransferReport`.
    backend : {"cpu", "gpu"} or None
        None picks the GPU when there is one.

    Returns
    -------
    tuple of arrays, or (tuple, TransferReport) when ``report``
        Device arrays in the order given; on the CPU backend NumPy copies (never the caller's
        arrays).

    Raises
    ------
    TypeError
        ``arrays`` is not an array, a sequence of arrays or a CSR/CSC/COO matrix; an option
        has the wrong type.
    ValueError
        An array is not 1-D, ``dtypes`` has the wrong length, a size option is below 1, or the
        result cannot fit in free memory.

    Examples
    --------
    >>> out = upload([np.arange(10.0), np.arange(3)], chunk_bytes=16, backend="cpu")
    >>> [a.tolist() for a in out][1]
    [0, 1, 2]
    """
    sources = _sources_of(arrays)
    target_dtypes = _target_dtypes(dtypes, sources)
    streams = positive_int("streams", streams)
    pack = check_pack(pack)
    pack_threads = optional_positive_int("pack_threads", pack_threads)
    progress = _validate.check_bool("progress", progress)
    report = _validate.check_bool("report", report)
    pool_bytes = (pool.buffer_bytes if pool is not None else DEFAULT_BUFFER_BYTES)
    chunk_bytes = pool_bytes if chunk_bytes is None else positive_int("chunk_bytes", chunk_bytes)
    chunks = plan_for(sources, chunk_bytes, pack)
    target_backend = resolve_backend(backend)
    _validate.ensure_fits(device_bytes(sources, target_dtypes, chunks, streams), "upload", target_backend)
    timeline = Timeline(report, target_backend)
    if target_backend == "cpu":
        with timeline.host("pack"):
            out = tuple(s.astype(d, copy=True) for s, d in zip(sources, target_dtypes))
        timeline.report.nbytes, timeline.report.chunks = sum(a.nbytes for a in out), len(chunks)
        result = timeline.finish()
        return (out, result) if report else out
    import cupy

    targets = [cupy.empty(s.size, d) for s, d in zip(sources, target_dtypes)]
    bar = Progress(progress, len(chunks), "upload")
    try:
        with staged_streams(pool, streams, pack, pack_threads, timeline) as (stager, stream_list):
            staging: dict[tuple[int, str, int], Any] = {}  # alive until the streams are joined
            stream_arrays(sources, targets, chunks, stager, stream_list, timeline, bar, staging)
            join_streams(stream_list)
    finally:
        bar.close()
    timeline.report.chunks = len(chunks)
    result = timeline.finish()
    return (tuple(targets), result) if report else tuple(targets)
