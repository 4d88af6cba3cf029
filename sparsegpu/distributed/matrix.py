"""DistributedCSR: a sparse matrix whose rows are split over the ranks of a communicator.

Each rank holds a contiguous range of rows (balanced by nonzeros) and plans, once, the halo
exchange its product needs. ``A @ x`` is bitwise equal to the single-process CSR product of
the same matrix on the same backend: see ``_extended.py`` for the rule that makes it so.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate
from sparsegpu._backend import array_module, is_device_array, resolve_backend, to_backend
from sparsegpu.distributed import _construct, mmio
from sparsegpu.distributed._comm import raise_collectively
from sparsegpu.distributed._exchange import MpiExchanger
from sparsegpu.distributed._extended import ExtendedProduct
from sparsegpu.distributed._halo import extended_columns, plan_halo
from sparsegpu.distributed._nccl import NcclExchanger, nccl_available
from sparsegpu.distributed.partition import Partition
from sparsegpu.distributed.vector import DistributedVector
from sparsegpu.formats import CSR

EXCHANGES = ("auto", "mpi", "nccl")


class DistributedCSR:
    """Rows of a sparse matrix split over the ranks of an MPI communicator, one GPU (or one
    CPU process) per rank.

    Build one with :meth:`from_scipy` (a root rank holds the matrix), :meth:`from_local_rows`
    (every rank brings its own rows) or :meth:`from_matrix_market` (every rank reads its own
    rows of a file). The constructor itself takes this rank's rows and both partitions; all
    constructors are collective (every rank calls them, in the same order).

    Parameters
    ----------
    rows : scipy sparse matrix
        This rank's rows (``row_partition.local_size`` of them) with global column indices
        (``col_partition.n`` columns).
    row_partition, col_partition : Partition
        How rows, and the entries of ``x``, are split. A square matrix uses one partition for
        both; a rectangular one splits x by a partition of its own.
    backend : {"cpu", "gpu"}, optional
        Where this rank's arrays live (default :func:`sparsegpu.backend`).
    overlap : bool, optional
        Split the rank's rows into interior rows (no halo entry), multiplied while the halo is
        in flight, and boundary rows, multiplied after it arrives. Default: on for the GPU
        backend, off for the CPU. The result is the same bits either way.
    exchange : {"auto", "mpi", "nccl"}, optional
        How halo entries travel: NCCL between GPUs ("auto" picks it on the GPU backend when
        CuPy's NCCL is importable), else mpi4py with host buffers.

    Raises
    ------
    TypeError
        ``rows`` not a scipy sparse matrix; partitions not Partition objects.
    ValueError
        Shapes that disagree with the partitions; partitions over different communicators.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.distributed import DistributedCSR, world
    >>> comm = world()
    >>> S = sp.random(60, 60, density=0.1, random_state=0, format="csr") if comm.Get_rank() == 0 else None
    >>> A = DistributedCSR.from_scipy(S, comm, backend="cpu")
    >>> y = A @ np.ones(60)                  # a DistributedVector
    >>> full = y.gather()                    # the whole product on rank 0, None elsewhere
    >>> comm.Get_rank() != 0 or bool(np.array_equal(full, S @ np.ones(60)))
    True
    """

    def __init__(self, rows: Any, row_partition: Partition, col_partition: Partition, *,
                 backend: str | None = None, overlap: bool | None = None, exchange: str = "auto") -> None:
        if not isinstance(row_partition, Partition) or not isinstance(col_partition, Partition):
            raise TypeError("row_partition and col_partition must be sparsegpu.distributed.Partition objects")
        if row_partition.comm is not col_partition.comm:
            raise ValueError("row_partition and col_partition must share one communicator")
        if exchange not in EXCHANGES:
            raise ValueError(f"exchange must be one of {EXCHANGES}, got {exchange!r}")
        comm = row_partition.comm
        self._backend = resolve_backend(backend)
        local, error = None, None
        try:
            local = _construct.canonical_rows(rows, row_partition.local_size, col_partition.n)
        except (TypeError, ValueError) as caught:
            error = caught
        raise_collectively(comm, error)
        dtypes = comm.allgather(local.dtype)
        if len(set(dtypes)) > 1:
            raise ValueError(f"the ranks' rows have different dtypes {sorted(set(map(str, dtypes)))}; cast them alike")
        self.row_partition, self.col_partition = row_partition, col_partition
        self._dtype = local.dtype
        self._nnz = int(sum(comm.allgather(int(local.nnz))))
        self.halo_plan = plan_halo(local.indices.astype(np.int64), col_partition)
        columns = extended_columns(local.indices.astype(np.int64), col_partition, self.halo_plan)
        extended = sp.csr_array((local.data, columns, local.indptr),
                                shape=(local.shape[0], col_partition.local_size + self.halo_plan.halo_columns.size))
        mean_row = self._nnz / row_partition.n if row_partition.n else 0.0
        split = self._backend == "gpu" if overlap is None else _validate.check_bool("overlap", overlap)
        self._product = ExtendedProduct(extended, col_partition.local_size, self.halo_plan.halo_columns.size,
                                        self._backend, mean_row, split)
        self._exchanger = self._make_exchanger(exchange)
        self._blocks: dict[str, CSR] = {}
        self._accepted: dict[str, tuple | None] = {"x": None, "out": None}  # see _checked_x

    def _make_exchanger(self, exchange: str) -> Any:
        comm = self.row_partition.comm
        use_nccl = exchange == "nccl" or (exchange == "auto" and self._backend == "gpu" and nccl_available())
        layout = {"n_own": self.col_partition.local_size, "gathered": self._product.gathered, "lead": self._product.lead}
        if use_nccl:
            if self._backend != "gpu":
                raise ValueError("exchange='nccl' needs the GPU backend")
            return NcclExchanger(self.halo_plan, comm, self._dtype, **layout)
        return MpiExchanger(self.halo_plan, comm, self._dtype, self._backend, **layout)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_scipy(cls, S: Any, comm: Any = None, root: int = 0, *, backend: str | None = None,
                   reorder: bool = False, dtype: Any = None, **options: Any) -> DistributedCSR:
        """Scatter a matrix held on ``root`` (other ranks pass None; collective).

        Parameters
        ----------
        S : scipy sparse matrix or None
            The whole matrix on ``root``; ignored elsewhere.
        comm : communicator, optional
            Default :func:`sparsegpu.distributed.world`.
        root : int, optional
            The rank holding ``S`` (default 0).
        backend : {"cpu", "gpu"}, optional
        reorder : bool, optional
            Renumber rows and columns by reverse Cuthill-McKee
            (:func:`sparsegpu.csgraph.reverse_cuthill_mckee`, on the structure of A + A^T)
            before partitioning, so fewer entries cross ranks. Square matrices only. The
            permutation is kept as :attr:`permutation` and applied to vectors transparently:
            global arrays go in and come out (``gather``) in the original order. The product
            is then bitwise equal to the single-process product of the reordered matrix.
        dtype : dtype, optional
            As in :func:`sparsegpu.from_scipy`.
        **options
            ``overlap`` and ``exchange``, as in the class.

        Returns
        -------
        DistributedCSR

        Raises
        ------
        TypeError, ValueError
            On every rank, when ``S`` on the root is not a valid sparse matrix (or not square
            with ``reorder``).

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp
        >>> from sparsegpu.distributed import DistributedCSR, world
        >>> S = sp.random(30, 30, density=0.2, random_state=2, format="csr")
        >>> A = DistributedCSR.from_scipy(S, world(), backend="cpu", reorder=True)
        >>> A.shape, A.nnz == S.nnz, A.permutation is not None
        ((30, 30), True, True)
        """
        comm = _construct.check_comm(comm)
        reorder = _validate.check_bool("reorder", reorder)
        rows, offsets, shape, permutation = _construct.scatter_rows(S, comm, root, reorder, dtype)
        return cls._assemble(rows, offsets, shape, permutation, comm, backend, options)

    @classmethod
    def from_local_rows(cls, local_csr: Any, row_offset: int, comm: Any = None, *, shape: Any = None,
                        backend: str | None = None, dtype: Any = None, **options: Any) -> DistributedCSR:
        """Build from each rank's own rows, for matrices no single host holds (collective).

        Parameters
        ----------
        local_csr : scipy sparse matrix or sparsegpu matrix
            This rank's rows, with global column indices. Ranks hold consecutive row ranges
            in rank order (rank 0 the first rows); a rank may hold none.
        row_offset : int
            The global index of this rank's first row.
        comm : communicator, optional
        shape : (int, int), optional
            Default: (total rows, the widest rank's columns).
        backend : {"cpu", "gpu"}, optional
        dtype : dtype, optional
            Default: the common dtype of every rank's values.
        **options
            ``overlap`` and ``exchange``, as in the class.

        Returns
        -------
        DistributedCSR

        Raises
        ------
        TypeError, ValueError
            On every rank, when any rank's rows are not a sparse matrix or the row ranges do
            not follow one another from 0.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp
        >>> from sparsegpu.distributed import DistributedCSR, world
        >>> comm = world()
        >>> rank, size = comm.Get_rank(), comm.Get_size()
        >>> mine = sp.eye(10, format="csr")[rank * 10 // size:(rank + 1) * 10 // size]
        >>> A = DistributedCSR.from_local_rows(mine, rank * 10 // size, comm, backend="cpu")
        >>> A.shape, float((A @ np.arange(10.0)).sum())
        ((10, 10), 45.0)
        """
        comm = _construct.check_comm(comm)
        rows, offsets, shape = _construct.gather_local_rows(local_csr, row_offset, comm, shape, dtype)
        return cls._assemble(rows, offsets, shape, None, comm, backend, options)

    @classmethod
    def from_matrix_market(cls, path: Any, comm: Any = None, *, backend: str | None = None, dtype: Any = None,
                           row_offsets: Any = None, **options: Any) -> DistributedCSR:
        """Each rank reads its own rows of a Matrix Market file (``.mtx`` or gzipped; collective).

        Every rank streams the file's coordinate lines and keeps only its rows (symmetric,
        skew-symmetric and Hermitian storage expanded), so no rank ever holds the whole
        matrix. Without ``row_offsets`` a first pass counts each row's entries to balance the
        partition by nonzeros.

        Parameters
        ----------
        path : str or Path
            A coordinate Matrix Market file (real, integer, complex or pattern).
        comm : communicator, optional
        backend : {"cpu", "gpu"}, optional
        dtype : dtype, optional
        row_offsets : array_like of int, optional
            The row partition (length ranks + 1); skips the counting pass.
        **options
            ``overlap`` and ``exchange``, as in the class.

        Returns
        -------
        DistributedCSR
            The same entries as ``scipy.io.mmread(path)`` converted to CSR.

        Raises
        ------
        ValueError
            Not a coordinate Matrix Market file; a malformed header or entry.

        Examples
        --------
        >>> import io, tempfile, os, numpy as np, scipy.io, scipy.sparse as sp
        >>> from sparsegpu.distributed import DistributedCSR, world
        >>> path = os.path.join(tempfile.mkdtemp(), "a.mtx")
        >>> scipy.io.mmwrite(path, sp.random(20, 20, density=0.2, random_state=3))
        >>> A = DistributedCSR.from_matrix_market(path, world(), backend="cpu")
        >>> A.shape, A.nnz == scipy.io.mmread(path).nnz
        ((20, 20), True)
        """
        comm = _construct.check_comm(comm)
        rows, offsets, shape = mmio.read_rows(path, comm, row_offsets, dtype)
        return cls._assemble(rows, offsets, shape, None, comm, backend, options)

    @classmethod
    def _assemble(cls, rows: Any, offsets: np.ndarray, shape: tuple[int, int], permutation: Any, comm: Any,
                  backend: str | None, options: dict[str, Any]) -> DistributedCSR:
        unknown = sorted(set(options) - {"overlap", "exchange"})
        if unknown:
            raise TypeError(f"unexpected keyword arguments {unknown}; options are overlap and exchange")
        row_partition = Partition(offsets, comm, permutation)
        col_partition = row_partition if shape[0] == shape[1] else Partition(
            _construct.even_offsets(shape[1], comm.Get_size()), comm)
        return cls(rows, row_partition, col_partition, backend=backend, **options)

    # ------------------------------------------------------------------ properties
    @property
    def shape(self) -> tuple[int, int]:
        return (self.row_partition.n, self.col_partition.n)

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def nnz(self) -> int:
        """Stored entries over all ranks."""
        return self._nnz

    @property
    def backend(self) -> str:
        return self._backend

    @property
    def comm(self) -> Any:
        return self.row_partition.comm

    @property
    def permutation(self) -> np.ndarray | None:
        """``permutation[k]``: the original row (and column) stored at position k, or None."""
        return self.row_partition.permutation

    @property
    def local_nnz(self) -> int:
        return self._product.matrix.nnz

    @property
    def extended(self) -> CSR:
        """This rank's rows as one CSR over ``[my x | halo x]`` (what ``A @ x`` runs)."""
        return self._product.matrix

    @property
    def local_block(self) -> CSR:
        """This rank's rows restricted to its own columns, renumbered from 0 (square, for a
        square matrix: what a block-Jacobi preconditioner factors)."""
        return self._block("local")

    @property
    def halo_block(self) -> CSR:
        """This rank's rows restricted to other ranks' columns, numbered as the halo vector
        (increasing global column)."""
        return self._block("halo")

    def _block(self, which: str) -> CSR:
        if which not in self._blocks:
            S = self._product.matrix.to_scipy()
            n_own = self._product.n_own
            S = S[:, :n_own] if which == "local" else S[:, n_own:]
            self._blocks[which] = CSR.from_scipy(sp.csr_array(S), backend=self._backend)
        return self._blocks[which]

    def diagonal(self) -> DistributedVector:
        """The main diagonal, split as the rows are (square matrices; missing entries are 0).

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp
        >>> from sparsegpu.distributed import DistributedCSR, world
        >>> A = DistributedCSR.from_scipy(sp.diags([1.0, 2.0, 3.0]), world(), backend="cpu")
        >>> A.diagonal().allgather().tolist()
        [1.0, 2.0, 3.0]
        """
        if self.shape[0] != self.shape[1]:
            raise ValueError(f"diagonal() needs a square matrix, got shape {self.shape}")
        diagonal = self.local_block.to_scipy().diagonal()
        return DistributedVector(to_backend(np.ascontiguousarray(diagonal), self._backend), self.row_partition)

    # ------------------------------------------------------------------ products
    def matvec(self, x: Any, out: DistributedVector | None = None) -> DistributedVector:
        """``A @ x`` (collective). On the GPU the call only queues work on the current stream:
        it allocates nothing but the result (nothing with ``out``), reads nothing back and
        waits for nothing on the host.

        Parameters
        ----------
        x : DistributedVector or ndarray
            A vector split by :attr:`col_partition`, or a global 1-D array of length
            ``shape[1]`` present on every rank (split here).
        out : DistributedVector, optional
            Written in place and returned: split by :attr:`row_partition`, exactly the
            matrix's dtype, contiguous, on the matrix's backend, sharing no memory with ``x``.

        Returns
        -------
        DistributedVector
            ``out``, or a new vector split by :attr:`row_partition`, of the matrix's dtype, on
            the matrix's backend.

        Raises
        ------
        ValueError
            ``x`` of the wrong length or split by another partition; ``out`` split by another
            partition, not contiguous or overlapping ``x``.
        TypeError
            ``x`` of a dtype that does not cast safely to the matrix's; ``out`` not a
            DistributedVector, of another dtype or on another backend.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp
        >>> from sparsegpu.distributed import DistributedCSR, DistributedVector, world
        >>> A = DistributedCSR.from_scipy(sp.diags([2.0, 3.0]), world(), backend="cpu")
        >>> y = DistributedVector.zeros(A.row_partition, backend="cpu")
        >>> A.matvec(np.ones(2), out=y) is y, y.allgather().tolist()
        (True, [2.0, 3.0])
        """
        x_local = self._checked_x(x)
        if out is None:
            y = array_module(self._backend).empty(self.row_partition.local_size, dtype=self._dtype)
            return DistributedVector(self._product.multiply(x_local, self._exchanger, y), self.row_partition)
        self._product.multiply(x_local, self._exchanger, self._checked_out(out, x_local))
        return out

    # A call checks x and out in full the first time; after that, an array of the last accepted
    # signature (array type, dtype, shape, strides) is accepted as it is, since those are all
    # the checks read. What depends on the data (the partition, overlap of out with x) is
    # checked every call.
    def _checked_x(self, x: Any) -> Any:
        """This rank's x, of the matrix's dtype, contiguous, on its backend."""
        if type(x) is DistributedVector:
            if not x.partition.same_as(self.col_partition):
                raise ValueError("x is split by a different partition than the matrix's columns")
            local = x.local
            if _signature(local) == self._accepted["x"]:
                return local
        elif isinstance(x, DistributedVector):
            if not x.partition.same_as(self.col_partition):
                raise ValueError("x is split by a different partition than the matrix's columns")
            local = x.local
        else:
            if not hasattr(x, "dtype"):
                x = np.asarray(x)
            if x.ndim != 1 or x.shape[0] != self.shape[1]:
                raise ValueError(f"x must be 1-D of length {self.shape[1]}, got shape {tuple(x.shape)}")
            local = self.col_partition.local_slice(x)
        x_local = _validate.check_vector(local, self.col_partition.local_size, self._dtype)
        if self._backend == "cpu" and is_device_array(x_local):
            raise TypeError("this matrix lives on the CPU backend but x is a CuPy array; pass a NumPy x")
        x_local = array_module(self._backend).ascontiguousarray(to_backend(x_local, self._backend))
        if _signature(x_local) == _signature(local) and x_local.dtype == self._dtype:
            self._accepted["x"] = _signature(local)  # used as it came: no cast, copy or upload
        return x_local

    def _checked_out(self, out: Any, x_local: Any) -> Any:
        """``out.local``, checked: see :meth:`matvec`."""
        if not isinstance(out, DistributedVector):
            raise TypeError(f"out must be a DistributedVector, got {type(out).__name__}")
        if not out.partition.same_as(self.row_partition):
            raise ValueError("out is split by a different partition than the matrix's rows")
        y = out.local
        if _signature(y) != self._accepted["out"]:
            if y.dtype != self._dtype:
                raise TypeError(f"out has dtype {y.dtype}; it is written in place, so it must be {self._dtype}")
            if is_device_array(y) != (self._backend == "gpu"):
                raise TypeError(f"out must live on the matrix's backend ({self._backend})")
            if y.ndim != 1 or y.shape[0] != self.row_partition.local_size:
                raise ValueError(f"out must be 1-D of length {self.row_partition.local_size}, got {tuple(y.shape)}")
            if not y.flags.c_contiguous:
                raise ValueError("out must be contiguous")
            self._accepted["out"] = _signature(y)
        if _validate.overlaps(y, x_local):
            raise ValueError("out must not share memory with x")
        return y

    def __matmul__(self, x: Any) -> DistributedVector:
        return self.matvec(x)

    def transpose(self, *, pattern: bool = False) -> DistributedCSR:
        """A^T, its rows split as A's columns are (collective: every entry goes to the rank
        owning its column); with ``pattern``, every stored entry becomes 1 (float64).

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp
        >>> from sparsegpu.distributed import DistributedCSR, world
        >>> S = sp.random(30, 20, density=0.2, random_state=4, format="csr")
        >>> T = DistributedCSR.from_scipy(S, world(), backend="cpu").transpose()
        >>> T.shape, bool(np.array_equal((T @ np.ones(30)).allgather(), S.T @ np.ones(30)))
        ((20, 30), True)
        """
        if self.permutation is not None:
            raise ValueError("transpose() of a reordered matrix is not supported; build it with reorder=False")
        rows = self._product.matrix.to_scipy()
        columns = _construct.global_columns(rows, self.halo_plan.halo_columns, self.col_partition)
        heads = np.repeat(np.arange(rows.shape[0], dtype=np.int64), np.diff(rows.indptr)) + self.row_partition.start
        owner = self.col_partition.owners(columns)
        order = np.argsort(owner, kind="stable")
        counts = np.bincount(owner, minlength=self.row_partition.size)
        cuts = np.concatenate([[0], np.cumsum(counts)])
        outgoing = [(columns[order[a:b]], heads[order[a:b]], rows.data[order[a:b]]) for a, b in zip(cuts, cuts[1:])]
        incoming = self.comm.alltoall(outgoing)  # from every rank, in rank order
        start, local = self.col_partition.start, self.col_partition.local_size
        cols, heads_in, values = (np.concatenate([piece[k] for piece in incoming]) for k in range(3))
        dtype = np.float64 if _validate.check_bool("pattern", pattern) else self._dtype
        values = np.ones(values.size) if pattern else values.astype(dtype)
        mine = sp.csr_array((values, (cols - start, heads_in)), shape=(local, self.shape[0]))
        mine.sum_duplicates()  # none: sorts each row's columns
        return DistributedCSR.from_local_rows(mine, start, self.comm, shape=(self.shape[1], self.shape[0]),
                                              backend=self._backend, dtype=dtype)

    def to_scipy(self, root: int = 0) -> sp.csr_array | None:
        """The whole matrix (in the stored, possibly reordered, numbering) on ``root`` as a
        scipy ``csr_array``, None elsewhere (collective)."""
        return _construct.gather_rows(self._product.matrix.to_scipy(), self.halo_plan.halo_columns,
                                      self.col_partition, self.row_partition, root)

    def __repr__(self) -> str:
        return (f"DistributedCSR(shape={self.shape}, nnz={self.nnz}, dtype={self.dtype}, "
                f"ranks={self.row_partition.size}, backend={self._backend})")


def _signature(a: Any) -> tuple:
    """What the checks of an x or an out read: array type, dtype, shape and strides."""
    return (type(a), a.dtype, a.shape, a.strides)

