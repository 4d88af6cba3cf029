"""Products with a CSR matrix kept in host memory (:class:`OutOfCoreCSR`): row blocks sized
to a device memory budget (:func:`plan_row_blocks`, :func:`block_bytes`) are streamed through
the GPU, each block's upload overlapping the previous block's SpMV."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate
from sparsegpu.reference.spmv import combine
from sparsegpu._backend import Backend, is_device_array, resolve_backend
from sparsegpu.formats._compressed import gather_spmv, make_gather_plan, threads_per_row
from sparsegpu.transfer._checks import (
    PackStrategy,
    check_csr_ends,
    check_pack,
    csr_input,
    optional_positive_int,
    positive_int,
)
from sparsegpu.transfer.pinned import PinnedPool, is_pinned, pin, pinned_empty
from sparsegpu.transfer.report import Progress, Timeline, TransferReport
from sparsegpu.transfer.staging import join_streams, staged_streams

#: Out-of-core slots place each block array on this boundary (CUDA allocations' alignment),
#: so a slot may need up to 3 * SLOT_ALIGN bytes beyond :func:`block_bytes`.
SLOT_ALIGN = 256


def block_bytes(rows: int, nnz: int, value_itemsize: int, index_itemsize: int) -> int:
    """Device bytes one row block of an :class:`OutOfCoreCSR` occupies: its values and column
    indices, its rebased row pointers and its piece of y.

    >>> block_bytes(rows=10, nnz=100, value_itemsize=8, index_itemsize=4)
    1324
    """
    return nnz * (value_itemsize + index_itemsize) + (rows + 1) * index_itemsize + rows * value_itemsize


def plan_row_blocks(indptr: np.ndarray, budget_bytes: int, value_itemsize: int, index_itemsize: int, *,
                    slots: int = 2, chunk_rows: int | None = None) -> list[tuple[int, int]]:
    """Row blocks ``[(r0, r1), ...]`` covering every row, each within ``budget_bytes // slots``
    as :func:`block_bytes` counts it (``slots`` blocks are on the device at once). Greedy:
    each block takes as many rows as fit, or ``chunk_rows`` rows when given. A row that does
    not fit alone raises ValueError naming it.

    >>> plan_row_blocks(np.array([0, 3, 3, 9, 10]), 2 * 100, 8, 4)
    [(0, 2), (2, 3), (3, 4)]
    """
    budget_bytes = positive_int("device_budget_bytes", budget_bytes)
    slot_bytes = budget_bytes // slots
    m = indptr.size - 1
    if chunk_rows is not None:
        chunk_rows = positive_int("chunk_rows", chunk_rows)
    per_entry, per_row = value_itemsize + index_itemsize, index_itemsize + value_itemsize
    # cost[r]: bytes of rows 0..r-1 (entries and per-row terms); a block [r0, r1) costs
    # cost[r1] - cost[r0] + one extra pointer. Monotone, so each block end is a search.
    cost = np.asarray(indptr, dtype=np.int64) * per_entry + np.arange(m + 1, dtype=np.int64) * per_row
    blocks: list[tuple[int, int]] = []
    r0 = 0
    while r0 < m:
        if chunk_rows is not None:
            r1 = min(m, r0 + chunk_rows)
        else:
            r1 = int(np.searchsorted(cost, cost[r0] + slot_bytes - index_itemsize, side="right")) - 1
            r1 = min(r1, m)
        too_big = cost[r0 + 1:r1 + 1] - cost[r0] + index_itemsize > slot_bytes
        if r1 <= r0 or too_big.any():
            row = r0 if r1 <= r0 else r0 + int(too_big.argmax())
            length = int(indptr[row + 1] - indptr[row])
            need = block_bytes(1, length, value_itemsize, index_itemsize)
            if chunk_rows is not None and need <= slot_bytes:
                raise ValueError(f"chunk_rows={chunk_rows}: rows {r0}..{r1 - 1} need more than the {slot_bytes} bytes "
                                 f"a block may use (device_budget_bytes={budget_bytes} over {slots} blocks); "
                                 "pass fewer rows or a larger budget")
            raise ValueError(f"row {row} has {length} entries ({need} bytes on the device), more than the "
                             f"{slot_bytes} bytes a block may use (device_budget_bytes={budget_bytes} over {slots} "
                             "blocks in flight)")
        blocks.append((r0, r1))
        r0 = r1
    return blocks


def is_memory_mapped(array: np.ndarray) -> bool:
    """Whether ``array``'s memory belongs to a memory map (``numpy.memmap`` or ``mmap.mmap``).

    >>> import mmap
    >>> is_memory_mapped(np.zeros(3)), is_memory_mapped(np.frombuffer(mmap.mmap(-1, 16)))
    (False, True)
    """
    import mmap

    base: Any = array
    while base is not None:
        if isinstance(base, (np.memmap, mmap.mmap)):
            return True
        base = getattr(base, "base", None) if isinstance(base, np.ndarray) else getattr(base, "obj", None)
    return False


def _pinned_arrays(S: Any, memory_mapped_too: bool) -> Any:
    """``S`` with its arrays page-locked in place (:func:`pin`), memory-mapped ones left alone
    unless ``memory_mapped_too``; the same object when nothing changed."""
    arrays = [S.data, S.indices, S.indptr]
    pinned = [pin(a) if a.size and (memory_mapped_too or not is_memory_mapped(a)) else a for a in arrays]
    if all(p is a for p, a in zip(pinned, arrays)):
        return S
    return sp.csr_array(tuple(pinned), shape=S.shape, copy=False)  # pin copied an array it could not lock


class OutOfCoreCSR:
    """A CSR matrix kept in host memory whose products stream row blocks through the GPU.

    Each block runs the same gather kernel as the in-memory :class:`~sparsegpu.CSR` with the
    same threads per row, so ``A @ x`` is bitwise equal to ``CSR.from_scipy(S) @ x`` for a
    canonical ``S``, and deterministic. Block b's upload runs while block b-1's SpMV runs, on
    its own CUDA stream. Launch plans are built per block on the first product and cached. On
    the CPU backend the blocks run SciPy's product one after the other.

    Parameters
    ----------
    S : scipy sparse matrix or array
        CSR is used as it is, never copied, so memory-mapped arrays stay on disk until read;
        other formats are checked in full and converted on the host. Values float32, float64,
        complex64 or complex128; indices int32 or int64 (both arrays the same).
    device_budget_bytes : int, optional
        Device memory for the blocks in flight (``streams`` blocks, each its values, column
        indices, rebased row pointers and piece of y, per :func:`block_bytes`); default half
        the free device memory. x (and y when it is a CuPy array) stay resident on top of it.
    chunk_rows : int, optional
        Fixed rows per block instead of the largest that fit.
    streams : int, default 2
        Blocks in flight (at least 2).
    pool, pack, pack_threads
        Staging, as for :func:`upload`; arrays already pinned (:func:`pin`,
        :func:`pinned_empty`) are copied directly.
    pin : bool or None, default None
        Page-lock the matrix's arrays in place at construction (:func:`pin`: no copy, no extra
        host memory), so every product copies them at the pinned rate with no staging. None
        does it on the GPU backend for arrays that are not memory-mapped (a memory-mapped
        matrix stays on disk until read, and is staged); True for every array; False never.
        The pages stay locked while the matrix (or the caller's arrays) live. Construction
        then pays the registration, roughly a copy's time of the arrays once.
    backend : {"cpu", "gpu"} or None
        None picks the GPU when there is one.
    check : bool, default True
        Validate the row pointers and column indices once, on the host, at construction (one
        pass over them). False skips it for trusted input (the caller guarantees a valid CSR,
        e.g. a memory-mapped matrix that was checked when written); the ends of ``indptr``
        are still checked.

    Raises
    ------
    TypeError
        ``S`` is not a scipy sparse matrix, its dtypes are not stored ones, or an option has
        the wrong type.
    ValueError
        Malformed arrays, a size option below its minimum, a row too long for the budget, or
        blocks that cannot fit in free device memory.

    Examples
    --------
    >>> S = sp.random(200, 50, density=0.1, random_state=3, format="csr")
    >>> A = OutOfCoreCSR(S, device_budget_bytes=2048, backend="cpu")
    >>> len(A.blocks) > 1, bool(np.allclose(A @ np.ones(50), S @ np.ones(50)))
    (True, True)
    """

    def __init__(self, S: Any, *, device_budget_bytes: int | None = None, chunk_rows: int | None = None,
                 streams: int = 2, pool: PinnedPool | None = None, pack: PackStrategy = "auto",
                 pack_threads: int | None = None, backend: str | None = None, check: bool = True,
                 pin: bool | None = None) -> None:
        S = csr_input(S)
        if pin is not None:
            pin = _validate.check_bool("pin", pin)
        check_csr_ends(S)
        if _validate.check_bool("check", check):
            _validate.check_compressed(S.indptr, S.indices, S.data, S.shape[0], S.shape[1], "rows", "columns")
        if S.dtype not in _validate.VALUE_DTYPES:
            raise TypeError(f"OutOfCoreCSR stores values as they are; {S.dtype} is not one of float32, float64, "
                            "complex64, complex128 (convert with S.astype(np.float64) first)")
        if S.indices.dtype not in _validate.INDEX_DTYPES or S.indptr.dtype != S.indices.dtype:
            raise TypeError(f"indices ({S.indices.dtype}) and indptr ({S.indptr.dtype}) must both be int32 "
                            "or both int64")
        self.streams = positive_int("streams", streams)
        if self.streams < 2:
            raise ValueError("streams must be at least 2: one block uploads while another computes")
        self.pack = check_pack(pack)
        self.pack_threads = optional_positive_int("pack_threads", pack_threads)
        self.pool = pool
        self.backend: Backend = resolve_backend(backend)
        self._S = S
        self.shape: tuple[int, int] = S.shape
        self.dtype = np.dtype(S.dtype)
        self.index_dtype = np.dtype(S.indices.dtype)
        if device_budget_bytes is None:
            device_budget_bytes = self._default_budget()
        self.device_budget_bytes = positive_int("device_budget_bytes", device_budget_bytes)
        padding = self.streams * 3 * SLOT_ALIGN
        if self.device_budget_bytes <= padding:
            raise ValueError(f"device_budget_bytes={self.device_budget_bytes} leaves nothing for the matrix: "
                             f"{self.streams} blocks in flight need {padding} bytes of alignment alone")
        self.blocks = plan_row_blocks(S.indptr, self.device_budget_bytes - padding, self.dtype.itemsize,
                                      self.index_dtype.itemsize, slots=self.streams, chunk_rows=chunk_rows)
        self._layouts = [self._layout(r0, r1) for r0, r1 in self.blocks]
        self._slot_bytes = max((layout[-1] for layout in self._layouts), default=0)
        if self.backend == "gpu":
            self._ensure_device_fits(0)
        m = self.shape[0]
        self._tpr = threads_per_row(S.nnz / m if m else 0.0)
        self._plans: dict[int, Any] = {}
        if self.backend == "gpu" and pin is not False:
            self._S = S = _pinned_arrays(S, memory_mapped_too=pin is True)
        self._pinned = [is_pinned(a) for a in (S.data, S.indices, S.indptr)]
        self._pinned_y: np.ndarray | None = None
        self.last_report: TransferReport | None = None

    def _ensure_device_fits(self, resident: int) -> None:
        """ValueError when the block slots (and ``resident`` bytes of x and y allocated with
        them) cannot fit in free device memory."""
        _validate.ensure_fits(self.streams * self._slot_bytes + resident,
                              f"OutOfCoreCSR's {self.streams} blocks in flight "
                              f"(device_budget_bytes={self.device_budget_bytes})", "gpu")

    def _default_budget(self) -> int:
        if self.backend == "gpu":
            import cupy

            return int(cupy.cuda.runtime.memGetInfo()[0]) // 2
        return 1 << 30

    @property
    def nnz(self) -> int:
        return int(self._S.nnz)

    @property
    def nbytes(self) -> int:
        """Host bytes of the matrix's arrays (what every product moves to the device)."""
        return int(self._S.data.nbytes + self._S.indices.nbytes + self._S.indptr.nbytes)

    def __matmul__(self, x: Any) -> Any:
        if sp.issparse(x):
            return NotImplemented
        return self.spmv(x)

    def spmv(self, x: Any, y: Any = None, alpha: Any = 1, beta: Any = 0, *, progress: bool = False,
             report: bool = False) -> Any:
        """``alpha * A @ x + beta * y``.

        Parameters
        ----------
        x : numpy.ndarray or cupy.ndarray
            1-D of length ``shape[1]``. A NumPy x gives a NumPy y (pieces come back block by
            block); a CuPy x keeps y on the device.
        y : array, optional
            Written in place and returned: exactly the matrix's dtype, the same array library
            as x, writeable, and not overlapping x. Required when ``beta != 0``.
        alpha, beta : number
            Python, NumPy or 0-d array scalars.
        progress : bool, default False
            A progress bar over blocks.
        report : bool, default False
            Keep the timeline in ``last_report``.

        Returns
        -------
        array
            y.

        Raises
        ------
        TypeError
            x or y of the wrong kind or dtype, a scalar that is not a number, a bool option
            that is not a bool.
        ValueError
            Wrong lengths, a read-only y, y overlapping x, or beta nonzero without y.

        Examples
        --------
        >>> S = sp.random(30, 20, density=0.2, random_state=1, format="csr")
        >>> A = OutOfCoreCSR(S, device_budget_bytes=4096, backend="cpu")
        >>> y = np.ones(30)
        >>> bool(np.allclose(A.spmv(np.ones(20), y, alpha=2.0, beta=1.0), 2 * (S @ np.ones(20)) + 1))
        True
        """
        m, n = self.shape
        x = _validate.check_vector(x, n, self.dtype)
        if y is not None:
            _validate.check_out(y, m, self.dtype, x)  # writeable, same library, apart from x
        alpha = _validate.check_scalar("alpha", alpha, self.dtype)
        beta = _validate.check_scalar("beta", beta, self.dtype)
        progress = _validate.check_bool("progress", progress)
        report = _validate.check_bool("report", report)
        if y is None and beta != 0:
            raise ValueError("beta is nonzero but no y was given to scale and add")
        if self.backend == "cpu":
            if is_device_array(x):
                raise TypeError("this OutOfCoreCSR runs on the CPU backend but x is a CuPy array")
            out = np.empty(m, self.dtype) if y is None else y
            timeline = Timeline(report, "cpu")
            with timeline.host("device"):
                self._spmv_cpu(x, out, alpha, beta)
            timeline.report.nbytes, timeline.report.chunks = self.nbytes, len(self.blocks)
            self.last_report = timeline.finish()
            return out
        return self._spmv_gpu(x, y, alpha, beta, progress, report)

    def _block_arrays(self, r0: int, r1: int) -> tuple[int, int]:
        indptr = self._S.indptr
        return int(indptr[r0]), int(indptr[r1])

    def _spmv_cpu(self, x: np.ndarray, y: np.ndarray, alpha: Any, beta: Any) -> np.ndarray:
        """Each block through SciPy's compiled product, as the CPU backend's ``A @ x`` runs: a row's
        sum does not depend on the block it is in, so the result is bitwise the in-memory one."""
        S = self._S
        for r0, r1 in self.blocks:
            a, b = self._block_arrays(r0, r1)
            block = sp.csr_array((S.data[a:b], S.indices[a:b], S.indptr[r0:r1 + 1] - S.indptr[r0]),
                                 shape=(r1 - r0, self.shape[1]), copy=False)
            combine(y[r0:r1], block @ x, alpha, beta)
        return y

    def _spmv_gpu(self, x: Any, y: Any, alpha: Any, beta: Any, progress: bool, report: bool) -> Any:
        import cupy

        m, n = self.shape
        S = self._S
        host_out = not is_device_array(x)
        vector_bytes = self.dtype.itemsize
        self._ensure_device_fits(vector_bytes * (n if host_out else (m if y is None else 0)))
        x_device = cupy.asarray(x)
        if host_out:
            if self._pinned_y is None:
                self._pinned_y = pinned_empty(m, self.dtype)
            y_device = None
        else:
            y_device = cupy.empty(m, self.dtype) if y is None else y
        layouts = self._layouts
        slots = [cupy.empty(self._slot_bytes, np.uint8) for _ in range(self.streams)]
        timeline = Timeline(report)
        bar = Progress(progress, len(self.blocks), "out-of-core spmv")
        runtime = cupy.cuda.runtime
        try:
            with staged_streams(self.pool, self.streams, self.pack, self.pack_threads, timeline) as (stager, streams):
                # x was uploaded on the current stream; every block stream waits for it.
                x_ready = cupy.cuda.get_current_stream().record()
                for stream in streams:
                    stream.wait_event(x_ready)
                for number, (r0, r1) in enumerate(self.blocks):
                    stream, slot = streams[number % self.streams], slots[number % self.streams]
                    a, b = self._block_arrays(r0, r1)
                    rows = r1 - r0
                    data, indices, indptr_block, y_slot = self._carve(slot, layouts[number], rows, b - a)
                    stager.copy(indptr_block, S.indptr[r0:r1 + 1], stream, self._pinned[2])
                    stager.copy(indices, S.indices[a:b], stream, self._pinned[1])
                    stager.copy(data, S.data[a:b], stream, self._pinned[0])
                    with stream:
                        y_piece = y_slot if host_out else y_device[r0:r1]
                        if host_out and beta != 0:
                            y_piece.set(y[r0:r1], stream=stream)
                        with timeline.device("device", stream):
                            indptr_block -= indptr_block.dtype.type(a)  # rebase to the block's first entry
                            if number not in self._plans:
                                self._plans[number] = make_gather_plan(indptr_block, self.dtype, self._tpr)
                            gather_spmv(self._plans[number], indptr_block, indices, data, x_device, y_piece,
                                        alpha, beta)
                        if host_out and rows:
                            with timeline.device("d2h", stream):
                                runtime.memcpyAsync(self._pinned_y[r0:r1].ctypes.data, y_piece.data.ptr,
                                                    y_piece.nbytes, runtime.memcpyDeviceToHost, stream.ptr)
                    bar.advance()
                join_streams(streams)
        finally:
            bar.close()
        timeline.report.chunks = len(self.blocks)
        self.last_report = timeline.finish()
        if not host_out:
            return y_device
        if y is None:
            return self._pinned_y.copy()
        np.copyto(y, self._pinned_y)
        return y

    def _layout(self, r0: int, r1: int) -> tuple[int, int, int, int]:
        """Byte offsets of a block's indices, row pointers and y piece in its slot, and the
        slot bytes it needs (each array starts on a :data:`SLOT_ALIGN` boundary)."""
        a, b = self._block_arrays(r0, r1)
        nnz, rows = b - a, r1 - r0
        indices_at = _align_up(nnz * self.dtype.itemsize)
        indptr_at = _align_up(indices_at + nnz * self.index_dtype.itemsize)
        y_at = _align_up(indptr_at + (rows + 1) * self.index_dtype.itemsize)
        return indices_at, indptr_at, y_at, y_at + rows * self.dtype.itemsize

    def _carve(self, slot: Any, layout: tuple[int, int, int, int], rows: int, nnz: int) -> tuple[Any, Any, Any, Any]:
        indices_at, indptr_at, y_at, _ = layout
        value_size, index_size = self.dtype.itemsize, self.index_dtype.itemsize
        return (slot[:nnz * value_size].view(self.dtype),
                slot[indices_at:indices_at + nnz * index_size].view(self.index_dtype),
                slot[indptr_at:indptr_at + (rows + 1) * index_size].view(self.index_dtype),
                slot[y_at:y_at + rows * value_size].view(self.dtype))

    def __repr__(self) -> str:
        m, n = self.shape
        return (f"<OutOfCoreCSR {m}x{n}, {self.dtype}, {self.nnz} stored, {len(self.blocks)} row blocks "
                f"under {self.device_budget_bytes} B, on {self.backend}>")


def _align_up(nbytes: int) -> int:
    return -(-nbytes // SLOT_ALIGN) * SLOT_ALIGN
