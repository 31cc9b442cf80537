"""torch_npu's memory API over libaclalloc: ``from aclalloc import npu``.

``npu.memory_stats()``, ``npu.caching_allocator_alloc(size)``,
``npu.NPUPluggableAllocator(path, alloc, free)`` and the rest, with
PyTorch's names and meanings; also reachable as ``npu.memory.*`` (like
``torch.npu.memory``), where the private ``_record_memory_history``,
``_snapshot`` and ``_dump_snapshot`` live.
"""

from . import memory

# npu.memory's __all__ is the one list of the public API; this package
# re-exports it, plus the module itself.
from .memory import *  # noqa: F403
from .memory import __all__ as _memory_all

__all__ = ["memory", *_memory_all]
