"""DistributedVector: a vector split over the ranks of a communicator by a :class:`Partition`.

What the Krylov solvers need, in SciPy's shapes: ``dot``, ``norm``, ``axpy``, ``copy`` and
elementwise arithmetic. Elementwise work is rank-local. A dot product is the one place where
ranks combine numbers: each rank computes its partial with the library's deterministic dot
(float64 accumulation, :func:`sparsegpu.primitives.vector_dot`), the partials are gathered on
every rank and added in rank order, never with MPI_SUM (whose association is unspecified). So
a dot gives the same bits on every rank and every run; it differs from the one-process dot in
the last bits, as any regrouping of a sum does.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from sparsegpu._backend import array_module, backend_of, resolve_backend, to_backend, to_host
from sparsegpu.distributed._comm import ordered_sum
from sparsegpu.distributed.partition import Partition
from sparsegpu.primitives import vector_dot


def dots(pairs: list[tuple[DistributedVector, DistributedVector]]) -> list[Any]:
    """``a.dot(b)`` for each pair ``(a, b)``, with one exchange between ranks (and, for real
    vectors on the GPU, one read back) for all of them: each value has the bits of its own
    ``a.dot(b)`` (collective).

    Parameters
    ----------
    pairs : list of (DistributedVector, DistributedVector)
        Vectors of one partition each; every pair over the same communicator.

    Returns
    -------
    list
        float64 (complex128 for complex vectors) values, the same on every rank.

    Raises
    ------
    TypeError, ValueError
        As :meth:`DistributedVector.dot`.

    Examples
    --------
    >>> import numpy as np
    >>> from sparsegpu.distributed import DistributedVector, Partition, world
    >>> v = DistributedVector.from_global(np.array([1.0, 2.0]), Partition([0, 2], world()))
    >>> [float(d) for d in dots([(v, v), (v, 2 * v)])]
    [5.0, 10.0]
    """
    first = pairs[0][0]
    for a, b in pairs:
        a._check_vector(b)
        if a.comm is not first.comm:
            raise ValueError("the pairs' vectors live on different communicators")
    everyone = first.comm.allgather(first._partials(pairs))
    return [ordered_sum([partials[k] for partials in everyone]) for k in range(len(pairs))]


def _partial_dot(a: Any, b: Any) -> Any:
    """sum(conj(a) * b) of this rank's slices, in float64 (complex128), on the host."""
    if a.dtype.kind == "c" or b.dtype.kind == "c":
        return complex(to_host(array_module(backend_of(a)).vdot(a, b)))
    return np.float64(np.dot(to_host(a).astype(np.float64), to_host(b).astype(np.float64)))


