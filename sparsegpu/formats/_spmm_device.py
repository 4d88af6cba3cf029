"""The GPU side of sparse times dense (kernels/spmm.cu): kernel choice and launches.

Which kernel runs (see kernels/spmm.cu for what each does):

- X with row stride 1 (F order, and any single column): the ``*_cols`` kernels. CSR gives each
  row a sub-warp of 1 to 32 lanes, the smallest power of two at least a seventh of the mean row
  length (the SpMV rule); k is cut into tiles of up to 8 columns (the smallest power of two at
  least k, at most 8) along the grid's second dimension.
- Any other X (C order, strided views): the ``*_rows`` kernels. A row gets G lanes, the smallest
  power of two with G * VEC >= k (at most 32), each lane TILES chunks of VEC columns (TILES > 1
  only at 32 lanes, up to 4); VEC is one 16-byte vector (2 doubles, 4 floats, 2 complex64) when
  X and Y have unit column strides, row strides and k multiples of VEC and 16-byte aligned bases,
  else 1.
- CSR rows longer than the split length (256 entries for the row kernels, 64 per lane for the
  column kernels) are cut into segments summed apart (``partials``) and added in segment order
  by ``csr_spmm_finish``; the split is computed once per matrix and cached.

Staging a column-major X. In F order the k values X[j, c0:c0+t] an entry gathers lie n apart,
each in a 32-byte sector of its own; they share sectors across a warp only where neighbouring
lanes read neighbouring columns j (a stencil: the same position of neighbouring rows, or runs
of consecutive columns in a row). Where the columns are scattered (graphs) the ``*_cols``
kernels move a sector per entry per column, 4-6x slower than the ``*_rows`` kernels at k >= 16
on R-MAT and Kronecker graphs. There X is copied into a row-major scratch (``dense_transpose``,
32 x 32 tiles, coalesced both ways), the ``*_rows`` kernels run over it, and a Y whose column
stride is not 1 gets a row-major scratch too, copied back with alpha and beta applied.

Why a Y scratch rather than the row kernels writing F-order Y through its strides: a group of
G lanes owns a row, so in F order a warp's store puts 32 / G values in each of G columns, m
apart: at G = 32 (k >= 32) each 8-byte value takes a 32-byte sector of its own, and a Y
without unit column stride also turns off the 16-byte vector loads of X (one flag covers both).
Copying back costs 2 m k coalesced moves, little beside the product's nnz k gathers.

The rule, per matrix layout, its statistic computed once on the device and cached: an entry is
*scattered* when its column is more than ``LOCAL_WINDOW`` (16) columns from both its neighbours
as the ``*_cols`` kernels read them, the previous entry of its row and the entry at the same
position of the previous row (the previous slot and lane for ELL and SELL). A scattered gather
in F order wastes ``32 - itemsize`` bytes of its sector per column, against about ``itemsize``
bytes per column of X and Y for staging (read and write X, n k; read the Y scratch and write Y,
m k), so a product stages when ``k >= STAGE_MIN_K`` (4), at least ``MIN_SCATTERED_SHARE`` (a
quarter) of the entries are scattered, and

    scattered * (32 - itemsize) > 2 * (n + m) * itemsize,

and its scratch fits in free device memory. Below 4 columns the tile's few gathers mostly come
from L2 and the staging's two launches weigh more; below a quarter scattered, most of a warp's
gathers share sectors and L1 holds the rest (dense FEM rows: few scattered entries, but many). Stencils (2-D and 3-D Poisson, 27-point:
a share of scattered entries near 1 / grid width) keep the ``*_cols`` kernels; R-MAT and
Kronecker graphs (most entries scattered) stage. Scratch: n k values (plus m k when Y is not
row-major), from CuPy's pool for the call.

Summation order: the ``*_rows`` kernels and the padded ``*_cols`` kernel add a row's terms in
entry order; ``csr_spmm_cols`` with more than one lane per row adds lane-strided partial sums
by a shuffle tree, so its result may differ from the row-major one in the last bits (both
agree with the references to rounding). A staged product equals the row-major path's bit for
bit: the same kernels over the same values, alpha and beta applied by the same expression.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparsegpu import _validate
from sparsegpu._kernels import KernelFile, blocks_for
from sparsegpu.primitives import expand_pointers

SPMM_BLOCK = 256  # kernels/spmm.cu SPMM_BLOCK
VECTOR_BYTES = 16  # kernels/spmm.cu spmm_vector: one 16-byte load per chunk
GROUP_LANES = (1, 2, 4, 8, 16, 32)
#: (lanes per row, chunks per lane) of the row-major kernels: more chunks only at 32 lanes.
ROW_SHAPES = tuple((g, 1) for g in GROUP_LANES[:-1]) + ((32, 1), (32, 2), (32, 4))
COLUMN_TILES = (1, 2, 4, 8)
MAX_GRID_Y = 65535  # CUDA's limit on a grid's second dimension
#: Entries per segment of a long row in the row-major kernels: a group's walk down one row stays
#: short enough that a power-law hub does not hold up the product.
ROW_SEGMENT = 256
#: Entries per lane of a segment in the column-major kernels (as the SpMV kernel's long rows).
LANE_SEGMENT = 64
NULL_POINTER = np.uint64(0)  # a null device pointer argument

CSR_ROWS = KernelFile("spmm.cu", [f"csr_spmm_rows<{{V}}, {{I}}, {g}, {t}, {v}>" for g, t in ROW_SHAPES
                                  for v in ("true", "false")] + ["csr_spmm_finish<{V}, {I}>"])
CSR_COLS = KernelFile("spmm.cu", [f"csr_spmm_cols<{{V}}, {{I}}, {p}, {t}>" for p in GROUP_LANES
                                  for t in COLUMN_TILES] + ["csr_spmm_finish<{V}, {I}>"])
PADDED_ROWS = KernelFile("spmm.cu", [f"padded_spmm_rows<{{V}}, {{I}}, {g}, {t}, {v}>" for g, t in ROW_SHAPES
                                     for v in ("true", "false")])
PADDED_COLS = KernelFile("spmm.cu", [f"padded_spmm_cols<{{V}}, {{I}}, {t}>" for t in COLUMN_TILES])
TRANSPOSE = KernelFile("spmm.cu", ["dense_transpose<{V}>"], index_dtypes=(np.int32,))
TRANSPOSE_TILE = 32  # kernels/spmm.cu TRANSPOSE_TILE: a block moves one 32 x 32 tile
TRANSPOSE_THREADS = 256  # TRANSPOSE_TILE * TRANSPOSE_STEPS
SECTOR_BYTES = 32  # a gather moves at least one 32-byte sector
#: Columns within this distance of a neighbour's are local: for float32 and float64 X they lie
#: in the same or the next 128-byte line of an F-order column.
LOCAL_WINDOW = 16
#: Fewest columns of X for which a column-major product stages (see the module's docstring).
STAGE_MIN_K = 4
#: Least share of scattered entries for which it stages: the layout is irregular.
MIN_SCATTERED_SHARE = 0.25
#: Entries per pass of the locality statistic (bounds its temporaries to about 300 MB).
STATISTIC_CHUNK = 1 << 22


def element_strides(a: Any) -> tuple[int, int]:
    """``a``'s strides in elements (the checks make them whole)."""
    return a.strides[0] // a.itemsize, a.strides[1] // a.itemsize


