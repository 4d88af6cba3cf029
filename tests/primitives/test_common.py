"""sparsegpu.primitives._common: the argument checks every primitive shares (bad arrays, dtypes,
operators and offsets raise a ValueError or TypeError naming the argument).
"""

from __future__ import annotations

import numpy as np
import pytest

from sparsegpu import primitives as P


@pytest.mark.parametrize("fn", [P.inclusive_scan, P.exclusive_scan, P.reduce])
def test_bad_arrays_raise(fn):
    with pytest.raises(ValueError, match="1-D"):
        fn(np.zeros((2, 2)))
    for bad in (np.zeros(3, dtype=np.uint8), np.zeros(3, dtype=np.float16), np.zeros(3, dtype=bool), np.zeros(3, dtype=np.complex64)):
        with pytest.raises(TypeError, match="dtype"):
            fn(bad)


def test_bad_ops_and_offsets_raise():
    x = np.arange(10.0)
    with pytest.raises(ValueError, match="op must be"):
        P.reduce(x, "prod")
    with pytest.raises(ValueError, match="non-decreasing"):
        P.segmented_reduce(x, np.array([0, 5, 3, 10]))
    with pytest.raises(ValueError, match="lie in"):
        P.segmented_reduce(x, np.array([0, 11]))
    with pytest.raises(ValueError, match="lie in"):
        P.segmented_reduce(x, np.array([-1, 4]))
    with pytest.raises(TypeError, match="integers"):
        P.segmented_reduce(x, np.array([0.0, 10.0]))
    with pytest.raises(ValueError, match="at least one"):
        P.segmented_reduce(x, np.array([], dtype=np.int64))
    with pytest.raises(ValueError, match="from 0 to"):
        P.segmented_scan(x, np.array([1, 10]))
    with pytest.raises(ValueError, match="exactly one"):
        P.segmented_scan(x)
    with pytest.raises(ValueError, match="exactly one"):
        P.segmented_scan(x, np.array([0, 10]), flags=np.zeros(10))
    with pytest.raises(ValueError, match="length"):
        P.segmented_scan(x, flags=np.zeros(9, dtype=bool))
    with pytest.raises(TypeError, match="boolean or integer"):
        P.segmented_scan(x, flags=np.zeros(10))
