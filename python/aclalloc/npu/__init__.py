"""torch_npu's memory API over libaclalloc: ``from aclalloc import npu``.

``npu.memory_stats()``, ``npu.caching_allocator_alloc(size)``,
``npu.NPUPluggableAllocator(path, alloc, free)`` and the rest, with
PyTorch's names and meanings; also reachable as ``npu.memory.*`` (like
``torch.npu.memory``), where the private ``_record_memory_history``,
``_snapshot`` and ``_dump_snapshot`` live.
"""

from . import memory
from .memory import (
    NPUPluggableAllocator,
    OutOfMemoryError,
    caching_allocator_alloc,
    caching_allocator_delete,
    change_current_allocator,
    empty_cache,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)

__all__ = [
    "NPUPluggableAllocator",
    "OutOfMemoryError",
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "change_current_allocator",
    "empty_cache",
    "max_memory_allocated",
    "max_memory_cached",
    "max_memory_reserved",
    "mem_get_info",
    "memory",
    "memory_allocated",
    "memory_cached",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_memory_stats",
    "set_per_process_memory_fraction",
]