def csr_in(matrix: Any, dtype: np.dtype) -> Any:
    """The matrix's CSR (itself for a CSR; else built once and cached), with values in
    ``dtype`` (a cast copy of the values, cached, when the matrix's dtype differs)."""
    csr = matrix._semiring_csr()
    if csr.dtype == dtype:
        return csr
    key = f"spmm_csr_{dtype.str}"
    if key not in matrix._cache:
        matrix._cache[key] = csr.astype(dtype)
    return matrix._cache[key]


def device_spmm(matrix: Any, dtype: np.dtype, X: Any, Y: Any, alpha: Any, beta: Any, transpose: bool) -> Any:
    """Y = alpha * op(A) X + beta * Y on the GPU (X, Y CuPy arrays of ``dtype``): ELL and
    direct SELL layouts by their own kernels, everything else over a CSR."""
    if not transpose and matrix.dtype == dtype and Y.size:
        if matrix.format == "ell":
            m = matrix.shape[0]
            scatter = padded_statistic(matrix.indices, None, m)
            return padded_spmm_device((matrix.indices, matrix.data, NULL_POINTER, NULL_POINTER, np.int64(1),
                                       np.int64(matrix.width)), X, Y, alpha, beta, matrix._cache, scatter)
        if matrix.format == "sell" and matrix.mode == "direct":
            scatter = padded_statistic(matrix.indices, matrix.slice_ptr, matrix.C)
            return padded_spmm_device((matrix.indices, matrix.data, matrix.slice_ptr, matrix.perm,
                                       np.int64(matrix.C), np.int64(0)), X, Y, alpha, beta, matrix._cache, scatter)
    if matrix.format == "csc" and transpose and matrix.dtype == dtype:
        # A CSC's own arrays are A^T's CSR.
        return csr_spmm_device(matrix.indptr, matrix.indices, matrix.data, X, Y, alpha, beta, matrix._cache, "T")
    csr = csr_in(matrix, dtype)
    if not transpose:
        return csr_spmm_device(csr.indptr, csr.indices, csr.data, X, Y, alpha, beta, csr._cache, "")
    data, indices, indptr = csr._swapped_arrays()  # A^T's CSR, built once and cached
    return csr_spmm_device(indptr, indices, data, X, Y, alpha, beta, csr._cache, "T")


