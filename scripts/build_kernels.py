#!/usr/bin/env python3
"""Compile every registered kernel ahead of time: one cubin per kernel file, type pair and GPU
architecture, and the manifest the kernel loader reads.

    python3 scripts/build_kernels.py sparsegpu/_cubins                      # sm_80 sm_90 sm_100 sm_120
    python3 scripts/build_kernels.py OUTDIR --arch sm_90 --files spmv_csr.cu --jobs 2

A wheel built where nvcc is present runs this (setup.py); the folder sparsegpu/_cubins/ is where
an installed package looks for them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's package

import sparsegpu  # noqa: E402,F401  (importing the package registers every kernel file)
from sparsegpu import _aot  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path, help="folder for the cubins and manifest.json")
    parser.add_argument("--arch", action="append", dest="archs", metavar="SM",
                        help=f"a GPU architecture, repeatable (default: {' '.join(_aot.DEFAULT_ARCHS)})")
    parser.add_argument("--files", nargs="+", metavar="FILE.cu", help="only these kernel files")
    parser.add_argument("--jobs", type=int, default=None, help="nvcc processes at once (default: CPU count)")
    parser.add_argument("--nvcc", default=None, help="the nvcc to use (default: on PATH or in $CUDA_HOME)")
    args = parser.parse_args(argv)
    archs = [a for spec in args.archs or _aot.DEFAULT_ARCHS for a in spec.replace(",", " ").split()]
    started = time.perf_counter()
    manifest = _aot.build(args.out_dir, archs, files=args.files, jobs=args.jobs, nvcc=args.nvcc)
    seconds = time.perf_counter() - started
    for arch in archs:
        names = [m["cubins"][arch] for m in manifest["modules"].values()]
        size = sum((args.out_dir / name).stat().st_size for name in names)
        print(f"{arch}: {len(names)} cubins, {size / 2**20:.1f} MiB")
    entries = sum(len(m["entries"]) for m in manifest["modules"].values())
    print(f"built {entries} kernels x {len(archs)} archs with nvcc {manifest['nvcc']} in {seconds:.0f} s "
          f"-> {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
