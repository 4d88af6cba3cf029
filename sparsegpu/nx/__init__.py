"""A NetworkX backend: ``nx.pagerank(G, backend="sparsegpu")`` runs on :mod:`sparsegpu.csgraph`.

NetworkX finds the backend through two entry points of the ``sparsegpu`` distribution,
``networkx.backends`` (:data:`backend_interface`) and ``networkx.backend_info``
(:func:`get_info`). NetworkX stays optional: this package imports it only when a graph is
converted or a NetworkX exception is raised. The dispatched functions are
:data:`sparsegpu.nx.interface.FUNCTIONS`; anything else, and the arguments ``can_run``
refuses, run in NetworkX itself.
"""

from __future__ import annotations

from sparsegpu.nx.graph import SparseGraph, from_networkx, to_networkx
from sparsegpu.nx.interface import (
    FUNCTIONS,
    BackendInterface,
    backend_interface,
    get_info,
)

__all__ = ["FUNCTIONS", "BackendInterface", "SparseGraph", "backend_interface", "from_networkx", "get_info",
           "to_networkx"]
