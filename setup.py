"""The compiled pieces of sparsegpu, both optional; everything else is in pyproject.toml.

- Host copies with non-temporal stores (sparsegpu/_streamcopy.c). Where no C compiler is
  available the build goes on without it, and sparsegpu.transfer packs with numpy.copyto
  instead (correct, slower).
- Kernels compiled ahead of time (sparsegpu/_cubins/, built by python -m sparsegpu._aot), so a
  first call does not wait for NVRTC. A wheel built where nvcc is present gets them, unless
  SPARSEGPU_BUILD_KERNELS=0; SPARSEGPU_KERNEL_ARCHS="sm_90 sm_100" picks the architectures
  (default sm_80 sm_90 sm_100 sm_120). An editable install (pip install -e .) builds them into
  the checkout only when SPARSEGPU_BUILD_KERNELS=1, which also makes a missing nvcc an error.
  The build imports sparsegpu, so it needs numpy and scipy where the wheel is built.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
OFF, ON = ("0", "no", "false", "off"), ("1", "yes", "true", "on")


def find_nvcc():
    homes = [h for h in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda") if h]
    for candidate in ("nvcc", *(str(Path(home) / "bin" / "nvcc") for home in homes)):
        if shutil.which(candidate):
            return shutil.which(candidate)
    return None


class BuildPyWithKernels(build_py):
    """build_py, then the cubins: into the wheel's tree, or the checkout's for an editable install."""

    def run(self):
        super().run()
        choice = os.environ.get("SPARSEGPU_BUILD_KERNELS", "").strip().lower()
        editable = getattr(self, "editable_mode", False)
        if choice in OFF or (editable and choice not in ON):
            return
        nvcc = find_nvcc()
        missing = [m for m in ("numpy", "scipy") if importlib.util.find_spec(m) is None]
        if nvcc is None or missing:
            why = "nvcc was not found" if nvcc is None else f"{' and '.join(missing)} cannot be imported here"
            if choice in ON:
                raise SystemExit(f"SPARSEGPU_BUILD_KERNELS=1 but {why}: the kernels cannot be built")
            print(f"sparsegpu: not building kernels ahead of time ({why}); they compile on first use")
            return
        target = (HERE if editable else Path(self.build_lib)) / "sparsegpu" / "_cubins"
        shutil.rmtree(target, ignore_errors=True)
        command = [sys.executable, "-m", "sparsegpu._aot", str(target), "--nvcc", nvcc]
        for arch in os.environ.get("SPARSEGPU_KERNEL_ARCHS", "").replace(",", " ").split():
            command += ["--arch", arch]
        subprocess.run(command, check=True, cwd=HERE)  # the checkout's package


setup(
    ext_modules=[Extension("sparsegpu._streamcopy", ["sparsegpu/_streamcopy.c"], optional=True)],
    cmdclass={"build_py": BuildPyWithKernels},
)