class DistributedVector:
    """This rank's slice of a vector, with the partition that says where the rest lives.

    Parameters
    ----------
    local : ndarray
        1-D NumPy (CPU backend) or CuPy (GPU backend) array of ``partition.local_size``
        entries, used as it is (not copied).
    partition : Partition
        How the whole vector is split over the ranks.

    Raises
    ------
    TypeError
        ``partition`` is not a Partition; ``local`` is not an array.
    ValueError
        ``local`` is not 1-D of the partition's local size.

    Examples
    --------
    >>> import numpy as np
    >>> from sparsegpu.distributed import DistributedVector, Partition, world
    >>> p = Partition([0, 4], world())
    >>> v = DistributedVector.from_global(np.arange(4.0), p)
    >>> float(v.dot(v)), float(v.norm() ** 2), (2 * v + v).gather().tolist()
    (14.0, 14.0, [0.0, 3.0, 6.0, 9.0])
    """

    __array_priority__ = 20  # ndarray * DistributedVector defers to __rmul__

    def __init__(self, local: Any, partition: Partition) -> None:
        if not isinstance(partition, Partition):
            raise TypeError(f"partition must be a sparsegpu.distributed.Partition, got {type(partition).__name__}")
        if not hasattr(local, "dtype") or not hasattr(local, "ndim"):
            raise TypeError(f"local must be a NumPy or CuPy array, got {type(local).__name__}")
        if local.ndim != 1 or local.shape[0] != partition.local_size:
            raise ValueError(f"local must be 1-D of length {partition.local_size} on rank {partition.rank}, "
                             f"got shape {tuple(local.shape)}")
        self.local = local
        self.partition = partition
        self._cache: dict[str, Any] = {}  # the GPU dot's reduction scratch

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_global(cls, x: Any, partition: Partition, *, backend: str | None = None) -> DistributedVector:
        """This rank's slice of a global array ``x`` present on every rank (copied).

        Parameters
        ----------
        x : array_like
            1-D, length ``partition.n``, in the original order (a partition's permutation is
            applied here).
        partition : Partition
        backend : {"cpu", "gpu"}, optional
            Where the slice lives (default: CuPy input stays on the GPU, NumPy input goes to
            the active backend).

        Returns
        -------
        DistributedVector

        Raises
        ------
        ValueError
            ``x`` is not 1-D of length ``partition.n``.

        Examples
        --------
        >>> import numpy as np
        >>> from sparsegpu.distributed import DistributedVector, Partition, world
        >>> DistributedVector.from_global(np.ones(3), Partition([0, 3], world())).local.tolist()
        [1.0, 1.0, 1.0]
        """
        if not hasattr(x, "dtype"):
            x = np.asarray(x)
        if x.ndim != 1 or x.shape[0] != partition.n:
            raise ValueError(f"x must be 1-D of length {partition.n}, got shape {tuple(x.shape)}")
        target = backend_of(x) if backend is None and backend_of(x) == "gpu" else resolve_backend(backend)
        return cls(to_backend(partition.local_slice(x), target).copy(), partition)

    @classmethod
    def scatter(cls, x: Any, partition: Partition, root: int = 0, *, backend: str | None = None) -> DistributedVector:
        """Split a global array held on ``root`` only (other ranks pass None; collective).

        Examples
        --------
        >>> import numpy as np
        >>> from sparsegpu.distributed import DistributedVector, Partition, world
        >>> DistributedVector.scatter(np.arange(3.0), Partition([0, 3], world())).local.tolist()
        [0.0, 1.0, 2.0]
        """
        comm = partition.comm
        pieces = None
        if partition.rank == root:
            host = np.asarray(to_host(x))
            if host.ndim != 1 or host.shape[0] != partition.n:
                pieces = [ValueError(f"x must be 1-D of length {partition.n}, got shape {host.shape}")] * partition.size
            else:
                ordered = host if partition.permutation is None else host[partition.permutation]
                pieces = [ordered[partition.offsets[r]:partition.offsets[r + 1]] for r in range(partition.size)]
        piece = comm.scatter(pieces, root=root)
        if isinstance(piece, Exception):
            raise piece
        return cls(to_backend(np.array(piece, copy=True), resolve_backend(backend)), partition)

    @classmethod
    def zeros(cls, partition: Partition, dtype: Any = np.float64, *, backend: str | None = None) -> DistributedVector:
        """A vector of zeros split by ``partition``."""
        return cls(array_module(resolve_backend(backend)).zeros(partition.local_size, dtype=dtype), partition)

    # ------------------------------------------------------------------ properties
    @property
    def shape(self) -> tuple[int]:
        return (self.partition.n,)

    @property
    def size(self) -> int:
        return self.partition.n

    @property
    def ndim(self) -> int:
        return 1

    @property
    def dtype(self) -> np.dtype:
        return self.local.dtype

    @property
    def backend(self) -> str:
        return backend_of(self.local)

    @property
    def comm(self) -> Any:
        return self.partition.comm

    # ------------------------------------------------------------------ reductions (collective)
    def dot(self, other: DistributedVector) -> Any:
        """``sum(conj(self) * other)`` over the whole vector, the same bits on every rank
        (collective; float64, or complex128 for complex vectors).

        Examples
        --------
        >>> import numpy as np
        >>> from sparsegpu.distributed import DistributedVector, Partition, world
        >>> v = DistributedVector.from_global(np.array([1.0, 2.0]), Partition([0, 2], world()))
        >>> float(v.dot(v))
        5.0
        """
        return dots([(self, other)])[0]

    def _partials(self, pairs: list[tuple[DistributedVector, DistributedVector]]) -> list[Any]:
        """This rank's partial dot of each pair. Real pairs of one float dtype reduce on their
        backend into one float64 buffer kept in this vector's cache, read back once."""
        if not all(a.dtype == b.dtype and a.dtype in (np.float32, np.float64) for a, b in pairs):
            return [_partial_dot(a.local, b.local) for a, b in pairs]
        out = self._cache.get("dots")
        if out is None or out.size < len(pairs):
            out = self._cache["dots"] = array_module(self.backend).zeros(len(pairs), dtype=np.float64)
            self._cache["dot_slots"] = [out[k:k + 1] for k in range(len(pairs))]  # views made once
        slots = self._cache["dot_slots"]
        for k, (a, b) in enumerate(pairs):
            vector_dot(a.local, b.local, slots[k], self._cache)
        return [np.float64(value) for value in to_host(out)[:len(pairs)]]

    def norm(self, ord: Any = None) -> np.float64:
        """The 2-norm (``ord=None`` or 2) or the max-norm (``ord=np.inf``) of the whole vector
        (collective; the same bits on every rank).

        Examples
        --------
        >>> import numpy as np
        >>> from sparsegpu.distributed import DistributedVector, Partition, world
        >>> v = DistributedVector.from_global(np.array([3.0, -4.0]), Partition([0, 2], world()))
        >>> float(v.norm()), float(v.norm(np.inf))
        (5.0, 4.0)
        """
        if ord is None or ord == 2:
            return np.float64(np.sqrt(np.real(self.dot(self))))
        if ord == np.inf:
            local = float(to_host(abs(self.local).max())) if self.local.size else 0.0
            return np.float64(max(self.comm.allgather(local)))
        raise ValueError(f"ord must be None, 2 or numpy.inf, got {ord!r}")

    def sum(self) -> Any:
        """The sum of all entries, partials added in rank order (collective)."""
        local = to_host(self.local.sum(dtype=np.complex128 if self.dtype.kind == "c" else np.float64))
        return ordered_sum(self.comm.allgather(local[()]))

    # ------------------------------------------------------------------ in-place updates
    def axpy(self, alpha: Any, x: DistributedVector) -> DistributedVector:
        """``self += alpha * x`` in place; returns ``self``."""
        x = self._check_vector(x)
        self.local += alpha * x.local
        return self

    def scale(self, alpha: Any) -> DistributedVector:
        """``self *= alpha`` in place; returns ``self``."""
        self.local *= alpha
        return self

    def fill(self, value: Any) -> DistributedVector:
        self.local.fill(value)
        return self

    def copy(self) -> DistributedVector:
        """A vector with its own copy of this rank's slice (the partition is shared)."""
        return DistributedVector(self.local.copy(), self.partition)

    def zeros_like(self) -> DistributedVector:
        return DistributedVector(array_module(self.backend).zeros_like(self.local), self.partition)

    def astype(self, dtype: Any) -> DistributedVector:
        return DistributedVector(self.local.astype(dtype), self.partition)

    # ------------------------------------------------------------------ gathering
    def gather(self, root: int = 0) -> Any:
        """The whole vector on ``root`` (original order; NumPy or CuPy as the slices), None on
        the other ranks (collective)."""
        pieces = self.comm.gather(to_host(self.local), root=root)
        if self.partition.rank != root:
            return None
        return to_backend(self._assemble(pieces), self.backend)

    def allgather(self) -> Any:
        """The whole vector on every rank (original order; collective)."""
        return to_backend(self._assemble(self.comm.allgather(to_host(self.local))), self.backend)

    def _assemble(self, pieces: list[np.ndarray]) -> np.ndarray:
        ordered = np.concatenate(pieces) if pieces else np.zeros(0, self.dtype)
        if self.partition.permutation is None:
            return ordered
        out = np.empty_like(ordered)
        out[self.partition.permutation] = ordered
        return out

    # ------------------------------------------------------------------ arithmetic
    def _check_vector(self, other: Any) -> DistributedVector:
        if not isinstance(other, DistributedVector):
            raise TypeError(f"expected a DistributedVector, got {type(other).__name__}")
        if not self.partition.same_as(other.partition):
            raise ValueError("the vectors are split by different partitions")
        return other

    def _operand(self, other: Any) -> Any:
        if isinstance(other, DistributedVector):
            return self._check_vector(other).local
        if isinstance(other, numbers.Number) or (isinstance(other, np.generic) and other.ndim == 0):
            return other
        return NotImplemented

    def _binary(self, other: Any, fn: Any) -> Any:
        operand = self._operand(other)
        if operand is NotImplemented:
            return NotImplemented
        return DistributedVector(fn(self.local, operand), self.partition)

    def _inplace(self, other: Any, fn: Any) -> Any:
        operand = self._operand(other)
        if operand is NotImplemented:
            return NotImplemented
        fn(self.local, operand, out=self.local)
        return self

    def __add__(self, other: Any) -> Any:
        return self._binary(other, lambda a, b: a + b)

    def __radd__(self, other: Any) -> Any:
        return self._binary(other, lambda a, b: b + a)

    def __sub__(self, other: Any) -> Any:
        return self._binary(other, lambda a, b: a - b)

    def __rsub__(self, other: Any) -> Any:
        return self._binary(other, lambda a, b: b - a)

    def __mul__(self, other: Any) -> Any:
        return self._binary(other, lambda a, b: a * b)

    def __rmul__(self, other: Any) -> Any:
        return self._binary(other, lambda a, b: b * a)

    def __truediv__(self, other: Any) -> Any:
        return self._binary(other, lambda a, b: a / b)

    def __rtruediv__(self, other: Any) -> Any:
        return self._binary(other, lambda a, b: b / a)

    def __neg__(self) -> DistributedVector:
        return DistributedVector(-self.local, self.partition)

    def __iadd__(self, other: Any) -> Any:
        return self._inplace(other, np.add)

    def __isub__(self, other: Any) -> Any:
        return self._inplace(other, np.subtract)

    def __imul__(self, other: Any) -> Any:
        return self._inplace(other, np.multiply)

    def __itruediv__(self, other: Any) -> Any:
        return self._inplace(other, np.true_divide)

    def __len__(self) -> int:
        return self.partition.n

    def __repr__(self) -> str:
        return (f"DistributedVector(n={self.partition.n}, dtype={self.dtype}, rank {self.partition.rank} "
                f"of {self.partition.size} holds {self.partition.local_size} on {self.backend})")
