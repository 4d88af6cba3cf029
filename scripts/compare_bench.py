"""Compare two ``python -m sparsegpu.bench`` results (bench.json), e.g. a change against the tree
before it, timed in one run: every timed entry's new/old ratio, and the geometric mean and range
per section and per implementation. Ratios below 1 mean the new tree is faster.

    python3 scripts/compare_bench.py OLD/bench.json NEW/bench.json
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from typing import Any


def timed(node: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], float]:
    """Every ``seconds``, ``call_us`` or ``ms_per_iteration`` leaf, keyed by its path (list items
    by their ``matrix``, ``op``/``dtype``/``impl`` or ``what`` fields)."""
    found: dict[tuple[str, ...], float] = {}
    if isinstance(node, dict):
        for key in ("seconds", "call_us", "ms_per_iteration"):
            value = node.get(key)
            if isinstance(value, (int, float)) and value > 0:
                found[path + (key,)] = float(value)
        for key, value in node.items():
            if isinstance(value, (dict, list)):
                found.update(timed(value, path + (key,)))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            label = str(index)
            if isinstance(item, dict):
                parts = [str(item[k]) for k in ("matrix", "op", "dtype", "impl", "what", "n", "method") if k in item]
                label = "/".join(parts) or label
            found.update(timed(item, path + (label,)))
    return found


def main(old_path: str, new_path: str) -> None:
    old, new = (timed(json.load(open(p))) for p in (old_path, new_path))
    groups: dict[str, list[float]] = defaultdict(list)
    for key in sorted(old.keys() & new.keys()):
        ratio = new[key] / old[key]
        print(f"{' '.join(key):100s} {old[key]:.4g} -> {new[key]:.4g}  {ratio:.3f}")
        section = key[0]
        leaf = key[-2] if key[-1] == "seconds" and len(key) > 2 else key[-1]
        groups[f"{section} {leaf}" if section == "spmv" else section].append(ratio)
    print("\nnew / old, by section (geomean [min, max], entries):")
    for name, ratios in sorted(groups.items()):
        geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"  {name:24s} {geomean:.3f} [{min(ratios):.3f}, {max(ratios):.3f}] n={len(ratios)}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
