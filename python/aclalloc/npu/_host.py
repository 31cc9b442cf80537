"""torch_npu's host-memory statistics over ``aclrtMallocHost`` memory
(``aclallocHostMemoryGetStats`` and the resets of libaclalloc), with
PyTorch's host-allocator keys.

``aclrtFreeHost`` gives a block back at once, so nothing is cached:
``allocations`` equal ``active_requests`` and ``allocated_bytes`` equal
``active_bytes``; bytes are the sizes requested; times are microseconds.
"""

from __future__ import annotations

import collections
import ctypes
from ctypes import POINTER, byref
from typing import Any, Dict

from .._lib import declare, lib, mirrors
from ._default import fail
from ._pluggable import Stat, flatten


@mirrors("aclallocDurationStat")
class DurationStat(ctypes.Structure):
    """``aclallocDurationStat``."""

    _fields_ = [(name, ctypes.c_int64) for name in ("total", "max", "min", "count")]


_STATS = ("allocations", "allocated_bytes", "active_requests", "active_bytes")


@mirrors("aclallocHostMemoryStats")
class HostMemoryStats(ctypes.Structure):
    """``aclallocHostMemoryStats``."""

    _fields_ = [
        *((name, Stat) for name in _STATS),
        ("num_host_alloc", ctypes.c_int64),
        ("num_host_free", ctypes.c_int64),
        ("host_alloc_time", DurationStat),
        ("host_free_time", DurationStat),
    ]


declare(
    {
        "aclallocHostMemoryGetStats": (ctypes.c_int, (POINTER(HostMemoryStats),)),
        "aclallocHostMemoryResetPeakStats": (ctypes.c_int, ()),
        "aclallocHostMemoryResetAccumulatedStats": (ctypes.c_int, ()),
        "aclallocHostMemoryEmptyCache": (ctypes.c_int, ()),
    }
)


def _call(name: str) -> None:
    rc = getattr(lib, name)()
    if rc != 0:
        raise fail(name, rc)


def host_memory_stats_as_nested_dict() -> Dict[str, Any]:
    """:func:`host_memory_stats` as nested dicts."""
    raw = HostMemoryStats()
    rc = lib.aclallocHostMemoryGetStats(byref(raw))
    if rc != 0:
        raise fail("aclallocHostMemoryGetStats", rc)
    nested: Dict[str, Any] = {}
    for name in _STATS:
        s = getattr(raw, name)
        nested[name] = {k: getattr(s, k) for k in ("current", "peak", "allocated", "freed")}
    nested["num_host_alloc"] = raw.num_host_alloc
    nested["num_host_free"] = raw.num_host_free
    for name in ("host_alloc_time", "host_free_time"):
        d = getattr(raw, name)
        nested[name] = {
            "total": d.total,
            "max": d.max,
            "min": d.min,
            "count": d.count,
            "avg": d.total // d.count if d.count else 0,
        }
    return nested


def host_memory_stats() -> Dict[str, Any]:
    """Statistics of ``aclrtMallocHost`` memory, flat and sorted, with
    PyTorch's keys: ``allocations``, ``allocated_bytes``, ``active_requests``
    and ``active_bytes`` with ``.{current,peak,allocated,freed}``,
    ``num_host_alloc``, ``num_host_free``, and ``host_alloc_time`` /
    ``host_free_time`` with ``.{total,max,min,count,avg}`` (microseconds)."""
    return collections.OrderedDict(flatten(host_memory_stats_as_nested_dict()))


def reset_accumulated_host_memory_stats() -> None:
    """Zeroes the ``allocated``/``freed`` totals, the call counts and the timings."""
    _call("aclallocHostMemoryResetAccumulatedStats")


def reset_peak_host_memory_stats() -> None:
    """Sets every ``peak`` of the host-memory statistics to its current value."""
    _call("aclallocHostMemoryResetPeakStats")


def host_empty_cache() -> None:
    """Gives cached host memory back: none is ever cached, so this does nothing."""
    _call("aclallocHostMemoryEmptyCache")
