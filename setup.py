"""The one compiled piece of sparsegpu: host copies with non-temporal stores (sparsegpu/_streamcopy.c).

Optional: where no C compiler is available the build goes on without it, and
sparsegpu.transfer packs with numpy.copyto instead (correct, slower). Everything else is in
pyproject.toml.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("sparsegpu._streamcopy", ["sparsegpu/_streamcopy.c"], optional=True)])
