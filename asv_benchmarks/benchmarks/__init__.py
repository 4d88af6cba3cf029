"""sparsegpu's asv suite: SpMV per format x dtype x matrix family against cupyx, the copy
ceiling, call latency and Python overhead, primitives against CuPy, CG against cupyx, the
advisor's statistics against one CSR SpMV.

Every benchmark needs a GPU and skips (``NotImplementedError`` in ``setup``) without one, as
it does for a format that refuses a matrix or a module the package does not have yet. Results
are checked against SciPy in ``setup``; a wrong one fails the benchmark instead of timing it.
Compilation (NVRTC) and uploads happen in ``setup``, never in the timed code.
"""

import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("sparsegpu") is None:
    # Not installed: measure the checkout this suite belongs to.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
