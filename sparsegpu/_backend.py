"""Which backend is active, the array module that goes with it, and library-wide options.

Two backends exist: ``"gpu"`` (CuPy arrays, CUDA kernels from ``kernels/``) and ``"cpu"``
(NumPy arrays, the reference kernels in :mod:`sparsegpu.reference`). The GPU backend is chosen
when CuPy imports and a CUDA device answers; ``SPARSEGPU_BACKEND=cpu|gpu`` forces one.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any, Literal

import numpy as np

Backend = Literal["cpu", "gpu"]
BACKEND_ENV = "SPARSEGPU_BACKEND"


class BackendError(RuntimeError):
    """The requested backend cannot be used on this machine.

    Raised when ``backend="gpu"`` or ``SPARSEGPU_BACKEND=gpu`` asks for the GPU and CuPy does not
    import or no CUDA device answers; the message says why and names the install extra
    (``sparsegpu[cuda12]`` or ``sparsegpu[cuda13]``) when CuPy is missing.

    Examples
    --------
    >>> import sparsegpu
    >>> issubclass(sparsegpu.BackendError, RuntimeError)
    True
    """


@functools.cache
def _gpu_probe() -> tuple[bool, str]:
    """(usable, why not): imports CuPy and asks the driver for a device, once per process."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CuPy built for another CUDA
        return False, (f"CuPy cannot be imported ({exc}); install it with the extra that matches your "
                       f"CUDA: python3 -m pip install 'sparsegpu[cuda13]' (or 'sparsegpu[cuda12]')")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, no device
        return False, f"no CUDA device answers ({exc})"
    if count == 0:
        return False, "the CUDA driver reports no device"
    return True, ""


def gpu_available() -> bool:
    """Whether the GPU backend can run here.

    Returns
    -------
    bool
        True when CuPy imports and a CUDA device answers. ``SPARSEGPU_BACKEND`` is ignored; the
        probe runs once per process.

    Examples
    --------
    >>> import sparsegpu
    >>> sparsegpu.gpu_available() in (True, False)
    True
    """
    return _gpu_probe()[0]


def backend() -> Backend:
    """The backend new matrices are placed on when no ``backend`` is given.

    The GPU when :func:`gpu_available`, else the CPU. ``SPARSEGPU_BACKEND=cpu`` forces the CPU
    backend; ``SPARSEGPU_BACKEND=gpu`` forces the GPU.

    Returns
    -------
    {"gpu", "cpu"}

    Raises
    ------
    BackendError
        ``SPARSEGPU_BACKEND`` is neither ``cpu`` nor ``gpu``, or asks for a GPU that is not
        usable.

    Examples
    --------
    >>> import sparsegpu
    >>> sparsegpu.backend() in ("cpu", "gpu")
    True
    """
    forced = os.environ.get(BACKEND_ENV, "").strip().lower()
    if forced not in ("", "cpu", "gpu"):
        raise BackendError(f"{BACKEND_ENV} must be 'cpu' or 'gpu', not {forced!r}")
    if forced == "cpu":
        return "cpu"
    usable, why = _gpu_probe()
    if forced == "gpu" and not usable:
        raise BackendError(f"{BACKEND_ENV}=gpu, but the GPU backend is not usable: {why}")
    return "gpu" if usable else "cpu"


def resolve_backend(requested: str | None) -> Backend:
    """``requested`` checked, or the active backend when it is None."""
    if requested is None:
        return backend()
    if requested not in ("cpu", "gpu"):
        raise ValueError(f"backend must be 'cpu', 'gpu' or None, not {requested!r}")
    if requested == "gpu" and not gpu_available():
        raise BackendError(f"backend='gpu' requested, but the GPU is not usable: {_gpu_probe()[1]}")
    return requested  # type: ignore[return-value]


def array_module(which: Backend) -> ModuleType:
    """numpy for ``"cpu"``, cupy for ``"gpu"``."""
    if which == "gpu":
        import cupy

        return cupy
    return np


def is_device_array(a: Any) -> bool:
    """True for a CuPy ndarray; False (without importing CuPy) when CuPy is not loaded."""
    return type(a).__module__.startswith("cupy") and hasattr(a, "device")


def backend_of(a: Any) -> Backend:
    """``"gpu"`` for a CuPy array, ``"cpu"`` for anything else."""
    return "gpu" if is_device_array(a) else "cpu"


def to_host(a: Any) -> np.ndarray:
    """A NumPy array with ``a``'s contents (a copy from the device for CuPy arrays)."""
    return a.get() if is_device_array(a) else np.asarray(a)


def to_backend(a: Any, backend: Backend) -> Any:
    """``a`` on ``backend`` (uploaded or downloaded when it is elsewhere, else as it is)."""
    if backend == "gpu":
        import cupy

        return cupy.asarray(a)
    return to_host(a)


# --------------------------------------------------------------------------- options


class _Options:
    """Library-wide switches. Read them through :func:`get_options`, change them with
    :func:`options` (a context manager) or :func:`set_options`."""

    __slots__ = ("deterministic",)

    def __init__(self) -> None:
        self.deterministic = True


_OPTIONS = _Options()


def get_options() -> dict[str, Any]:
    """The current library-wide options.

    Returns
    -------
    dict
        ``{"deterministic": bool}``. ``deterministic`` (default True): every kernel gives
        bitwise the same result run to run. False lets scatter-type products (``CSR.T @ x``,
        ``CSC @ x``, COO) use atomic adds, which saves the transposed copy those products
        otherwise build once, at the price of run-to-run rounding differences.

    Examples
    --------
    >>> import sparsegpu
    >>> sparsegpu.get_options()
    {'deterministic': True}
    """
    return {name: getattr(_OPTIONS, name) for name in _Options.__slots__}


def set_options(**changes: Any) -> None:
    """Set options by name until changed again (:func:`options` restores them after a block).

    Parameters
    ----------
    **changes : bool
        Option names (see :func:`get_options`) and their new values. Nothing changes unless
        every name and value is valid.

    Raises
    ------
    TypeError
        An unknown option name, or a value that is not True or False.

    Examples
    --------
    >>> import sparsegpu
    >>> sparsegpu.set_options(deterministic=False)
    >>> sparsegpu.get_options()["deterministic"]
    False
    >>> sparsegpu.set_options(deterministic=True)
    """
    for name, value in changes.items():
        if name not in _Options.__slots__:
            raise TypeError(f"unknown option {name!r}; known: {', '.join(_Options.__slots__)}")
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"option {name} must be True or False, got {type(value).__name__} {value!r}")
    for name, value in changes.items():
        setattr(_OPTIONS, name, bool(value))


@contextlib.contextmanager
def options(**changes: Any) -> Iterator[None]:
    """Set options for the duration of a ``with`` block, then restore the previous ones.

    Parameters
    ----------
    **changes : bool
        As for :func:`set_options`.

    Raises
    ------
    TypeError
        An unknown option name, or a value that is not True or False.

    Examples
    --------
    >>> import sparsegpu
    >>> with sparsegpu.options(deterministic=False):
    ...     sparsegpu.get_options()["deterministic"]
    False
    """
    saved = get_options()
    set_options(**changes)
    try:
        yield
    finally:
        set_options(**saved)


def deterministic() -> bool:
    return _OPTIONS.deterministic
