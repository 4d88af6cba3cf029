"""``python -m sparsegpu.bench``: see :mod:`sparsegpu.bench.cli`."""

import sys

from sparsegpu.bench.cli import main

sys.exit(main())
