"""NumPy references of kernels/transpose.cu: same arguments, same array layouts, outputs written in
place (and returned). GPU tests run each kernel and its reference on the same data and compare.

A pass of the stable radix sort by minor index reads keys (and positions; ``pos`` None means
position j itself) in tiles of :data:`TILE` entries. ``counts`` and ``starts`` are digit-major:
entry ``d * n_tiles + t`` belongs to digit d of tile t; ``starts`` is the exclusive scan of the
counts, where each (digit, tile) run begins in the output.

>>> import numpy as np
>>> keys = np.array([3, 1, 3, 0], dtype=np.int32)
>>> counts = transpose_count(keys, 0, 1, np.empty(DIGITS, np.int32))
>>> starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int32)
>>> out_keys, out_pos = np.empty(4, np.int32), np.empty(4, np.int32)
>>> transpose_move(keys, None, 0, 1, starts, out_keys, out_pos)[1].tolist()
[3, 1, 0, 2]
"""

from __future__ import annotations

import numpy as np

DIGIT_BITS = 8  # kernels/transpose.cu TRANSPOSE_DIGIT_BITS: key bits a pass sorts by
DIGITS = 1 << DIGIT_BITS
TILE = 2048  # kernels/transpose.cu TRANSPOSE_TILE: entries a block ranks


def radix_shifts(n_minor: int) -> list[int]:
    """The shift of each pass's digit: enough passes of DIGIT_BITS bits to order keys in
    [0, n_minor), at least one.

    >>> radix_shifts(1), radix_shifts(256), radix_shifts(257), radix_shifts(20_000)
    ([0], [0], [0, 8], [0, 8])
    """
    bits = max(int(n_minor) - 1, 0).bit_length()
    return [DIGIT_BITS * p for p in range(max(1, -(-bits // DIGIT_BITS)))]


def tiles_for(n: int) -> int:
    """Tiles (blocks) a pass over ``n`` entries takes."""
    return -(-int(n) // TILE)


def digits(keys: np.ndarray, shift: int) -> np.ndarray:
    """Bits [shift, shift + DIGIT_BITS) of each key, as the kernels read them (two's complement)."""
    return ((keys.astype(np.int64).view(np.uint64) >> np.uint64(shift)) & np.uint64(DIGITS - 1)).astype(np.int64)


def _groups(keys: np.ndarray, shift: int, n_tiles: int) -> np.ndarray:
    """Each entry's (digit, tile) run, digit-major: ``digit * n_tiles + tile``."""
    return digits(keys, shift) * n_tiles + np.arange(keys.size, dtype=np.int64) // TILE


def transpose_count(keys: np.ndarray, shift: int, n_tiles: int, counts: np.ndarray) -> np.ndarray:
    """counts[d * n_tiles + t] <- the entries of tile t whose digit is d (every word written)."""
    counts[:] = np.bincount(_groups(keys, shift, n_tiles), minlength=DIGITS * n_tiles)
    return counts


def _destinations(keys: np.ndarray, shift: int, n_tiles: int, starts: np.ndarray) -> np.ndarray:
    """Where each entry goes: its run's start plus the entries of its run before it (input order)."""
    group = _groups(keys, shift, n_tiles)
    order = np.argsort(group, kind="stable")
    ordered = group[order]
    rank = np.arange(group.size) - np.searchsorted(ordered, ordered, side="left")
    out = np.empty(group.size, dtype=np.int64)
    out[order] = starts[ordered].astype(np.int64) + rank
    return out


def _positions(pos: np.ndarray | None, n: int, dtype: np.dtype) -> np.ndarray:
    return np.arange(n, dtype=dtype) if pos is None else pos


def transpose_move(keys: np.ndarray, pos: np.ndarray | None, shift: int, n_tiles: int, starts: np.ndarray,
                   keys_out: np.ndarray, pos_out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A pass before the last: keys_out[dst], pos_out[dst] <- key, position of each entry."""
    dst = _destinations(keys, shift, n_tiles, starts)
    keys_out[dst] = keys
    pos_out[dst] = _positions(pos, keys.size, keys.dtype)
    return keys_out, pos_out


def transpose_place(keys: np.ndarray, pos: np.ndarray | None, shift: int, n_tiles: int, starts: np.ndarray,
                    row_of: np.ndarray, data: np.ndarray, keys_out: np.ndarray, indices_out: np.ndarray,
                    data_out: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The last pass: keys_out[dst] <- key, indices_out[dst] <- row_of[position],
    data_out[dst] <- data[position]."""
    dst = _destinations(keys, shift, n_tiles, starts)
    at = _positions(pos, keys.size, keys.dtype)
    keys_out[dst] = keys
    indices_out[dst] = row_of[at]
    data_out[dst] = data[at]
    return keys_out, indices_out, data_out