# --------------------------------------------------------------------------- shapes


def next_power_of_two(value: int) -> int:
    """The smallest power of two at least ``value`` (1 for values below 2)."""
    return 1 << max(0, int(value) - 1).bit_length()


def lanes_per_row(mean_length: float) -> int:
    """Lanes of the column-major CSR kernel per row: the smallest power of two at least a
    seventh of the mean row length, at most 32 (the SpMV kernel's rule, see
    sparsegpu/formats/_compressed.py ``threads_per_row``)."""
    return min(32, next_power_of_two(int(np.ceil(max(mean_length / 7.0, 1.0)))))


def row_shape(k: int, itemsize: int, vector: bool) -> tuple[int, int, int]:
    """(lanes per row G, chunks per lane, values per chunk VEC) of the row-major kernels for
    k columns: G * VEC covers k where it can, else 32 lanes of up to 4 chunks."""
    width = VECTOR_BYTES // itemsize if vector else 1
    chunks = -(-k // width)
    lanes = min(32, next_power_of_two(chunks))
    tiles = 1 if lanes < 32 else min(4, next_power_of_two(-(-chunks // 32)))
    return lanes, tiles, width


def can_vectorise(X: Any, Y: Any) -> bool:
    """Whether chunks of VEC columns of X and Y are aligned 16-byte vectors: unit column
    strides, row strides and k multiples of VEC, 16-byte aligned bases."""
    width = VECTOR_BYTES // X.itemsize
    if width < 2:
        return False
    (x_row, x_col), (y_row, y_col) = element_strides(X), element_strides(Y)
    k = X.shape[1]
    return (x_col == 1 and y_col == 1 and k % width == 0 and x_row % width == 0 and y_row % width == 0
            and X.data.ptr % VECTOR_BYTES == 0 and Y.data.ptr % VECTOR_BYTES == 0)


# --------------------------------------------------------------------------- long rows


@dataclass
class LongRows:
    """Rows longer than ``limit`` entries, cut into segments of at most ``limit``: segment s
    covers entries [begins[s], ends[s]) of long row ``rows[slot]``, whose segments are
    seg_first[slot] .. seg_first[slot + 1] - 1."""

    limit: int
    n_long: int = 0
    n_segments: int = 0
    rows: Any = None
    seg_first: Any = None
    begins: Any = None
    ends: Any = None


def long_rows(indptr: Any, limit: int, xp: Any) -> LongRows:
    """The long rows of a CSR and their segments (array operations of ``xp``, the module of
    ``indptr``: CuPy for the kernels)."""
    split = LongRows(limit)
    if indptr.size < 2:
        return split
    starts, stops = indptr[:-1], indptr[1:]
    rows = xp.flatnonzero(stops - starts > limit).astype(indptr.dtype)
    if rows.size == 0:
        return split
    counts = (stops[rows] - starts[rows] + (limit - 1)) // limit
    seg_first = xp.zeros(rows.size + 1, dtype=indptr.dtype)
    xp.cumsum(counts, out=seg_first[1:])
    n_segments = int(seg_first[-1])
    slot = expand_pointers(seg_first, xp)
    rank = xp.arange(n_segments, dtype=indptr.dtype) - seg_first[slot]
    begins = starts[rows][slot] + rank * limit
    ends = xp.minimum(begins + limit, stops[rows][slot])
    return LongRows(limit, int(rows.size), n_segments, rows, seg_first, begins, ends)


def cached_long_rows(cache: dict, key: str, indptr: Any, limit: int) -> LongRows:
    """:func:`long_rows`, computed once per layout and limit and kept in ``cache``."""
    name = f"spmm_long_rows{key}_{limit}"
    if name not in cache:
        import cupy

        cache[name] = long_rows(indptr, limit, cupy)
    return cache[name]


# --------------------------------------------------------------------------- CSR launches


def csr_spmm_device(indptr: Any, indices: Any, data: Any, X: Any, Y: Any, alpha: Any, beta: Any,
                    cache: dict, key: str) -> Any:
    """Y = alpha * A X + beta * Y over CSR arrays (GPU), by the kernel family of X's layout;
    long rows by segments (their split cached in ``cache`` under ``key``)."""
    m, k = Y.shape
    if m == 0 or k == 0:
        return Y
    if column_major(X):
        import cupy

        if stages(cache, f"spmm_scatter{key}", lambda: csr_scatter(indptr, indices, cupy), X, Y):
            return staged_spmm(lambda x, y, a, b: csr_spmm_device(indptr, indices, data, x, y, a, b, cache, key),
                               X, Y, alpha, beta)
        lanes = lanes_per_row(data.size / m)
        split = cached_long_rows(cache, key, indptr, LANE_SEGMENT * lanes)
        launch, kernels = column_launch(lanes), CSR_COLS
    else:
        split = cached_long_rows(cache, key, indptr, ROW_SEGMENT)
        launch, kernels = launch_rows, CSR_ROWS
    one, zero = Y.dtype.type(1), Y.dtype.type(0)
    launch((indptr, NULL_POINTER, indices, data), X, Y, alpha, beta, m, split.limit)
    if split.n_long:
        import cupy

        _validate.ensure_fits(split.n_segments * k * Y.itemsize, "the long rows' partial sums", "gpu")
        partials = cupy.empty((split.n_segments, k), Y.dtype)
        launch((split.begins, split.ends, indices, data), X, partials, one, zero, split.n_segments,
               np.iinfo(np.int64).max)
        finish = kernels.function("csr_spmm_finish<{V}, {I}>", Y.dtype, indptr.dtype)
        y_row, y_col = element_strides(Y)
        finish((split.n_long, -(-k // SPMM_BLOCK)), (SPMM_BLOCK,),
               (split.rows, split.seg_first, partials, np.int64(k), np.int64(1), Y, np.int64(y_row),
                np.int64(y_col), np.int64(k), alpha, beta))
    return Y


def launch_rows(arrays: tuple[Any, ...], X: Any, Y: Any, alpha: Any, beta: Any, n_rows: int, limit: int) -> None:
    """One launch of the row-major CSR kernel over ``n_rows`` rows (or segments)."""
    k = Y.shape[1]
    vector = can_vectorise(X, Y)
    lanes, tiles, _ = row_shape(k, X.itemsize, vector)
    kernel = CSR_ROWS.function(f"csr_spmm_rows<{{V}}, {{I}}, {lanes}, {tiles}, {str(vector).lower()}>",
                               Y.dtype, arrays[0].dtype)
    (x_row, x_col), (y_row, y_col) = element_strides(X), element_strides(Y)
    kernel((blocks_for(n_rows * lanes, SPMM_BLOCK),), (SPMM_BLOCK,),
           (*arrays, X, np.int64(x_row), np.int64(x_col), Y, np.int64(y_row), np.int64(y_col), np.int64(k),
            alpha, beta, np.int64(n_rows), np.int64(limit)))


def column_launch(lanes: int) -> Any:
    """The column-major CSR launch with ``lanes`` lanes per row, shaped as :func:`launch_rows`."""
    def launch(arrays: tuple[Any, ...], X: Any, Y: Any, alpha: Any, beta: Any, n_rows: int, limit: int) -> None:
        launch_column_tiles(CSR_COLS, f"csr_spmm_cols<{{{{V}}}}, {{{{I}}}}, {lanes}, {{tile}}>", lanes, arrays, X,
                            Y, alpha, beta, n_rows, limit)
    return launch


def launch_column_tiles(kernels: KernelFile, template: str, lanes: int, arrays: tuple[Any, ...], X: Any, Y: Any,
                        alpha: Any, beta: Any, n_rows: int, limit: int | None) -> None:
    """Launch a column-major kernel (``template``, with ``{tile}`` to fill) over tiles of
    columns along the grid's y dimension, in slabs of at most MAX_GRID_Y tiles (views of X and
    Y, no copies)."""
    k = Y.shape[1]
    tile = min(COLUMN_TILES[-1], next_power_of_two(k))
    kernel = kernels.function(template.format(tile=tile), Y.dtype, arrays[0].dtype)
    slab = MAX_GRID_Y * tile
    for first in range(0, k, slab):
        x, y = X[:, first:first + slab], Y[:, first:first + slab]
        (x_row, x_col), (y_row, y_col) = element_strides(x), element_strides(y)
        width = y.shape[1]
        tail = (np.int64(n_rows),) if limit is None else (np.int64(n_rows), np.int64(limit))
        kernel((blocks_for(n_rows * lanes, SPMM_BLOCK), -(-width // tile)), (SPMM_BLOCK,),
               (*arrays, x, np.int64(x_row), np.int64(x_col), y, np.int64(y_row), np.int64(y_col),
                np.int64(width), alpha, beta, *tail))


# --------------------------------------------------------------------------- ELL and SELL launches


def padded_spmm_device(layout: tuple[Any, ...], X: Any, Y: Any, alpha: Any, beta: Any, cache: dict,
                       scatter: Callable[[], Scatter]) -> Any:
    """Y = alpha * A X + beta * Y over an ELL or direct SELL layout (GPU): ``layout`` is the
    kernels' (indices, data, slice_ptr, perm, C, ELL width), null pointers where unused;
    ``scatter`` computes the layout's locality statistic (once, kept in ``cache``)."""
    m, k = Y.shape
    index_dtype = layout[0].dtype
    if column_major(X):
        if stages(cache, "spmm_scatter_padded", scatter, X, Y):
            return staged_spmm(lambda x, y, a, b: padded_spmm_device(layout, x, y, a, b, cache, scatter),
                               X, Y, alpha, beta)
        launch_column_tiles(PADDED_COLS, "padded_spmm_cols<{{V}}, {{I}}, {tile}>", 1, layout, X, Y, alpha, beta,
                            m, None)
        return Y
    vector = can_vectorise(X, Y)
    lanes, tiles, _ = row_shape(k, X.itemsize, vector)
    kernel = PADDED_ROWS.function(f"padded_spmm_rows<{{V}}, {{I}}, {lanes}, {tiles}, {str(vector).lower()}>",
                                  Y.dtype, index_dtype)
    (x_row, x_col), (y_row, y_col) = element_strides(X), element_strides(Y)
    kernel((blocks_for(m * lanes, SPMM_BLOCK),), (SPMM_BLOCK,),
           (*layout, X, np.int64(x_row), np.int64(x_col), Y, np.int64(y_row), np.int64(y_col), np.int64(k),
            alpha, beta, np.int64(m)))
    return Y


# --------------------------------------------------------------------------- staging a column-major X


def column_major(X: Any) -> bool:
    """Whether the ``*_cols`` kernels read ``X``: row stride 1, or a single row."""
    return element_strides(X)[0] == 1 or X.shape[0] <= 1


@dataclass(frozen=True)
class Scatter:
    """A layout's locality statistic: of its ``entries`` stored entries, ``scattered`` have a
    column farther than LOCAL_WINDOW from both neighbours' (see the module's docstring)."""

    entries: int = 0
    scattered: int = 0

    def __add__(self, other: Scatter) -> Scatter:
        return Scatter(self.entries + other.entries, self.scattered + other.scattered)


def count_scattered(indices: Any, slots: Any, along: Any, across: Any, xp: Any) -> Scatter:
    """The statistic over the stored entries at ``slots`` of ``indices`` (padding, columns below
    0, left out): ``along`` and ``across`` hold the slots of each one's neighbours, the previous
    entry of its row and the entry at its position in the previous row, -1 where there is none."""
    cols = indices[slots].astype(np.int64)
    near = xp.zeros(cols.shape, dtype=bool)
    for neighbour in (along, across):
        has = neighbour >= 0
        other = indices[xp.where(has, neighbour, 0)].astype(np.int64)
        near |= has & (other >= 0) & (xp.abs(cols - other) <= LOCAL_WINDOW)
    stored = cols >= 0
    return Scatter(int(stored.sum()), int((stored & ~near).sum()))


def csr_scatter(indptr: Any, indices: Any, xp: Any) -> Scatter:
    """The statistic of a CSR (``xp``: the module of its arrays), in passes of STATISTIC_CHUNK
    entries: row i's entry at position p has neighbours at p - 1 of row i and p of row i - 1."""
    total = Scatter()
    first, last = int(indptr[0]), int(indptr[-1])
    for start in range(first, last, STATISTIC_CHUNK):
        slots = xp.arange(start, min(start + STATISTIC_CHUNK, last), dtype=np.int64)
        rows = xp.searchsorted(indptr, slots.astype(indptr.dtype), side="right") - 1
        row_start = indptr[rows].astype(np.int64)
        position = slots - row_start
        previous_start = indptr[xp.maximum(rows - 1, 0)].astype(np.int64)  # row_start itself for row 0
        along = xp.where(position > 0, slots - 1, -1)
        across = xp.where(previous_start + position < row_start, previous_start + position, -1)
        total = total + count_scattered(indices, slots, along, across, xp)
    return total


def padded_scatter(indices: Any, slice_ptr: Any, C: int, xp: Any) -> Scatter:
    """The statistic of an ELL (``slice_ptr`` None, ``C`` its row count) or SELL layout: slot
    j * C + l of a slice, lane l, has neighbours at slot j - 1 of lane l and slot j of lane l - 1."""
    flat = indices.reshape(-1)
    if slice_ptr is None:
        slice_ptr = xp.asarray([0, flat.size], dtype=np.int64)
    total = Scatter()
    last = int(slice_ptr[-1])
    for start in range(0, last, STATISTIC_CHUNK):
        slots = xp.arange(start, min(start + STATISTIC_CHUNK, last), dtype=np.int64)
        offset = slots - slice_ptr[xp.searchsorted(slice_ptr, slots, side="right") - 1].astype(np.int64)
        along = xp.where(offset >= C, slots - C, -1)
        across = xp.where(offset % C > 0, slots - 1, -1)
        total = total + count_scattered(flat, slots, along, across, xp)
    return total


def padded_statistic(indices: Any, slice_ptr: Any, C: int) -> Callable[[], Scatter]:
    """:func:`padded_scatter` of a device layout, to compute when first needed."""
    def compute() -> Scatter:
        import cupy

        return padded_scatter(indices, slice_ptr, int(C), cupy)
    return compute


def stages_for(scatter: Scatter, n: int, m: int, k: int, itemsize: int) -> bool:
    """The rule: stage X (n x k, column-major) for an m-row product when k >= STAGE_MIN_K and
    at least MIN_SCATTERED_SHARE of the entries are scattered and the sector bytes their
    gathers waste per column exceed staging's per column."""
    return (k >= STAGE_MIN_K and n > 1 and scatter.scattered >= MIN_SCATTERED_SHARE * scatter.entries > 0
            and scatter.scattered * (SECTOR_BYTES - itemsize) > 2 * (n + m) * itemsize)


def stages(cache: dict, name: str, compute: Callable[[], Scatter], X: Any, Y: Any) -> bool:
    """:func:`stages_for` X and Y, the layout's statistic computed by ``compute`` once (kept in
    ``cache`` under ``name``; never for fewer than STAGE_MIN_K columns), and the scratch fits in
    free device memory."""
    n, k = X.shape
    if k < STAGE_MIN_K or n <= 1:
        return False
    if name not in cache:
        cache[name] = compute()
    if not stages_for(cache[name], n, Y.shape[0], k, Y.itemsize):
        return False
    rows = n + (0 if element_strides(Y)[1] == 1 else Y.shape[0])
    try:
        _validate.ensure_fits(rows * k * Y.itemsize, "the staging scratch", "gpu")
    except ValueError:
        return False  # no room to stage: the column-major kernels need none
    return True


def staged_spmm(product: Callable[[Any, Any, Any, Any], Any], X: Any, Y: Any, alpha: Any, beta: Any) -> Any:
    """Y = alpha * A X + beta * Y by ``product`` (x, y, alpha, beta) over a row-major copy of
    X, into Y itself when its column stride is 1, else into a row-major scratch copied back."""
    import cupy

    dtype = Y.dtype
    one, zero = dtype.type(1), dtype.type(0)
    rows_x = cupy.empty(X.shape, dtype)
    copy_layout(X, rows_x, one, zero)
    if element_strides(Y)[1] == 1:
        product(rows_x, Y, alpha, beta)
        return Y
    rows_y = cupy.empty(Y.shape, dtype)
    product(rows_x, rows_y, one, zero)
    copy_layout(rows_y, Y, alpha, beta)
    return Y


def copy_layout(src: Any, dst: Any, alpha: Any, beta: Any) -> None:
    """dst = alpha * src + beta * dst (same shape, any strides; dst not read when beta is zero)
    by ``dense_transpose``, whose reads walk src's contiguous axis and whose writes walk dst's."""
    (s0, s1), (d0, d1) = element_strides(src), element_strides(dst)
    rows, cols = src.shape
    if abs(s0) > abs(s1):  # src contiguous along its columns: the kernel's r is the column
        rows, cols, s0, s1, d0, d1 = cols, rows, s1, s0, d1, d0
    tiles = -(-rows // TRANSPOSE_TILE) * -(-cols // TRANSPOSE_TILE)
    if tiles == 0:
        return
    kernel = TRANSPOSE.function("dense_transpose<{V}>", dst.dtype)
    kernel((tiles,), (TRANSPOSE_THREADS,), (src, np.int64(s0), np.int64(s1), dst, np.int64(d0), np.int64(d1),
                                           np.int64(rows), np.int64(cols), alpha, beta))
