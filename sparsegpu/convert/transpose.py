"""CSR <-> CSC: :func:`swap_major`, on the device with the library's own kernels
(kernels/transpose.cu): a stable radix sort of the entries by minor index, so that no array
expression of CuPy (each compiled by NVRTC the first time a process meets it) stands on the path.

Each kernel launch has a NumPy reference (:mod:`sparsegpu.reference.transpose`) that runs the same
steps on the CPU, so the tests can compare every stage.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from sparsegpu import primitives
from sparsegpu._kernels import KernelFile
from sparsegpu.convert.coo_sort import _INDEX_DTYPES, DATA_DTYPES, _launch
from sparsegpu.convert.pointers import _xp_of, compress
from sparsegpu.primitives import expand_pointers
from sparsegpu.reference import convert as convert_reference
from sparsegpu.reference import transpose as reference

TRANSPOSE_BLOCK = 256  # kernels/transpose.cu TRANSPOSE_BLOCK
TRANSPOSE_TILE = reference.TILE  # kernels/transpose.cu TRANSPOSE_TILE
NULL_POINTER = np.uint64(0)  # a null device pointer argument: positions are implicit
# Index-only kernels: the value type is a placeholder (int32), the index type is I.
TRANSPOSE_INDEX_KERNELS = KernelFile("transpose.cu", ["transpose_count<{I}>", "transpose_move<{I}>"], (np.int32,),
                                     _INDEX_DTYPES)
TRANSPOSE_PLACE_KERNELS = KernelFile("transpose.cu", ["transpose_place<{V}, {I}>"], DATA_DTYPES, _INDEX_DTYPES)


def swap_major(indptr: Any, indices: Any, data: Any, n_minor: int, xp: ModuleType) -> tuple[Any, Any, Any]:
    """CSR arrays of A to CSR arrays of A^T (equally: CSR <-> CSC of the same matrix).

    Parameters
    ----------
    indptr, indices, data : ndarray
        A valid compressed layout (not checked here), all NumPy or all CuPy.
    n_minor : int
        Columns of the CSR (rows of the CSC): the new major dimension.
    xp : module
        ``numpy`` or ``cupy``.

    Returns
    -------
    (indptr, indices, data) : tuple of ndarray
        The other orientation, ordered by (new major, new minor). On the device, by
        :func:`transpose_compressed` where it takes the arrays (:func:`transposable_on_device`),
        else by a stable sort of a (new major, new minor) int64 key; on the host by NumPy's
        sort of that key (entries repeating one (major, minor) pair may then come in another
        order; a canonical layout has none).

    Examples
    --------
    >>> import numpy as np
    >>> p, i, d = swap_major(np.array([0, 2, 3]), np.array([0, 1, 1]), np.array([1., 2., 3.]), 2, np)
    >>> p.tolist(), i.tolist(), d.tolist()
    ([0, 1, 3], [0, 0, 1], [1.0, 2.0, 3.0])
    """
    if xp is not np and transposable_on_device(indptr, indices, data, n_minor):
        return transpose_compressed(*(xp.ascontiguousarray(a) for a in (indptr, indices, data)), n_minor)
    n_major = indptr.size - 1
    major = expand_pointers(indptr, xp).astype(np.int64)
    key = indices.astype(np.int64) * max(n_major, 1) + major
    order = xp.argsort(key)
    new_indices = major[order].astype(indptr.dtype)
    new_data = data[order]
    new_indptr = compress(indices[order], n_minor, indptr.dtype, xp)
    return new_indptr, new_indices, new_data


def transposable_on_device(indptr: Any, indices: Any, data: Any, n_minor: int) -> bool:
    """Whether :func:`transpose_compressed` takes these arrays: one index dtype (int32 or int64)
    that holds every position and minor index, a value dtype the kernels are built for."""
    dtype = indptr.dtype
    if dtype not in _INDEX_DTYPES or indices.dtype != dtype or data.dtype not in DATA_DTYPES:
        return False
    return max(int(indices.size), int(n_minor)) <= np.iinfo(dtype).max


def transpose_compressed(indptr: Any, indices: Any, data: Any, n_minor: int) -> tuple[Any, Any, Any]:
    """CSR arrays of A to CSR arrays of A^T (equally CSR <-> CSC), by kernels and no array expression.

    Parameters
    ----------
    indptr, indices, data : ndarray
        A valid compressed layout (not checked here), all NumPy or all CuPy, ``indptr`` and
        ``indices`` of one dtype, int32 or int64; values of a dtype in ``DATA_DTYPES``
        (:func:`transposable_on_device`).
    n_minor : int
        The new major dimension (columns of a CSR).

    Returns
    -------
    (indptr, indices, data) : tuple of ndarray
        The other orientation, each new major line in storage order of its entries: ascending
        old major index, then storage order. Bitwise :func:`sparsegpu.convert.swap_major`'s
        result on the device (whose sort is stable).

    Raises
    ------
    TypeError
        Arrays the kernels do not take (:func:`transposable_on_device` is False).
    ValueError
        ``data`` and ``indices`` of different lengths.

    Notes
    -----
    Entries are sorted by minor index with a stable least-significant-digit radix sort, 8 bits
    a pass (two passes up to 65536 minor indices): per pass, a digit count per tile of 2048
    entries, an exclusive scan of the counts (:func:`sparsegpu.primitives.exclusive_scan`), and
    a pass that ranks each tile's entries in shared memory and writes each digit's run in
    order. The last pass gathers the values and old major indices (:func:`expand_pointers`);
    the new pointers come from a binary search per pointer over the sorted minor indices. On
    the CPU the NumPy references of the kernels run the same steps.

    Examples
    --------
    >>> import numpy as np
    >>> p, i, d = transpose_compressed(np.array([0, 2, 3]), np.array([0, 1, 1]), np.array([1., 2., 3.]), 2)
    >>> p.tolist(), i.tolist(), d.tolist()
    ([0, 1, 3], [0, 0, 1], [1.0, 2.0, 3.0])
    """
    if not transposable_on_device(indptr, indices, data, n_minor):
        raise TypeError(f"transpose_compressed takes indptr and indices of one dtype, int32 or int64, holding every "
                        f"position and minor index, and data of {', '.join(map(str, DATA_DTYPES))}; got indptr "
                        f"{indptr.dtype}, indices {indices.dtype}, data {data.dtype}, n_minor {n_minor}")
    if data.size != indices.size:
        raise ValueError(f"data has {data.size} entries but indices {indices.size}")
    xp = _xp_of(indptr)
    gpu = xp is not np
    index_dt, nnz = indptr.dtype, int(indices.size)
    if nnz == 0:
        return xp.zeros(n_minor + 1, dtype=index_dt), xp.empty(0, dtype=index_dt), xp.empty(0, dtype=data.dtype)
    row_of = expand_pointers(indptr, xp)
    n_tiles = reference.tiles_for(nnz)
    shifts = reference.radix_shifts(n_minor)
    keys, pos = indices, None
    # Ping-pong buffers: (keys, positions) of even passes in 0, 1, of odd ones in 2, 3.
    spare = [xp.empty(nnz, dtype=index_dt) for _ in range(min(4, 2 * len(shifts) - 1))]
    new_indices, new_data = xp.empty(nnz, dtype=index_dt), xp.empty(nnz, dtype=data.dtype)
    counts = xp.empty(reference.DIGITS * n_tiles, dtype=index_dt)
    for p, shift in enumerate(shifts):
        _count(keys, shift, n_tiles, counts)
        starts = primitives.exclusive_scan(counts)
        keys_out = spare[2 * (p % 2)]
        if p + 1 < len(shifts):
            pos_out = spare[2 * (p % 2) + 1]
            _move(keys, pos, shift, n_tiles, starts, keys_out, pos_out)
            keys, pos = keys_out, pos_out
        else:
            _place(keys, pos, shift, n_tiles, starts, row_of, data, keys_out, new_indices, new_data)
            keys = keys_out
    new_indptr = xp.empty(n_minor + 1, dtype=index_dt)
    if gpu:
        _launch("compress_sorted", index_dt, n_minor + 1, (keys, np.int64(nnz), np.int64(n_minor), new_indptr))
    else:
        convert_reference.compress_sorted(keys, new_indptr)
    return new_indptr, new_indices, new_data


def _grid(n_tiles: int) -> tuple[tuple[int], tuple[int]]:
    return (n_tiles,), (TRANSPOSE_BLOCK,)


def _count(keys: Any, shift: int, n_tiles: int, counts: Any) -> None:
    if _xp_of(keys) is np:
        reference.transpose_count(keys, shift, n_tiles, counts)
        return
    TRANSPOSE_INDEX_KERNELS.function("transpose_count<{I}>", np.int32, keys.dtype)(
        *_grid(n_tiles), (keys, np.int64(keys.size), np.int32(shift), np.int64(n_tiles), counts))


def _move(keys: Any, pos: Any, shift: int, n_tiles: int, starts: Any, keys_out: Any, pos_out: Any) -> None:
    if _xp_of(keys) is np:
        reference.transpose_move(keys, pos, shift, n_tiles, starts, keys_out, pos_out)
        return
    TRANSPOSE_INDEX_KERNELS.function("transpose_move<{I}>", np.int32, keys.dtype)(
        *_grid(n_tiles), (keys, NULL_POINTER if pos is None else pos, np.int64(keys.size), np.int32(shift),
                          np.int64(n_tiles), starts, keys_out, pos_out))


def _place(keys: Any, pos: Any, shift: int, n_tiles: int, starts: Any, row_of: Any, data: Any, keys_out: Any,
           indices_out: Any, data_out: Any) -> None:
    if _xp_of(keys) is np:
        reference.transpose_place(keys, pos, shift, n_tiles, starts, row_of, data, keys_out, indices_out, data_out)
        return
    TRANSPOSE_PLACE_KERNELS.function("transpose_place<{V}, {I}>", data.dtype, keys.dtype)(
        *_grid(n_tiles), (keys, NULL_POINTER if pos is None else pos, np.int64(keys.size), np.int32(shift),
                          np.int64(n_tiles), starts, row_of, data, keys_out, indices_out, data_out))
