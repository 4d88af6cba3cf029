"""Host -> device transfers through pinned memory, and SpMV on matrices kept in host memory.

- :mod:`~sparsegpu.transfer.pinned`: :class:`PinnedPool`, reusable page-locked staging
  buffers; :func:`pinned_empty`, :func:`pin` / :func:`unpin`, host arrays the GPU reads
  directly.
- :mod:`~sparsegpu.transfer.staging`: chunk planning and the engine under every upload (chunks
  packed into pinned buffers by several host threads and copied on several CUDA streams while
  device work runs on chunks already arrived); :mod:`~sparsegpu.transfer.report`: the
  :class:`TransferReport` of where the time went.
- :mod:`~sparsegpu.transfer.arrays`: :func:`upload` of plain arrays;
  :mod:`~sparsegpu.transfer.csr_upload`: :func:`upload_csr`, a scipy matrix to a device CSR,
  validated on the device as it arrives.
- :mod:`~sparsegpu.transfer.out_of_core`: :class:`OutOfCoreCSR`, ``A @ x`` for a CSR matrix
  held in host memory (possibly memory mapped), streamed through the GPU row block by row
  block under a device memory budget.

On the CPU backend the same calls run without transfers: :func:`upload_csr` builds a CPU
:class:`~sparsegpu.CSR`, :class:`OutOfCoreCSR` runs SciPy's product block by block.

>>> import numpy as np, scipy.sparse as sp
>>> S = sp.random(1000, 300, density=0.02, random_state=0, format="csr")
>>> A = upload_csr(S, chunk_bytes=4096, backend="cpu")
>>> bool(np.allclose(A @ np.ones(300), S @ np.ones(300)))
True
>>> big = OutOfCoreCSR(S, device_budget_bytes=8192, backend="cpu")
>>> bool(np.array_equal(big @ np.ones(300), A @ np.ones(300)))
True
"""

from __future__ import annotations

from sparsegpu.transfer._checks import PackStrategy
from sparsegpu.transfer.arrays import upload
from sparsegpu.transfer.csr_upload import STREAM_MIN_BYTES, upload_csr, worth_streaming
from sparsegpu.transfer.out_of_core import (
    SLOT_ALIGN,
    OutOfCoreCSR,
    block_bytes,
    plan_row_blocks,
)
from sparsegpu.transfer.pinned import (
    DEFAULT_BUFFER_BYTES,
    DEFAULT_BUFFERS,
    PinnedPool,
    default_pool,
    is_pinned,
    pin,
    pinned_empty,
    unpin,
)
from sparsegpu.transfer.report import TransferReport
from sparsegpu.transfer.staging import (
    MIN_THREAD_PIECE,
    PAGE_BYTES,
    STREAMING_PACK,
    Chunk,
    default_pack_threads,
    pack_copy,
    plan_chunks,
)

__all__ = [
    "Chunk",
    "DEFAULT_BUFFERS",
    "DEFAULT_BUFFER_BYTES",
    "MIN_THREAD_PIECE",
    "OutOfCoreCSR",
    "PAGE_BYTES",
    "PackStrategy",
    "PinnedPool",
    "SLOT_ALIGN",
    "STREAMING_PACK",
    "STREAM_MIN_BYTES",
    "TransferReport",
    "block_bytes",
    "default_pack_threads",
    "default_pool",
    "is_pinned",
    "pack_copy",
    "pin",
    "pinned_empty",
    "plan_chunks",
    "plan_row_blocks",
    "unpin",
    "upload",
    "upload_csr",
    "worth_streaming",
]
