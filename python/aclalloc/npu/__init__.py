"""torch_npu's memory API over libaclalloc: ``from aclalloc import npu``.

``npu.memory_stats()``, ``npu.caching_allocator_alloc(size)``,
``npu.NPUPluggableAllocator(path, alloc, free)`` and the rest, with
PyTorch's names and meanings; also reachable as ``npu.memory.*`` (like
``torch.npu.memory``), where the private ``_record_memory_history``,
``_snapshot`` and ``_dump_snapshot`` live.
"""

from . import graphs, memory

# npu.memory's and npu.graphs' __all__ are the lists of the public API;
# this package re-exports them, plus the modules themselves.
from .graphs import *  # noqa: F403
from .graphs import __all__ as _graphs_all
from .memory import *  # noqa: F403
from .memory import __all__ as _memory_all

__all__ = ["graphs", "memory", *_graphs_all, *_memory_all]
