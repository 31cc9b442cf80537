"""torch_npu's memory API (``torch_npu.npu.*`` / ``torch.npu.memory.*``) over
the default allocator of libaclalloc.

Names and meanings are PyTorch's. The default allocator is what serves
``caching_allocator_alloc`` and the workspaces of launches on streams
without a registered allocator: the caching pool unless
``ACLALLOC_DEFAULT_ALLOCATOR`` or :func:`change_current_allocator` chose
another. The caching pool is one per device, each made when first used on
its device; a device's statistics are its own pool's.

Errors are raised: ``RuntimeError`` with the library's message
(:class:`OutOfMemoryError` when memory ran out), ``TypeError``/``ValueError``
for bad arguments.
"""

from __future__ import annotations

import collections
import json
import pickle
import sys
import warnings
from ctypes import byref, c_size_t, c_void_p
from typing import Any, Dict, List, Optional, Tuple

from .. import _stacks
from .._lib import (
    ACL_ERROR_REPEAT_INITIALIZE,
    ACL_HBM_MEM,
    AllocatorStats,
    lib,
    recent_c_message,
)
from . import _default, _history, _mempool, _plots, _pluggable, _pools, _settings
from ._default import OutOfMemoryError, fail
from ._host import (
    host_empty_cache,
    host_memory_stats,
    host_memory_stats_as_nested_dict,
    reset_accumulated_host_memory_stats,
    reset_peak_host_memory_stats,
)
from ._mempool import MemPool, use_mem_pool
from ._pluggable import NPUPluggableAllocator, _NPUAllocator, _NPUPluggableAllocator
from ._region import region
from ._settings import empty_virt_addr_cache, get_allocator_backend, get_per_process_memory_fraction
from ._sleep import sleep, wake_up

__all__ = [
    "MemPool",
    "NPUPluggableAllocator",
    "OutOfMemoryError",
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "change_current_allocator",
    "empty_cache",
    "empty_virt_addr_cache",
    "get_allocator_backend",
    "get_per_process_memory_fraction",
    "host_empty_cache",
    "host_memory_stats",
    "host_memory_stats_as_nested_dict",
    "max_memory_allocated",
    "max_memory_cached",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_cached",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "region",
    "reset_accumulated_host_memory_stats",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_host_memory_stats",
    "reset_peak_memory_stats",
    "set_per_process_memory_fraction",
    "sleep",
    "use_mem_pool",
    "wake_up",
]

Device = Any
"""None (the current device), an int, ``"npu:N"``, or a torch.device-like object."""


# -- allocation --------------------------------------------------------------------


def caching_allocator_alloc(size: int, device: Device = None, stream: Optional[int] = None) -> int:
    """Allocates ``size`` bytes from the default allocator on ``device`` for
    ``stream`` and returns the device address (an int). The first allocation
    builds the default allocator; from then on it cannot be swapped."""
    n = _default.size_argument("size", size)
    index = _default.device_index(device)
    s = _default.stream_argument(stream)
    if device is None:
        _default.current_device(set_if_none=True)
    ptr = c_void_p()
    with _default.on_device(index):
        rc = _stacks.call(lib.aclallocDefaultMalloc, byref(ptr), n, s)
    if rc != 0:
        raise fail("aclallocDefaultMalloc", rc)
    return ptr.value or 0


def caching_allocator_delete(mem_ptr: int) -> None:
    """Frees memory from :func:`caching_allocator_alloc`. Anything else, or a
    second free, raises RuntimeError ("Trying to free a pointer not allocated here")."""
    if isinstance(mem_ptr, bool) or not isinstance(mem_ptr, int):
        raise TypeError(f"mem_ptr must be an int, not {type(mem_ptr).__name__}")
    if not 0 < mem_ptr < 1 << 64:
        raise ValueError(f"mem_ptr {mem_ptr} is not a device address")
    rc = _stacks.call(lib.aclallocDefaultFree, mem_ptr)
    if rc != 0:
        raise fail("aclallocDefaultFree", rc)


# -- limits and caches -----------------------------------------------------------


def set_per_process_memory_fraction(fraction: float, device: Device = None) -> None:
    """Limits what the default caching pool may reserve to ``fraction`` of the
    device's memory. Builds the default allocator if needed (torch's lazy
    init: from then on :func:`change_current_allocator` fails). A fraction of
    0 lets it reserve nothing. A pluggable default allocator is told through
    its memory-fraction function, and has none when made from Python
    (RuntimeError with the library's message)."""
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    index = _default.device_index(device)
    with _default.on_device(index):
        state = _default.initialize()
    if state.kind == "pool":
        if state.device != index:
            raise RuntimeError(
                f"set_per_process_memory_fraction: the default caching pool lives on device "
                f"{state.device}, not {index}."
            )
        if fraction == 0:
            # The pool's limits are positive; one byte admits no block (every
            # block is a multiple of 512), which is what a fraction of 0 means.
            rc = lib.aclallocPoolSetMemoryLimit(state.obj, 1)
        else:
            rc = lib.aclallocPoolSetMemoryFraction(state.obj, fraction)
    elif state.kind == "plugin":
        rc = lib.aclallocPluggableSetMemoryFraction(state.obj, fraction, index)
    else:
        raise RuntimeError(
            f"set_per_process_memory_fraction: the default allocator ({state.kind}) has no "
            "memory limit to set."
        )
    if rc != 0:
        raise fail("set_per_process_memory_fraction", rc)
    _settings.FRACTIONS[index] = fraction


def empty_cache() -> None:
    """Returns every wholly free cached segment of the default pools (one per
    device) to their devices (a pluggable default: its empty-cache function,
    if it has one). Does nothing before the default allocator is built."""
    state = _default.built()
    if state is None:
        return
    if state.kind == "pool":
        for index in range(_default.device_count()):
            pool = _default.built_for(index)
            rc = lib.aclallocPoolEmptyCache(pool.obj) if pool is not None else 0
            if rc != 0:
                raise fail("empty_cache", rc)
        return
    elif state.kind == "plugin":
        rc = lib.aclallocPluggableEmptyCache(state.obj)
    else:
        return
    if rc != 0:
        raise fail("empty_cache", rc)


def mem_get_info(device: Device = None) -> Tuple[int, int]:
    """``(free, total)`` bytes of the device's memory (``aclrtGetMemInfo``)."""
    index = _default.device_index(device)
    free, total = c_size_t(0), c_size_t(0)
    with _default.on_device(index):
        rc = lib.aclrtGetMemInfo(ACL_HBM_MEM, byref(free), byref(total))
    if rc != 0:
        raise fail("aclrtGetMemInfo", rc)
    return free.value, total.value


# -- statistics ------------------------------------------------------------------


def _allocator_stats(state: _default.Default) -> Dict[str, int]:
    """A non-pool default allocator: the counters the library keeps for it."""
    raw = AllocatorStats()
    if state.kind == "plugin":
        rc = lib.aclallocPluggableGetStats(state.obj, byref(raw))
    else:
        rc = lib.aclallocDefaultGetStats(byref(raw))
    if rc != 0:
        raise fail("allocator statistics", rc)
    stats: Dict[str, int] = {}
    for name, current, peak, total, freed in (
        (
            "allocated_bytes",
            raw.allocatedBytesCurrent,
            raw.allocatedBytesPeak,
            raw.allocatedBytesTotal,
            raw.freedBytesTotal,
        ),
        ("allocation", raw.activeCount, raw.activePeak, raw.allocCount, raw.freeCount),
    ):
        for key, value in (("current", current), ("peak", peak), ("allocated", total)):
            stats[f"{name}.all.{key}"] = value
        stats[f"{name}.all.freed"] = freed
    stats["num_ooms"] = raw.failedAllocCount
    return stats


def memory_stats(device: Device = None) -> Dict[str, int]:
    """The default allocator's statistics for ``device``, flat, with
    PyTorch's keys sorted (``allocated_bytes.all.current``, ...).

    Empty before the default allocator is built (PyTorch: not initialized);
    all zeros for a device the pool does not live on. Allocations of
    :class:`MemPool` pools on the device are included. A pluggable default
    allocator reports its get-device-stats function's statistics (see
    ``allocator().set_get_device_stats_fn``), else the counters the library
    keeps for it, both with torch_npu's keys (``num_alloc_retries``
    included)."""
    index = _default.device_index(device)
    state = _default.built_for(index)
    if state is None:
        # No default allocator yet: the MemPools alone (a graph's pool, say).
        return collections.OrderedDict(_mempool.device_stats_alone(index))
    if state.kind == "plugin":
        nested = _pluggable.device_stats(state.obj, index)
        return collections.OrderedDict(_pluggable.flatten(nested))
    if state.kind != "pool":
        return collections.OrderedDict(sorted(_allocator_stats(state).items()))
    names, values = _pools.stats(state.obj)
    if state.device != index:
        # A setting, not a count: the same for every device.
        values = [v if k == "max_split_size" else 0 for k, v in zip(names, values)]
    # MemPool allocations count in the device's statistics, as PyTorch's.
    values = _mempool.add_device_stats(names, values, index)
    return collections.OrderedDict(zip(names, values))


def memory_stats_as_nested_dict(device: Device = None) -> Dict[str, Any]:
    """:func:`memory_stats` as nested dicts (``stats["allocated_bytes"]["all"]["current"]``)."""
    nested: Dict[str, Any] = {}
    for key, value in memory_stats(device).items():
        node = nested
        *path, leaf = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def reset_peak_memory_stats(device: Device = None) -> None:
    """Sets every peak statistic of the default allocator to its current value."""
    state = _default.built_for(_default.device_index(device))
    if state is None:
        return
    if state.kind == "pool":
        rc = lib.aclallocPoolResetPeakStats(state.obj)
    elif state.kind == "plugin":
        _pluggable.reset_peak_status(state.obj, _default.device_index(device))
        return
    else:
        warnings.warn("the default allocator keeps no resettable peaks", stacklevel=2)
        return
    if rc != 0:
        raise fail("reset_peak_memory_stats", rc)


def reset_accumulated_memory_stats(device: Device = None) -> None:
    """Zeroes the accumulated statistics (``allocated``/``freed`` totals,
    retries, OOMs, device calls) of the default pool."""
    state = _default.built_for(_default.device_index(device))
    if state is None:
        return
    if state.kind != "pool":
        warnings.warn(
            f"the default allocator ({state.kind}) does not support resetAccumulatedStats",
            stacklevel=2,
        )
        return
    rc = lib.aclallocPoolResetAccumulatedStats(state.obj)
    if rc != 0:
        raise fail("reset_accumulated_memory_stats", rc)


def reset_max_memory_allocated(device: Device = None) -> None:
    """Deprecated in PyTorch: resets every peak (see :func:`reset_peak_memory_stats`)."""
    warnings.warn(
        "reset_max_memory_allocated now calls reset_peak_memory_stats, which resets "
        "/all/ peak memory stats.",
        FutureWarning,
        stacklevel=2,
    )
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device: Device = None) -> None:
    """Deprecated in PyTorch: resets every peak (see :func:`reset_peak_memory_stats`)."""
    warnings.warn(
        "reset_max_memory_cached now calls reset_peak_memory_stats, which resets "
        "/all/ peak memory stats.",
        FutureWarning,
        stacklevel=2,
    )
    reset_peak_memory_stats(device)


def memory_allocated(device: Device = None) -> int:
    """Bytes the default allocator has handed out now on ``device``."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device: Device = None) -> int:
    """The peak of :func:`memory_allocated` since start or the last peak reset."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device: Device = None) -> int:
    """Bytes the default pool holds from the device now (cached included)."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device: Device = None) -> int:
    """The peak of :func:`memory_reserved`."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def memory_cached(device: Device = None) -> int:
    """Deprecated in PyTorch: :func:`memory_reserved`."""
    warnings.warn("memory_cached has been renamed to memory_reserved", FutureWarning, stacklevel=2)
    return memory_reserved(device)


def max_memory_cached(device: Device = None) -> int:
    """Deprecated in PyTorch: :func:`max_memory_reserved`."""
    warnings.warn(
        "max_memory_cached has been renamed to max_memory_reserved", FutureWarning, stacklevel=2
    )
    return max_memory_reserved(device)


def memory_summary(device: Device = None, abbreviated: bool = False) -> str:
    """A readable table of the default pool's statistics, like PyTorch's
    (the library's ``aclallocPoolSummary``). ``abbreviated`` is accepted for
    compatibility; the table is always the full one."""
    index = _default.device_index(device)
    state = _default.built_for(index)
    if state is not None and state.kind == "pool" and state.device == index:
        return _default.c_string(lib.aclallocPoolSummary, state.obj)
    what = "not built yet" if state is None else f"{state.kind}, on device {state.device}"
    return (
        f"aclalloc memory summary, device {index}: nothing allocated here by the default "
        f"caching pool (the default allocator is {what}).\n"
    )


# -- snapshots -----------------------------------------------------------------------


def _pool_json(state: _default.Default) -> Dict[str, Any]:
    return json.loads(_default.c_string(lib.aclallocPoolSnapshot, state.obj))


def _snapshot(device: Device = None) -> Dict[str, Any]:
    """PyTorch's memory snapshot: ``{"segments": [...], "device_traces": [[...] per
    device]}``, with PyTorch's keys and integers for addresses and streams.
    Segments are the default pool's; a live block's ``frames`` are those of
    its allocation in the recorded history (see :func:`_record_memory_history`).
    ``device_traces`` holds the default pool's allocation history
    while :func:`_record_memory_history` is on: ``alloc``, ``free_requested``,
    ``free_completed``, ``segment_alloc``, ``segment_free`` and ``oom``
    entries with ``addr``, ``size``, ``stream`` and ``time_us`` (microseconds
    on the monotonic clock). ``device`` selects the segments of one device;
    the traces are always one list per device, as PyTorch's."""
    count = _default.device_count()
    state = _default.built()
    raw: Dict[str, Any] = {}
    segments: List[Dict[str, Any]] = []
    if state is not None and state.kind == "pool":
        # One pool per device: each device's segments from its own pool.
        wanted = range(count) if device is None else [_default.device_index(device)]
        for index in wanted:
            pool = _default.built_for(index)
            pool_raw = _pool_json(pool) if pool is not None else {}
            segments += _pools.segments(pool_raw, index)
            if index == state.device:
                raw = pool_raw
    elif device is not None:
        _default.device_index(device)
    return {"segments": segments, "device_traces": _history.device_traces(raw, count)}


def memory_snapshot(mempool_id: Optional[Tuple[int, int]] = None) -> List[Dict[str, Any]]:
    """The default pool's segments and their blocks (``_snapshot()["segments"]``);
    with ``mempool_id``, those of that :class:`MemPool` only."""
    if mempool_id is not None:
        return _mempool.snapshot_segments(mempool_id)
    return _snapshot()["segments"]


def _record_memory_history(
    enabled: Optional[str] = "all",
    context: Optional[str] = "all",
    stacks: str = "all",
    max_entries: Optional[int] = None,
    device: Device = None,
) -> None:
    """Starts (``enabled="all"``) or stops (None) recording the default
    pool's allocation history into ``_snapshot()["device_traces"]``, keeping
    the last ``max_entries`` events (default: 1,000,000; the ring is
    allocated now, 56 bytes per event). Each call discards what was recorded
    before. ``context`` says which carry their stack as PyTorch's ``frames``:
    ``"state"`` live blocks only, ``"alloc"`` also allocation events,
    ``"all"`` also frees, None none; ``stacks="python"`` records the Python
    frames, ``"all"`` native frames (16 deep) and then the Python ones. With
    ``enabled="state"`` the ring records too, for the live blocks' stacks,
    and its events carry none. Builds the
    default allocator if needed, as PyTorch does; warns (``RuntimeWarning``)
    when the default allocator is not the caching pool, which alone records.
    See :mod:`aclalloc.npu._history`."""
    if enabled not in (None, "state", "all"):
        raise ValueError(f"enabled must be None, 'state' or 'all', not {enabled!r}")
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f"context must be None, 'state', 'alloc' or 'all', not {context!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"stacks must be 'python' or 'all', not {stacks!r}")
    if max_entries is not None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int):
            raise TypeError("max_entries must be an int")
        if max_entries <= 0:
            raise ValueError(f"max_entries must be positive (got {max_entries})")
        if max_entries == sys.maxsize:
            max_entries = None  # PyTorch's "unbounded": the bounded default here
    _default.device_index(device)
    _history.record(enabled, max_entries, context, stacks)


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Writes :func:`_snapshot` as a pickle, which PyTorch's memory tools read
    (``torch.cuda._memory_viz``, pytorch.org/memory_viz)."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


# -- pluggable allocators --------------------------------------------------------------


def change_current_allocator(allocator: _NPUAllocator) -> None:
    """Makes ``allocator`` the default allocator, as torch_npu's
    ``change_current_allocator``. Only before the current one has served
    memory (or was built by :func:`set_per_process_memory_fraction`):
    afterwards RuntimeError ("can't swap an already initialized allocator")."""
    if not isinstance(allocator, _NPUAllocator) or not isinstance(
        allocator.allocator(), _NPUPluggableAllocator
    ):
        raise TypeError(
            f"allocator must be an NPUPluggableAllocator, not {type(allocator).__name__}"
        )
    rc = lib.aclallocSetDefaultAllocator(int(allocator.allocator()))
    if rc == ACL_ERROR_REPEAT_INITIALIZE:
        message = recent_c_message() or "can't swap an already initialized allocator"
        raise RuntimeError(f"Can't swap an already initialized allocator: {message}")
    if rc != 0:
        raise fail("aclallocSetDefaultAllocator", rc)
    _made_current[0] = allocator.allocator()


_made_current: list = [None]
"""The allocator object :func:`change_current_allocator` chose last: the
default allocator once it is built, so torch_npu's
``_get_current_allocator`` names it before its first allocation too."""


def _get_current_allocator() -> _NPUAllocator:
    """The default allocator, as torch_npu's ``_get_current_allocator``: its
    ``allocator()`` is the pluggable allocator's object when one was made
    current (from the swap on, as in torch_npu), else the default pool's
    handle (0 before it is built)."""
    state = _default.built()
    if state is not None and state.kind == "plugin" and state.obj in _pluggable.PLUGGABLES:
        return _NPUAllocator(_pluggable.PLUGGABLES[state.obj])
    if state is None and _made_current[0] is not None and _default.kind() == "plugin":
        return _NPUAllocator(_made_current[0])
    return _NPUAllocator(state.obj if state is not None else 0)


def _set_allocator_settings(env: str) -> None:
    """Allocator settings in ``PYTORCH_NPU_ALLOC_CONF``'s syntax (see
    :func:`aclalloc.npu._settings.set_allocator_settings`)."""
    _settings.set_allocator_settings(env)


def _save_segment_usage(
    filename: str = "output.svg", snapshot: Optional[Dict[str, Any]] = None
) -> None:
    """Writes an SVG of every segment and its blocks (of :func:`_snapshot`
    unless ``snapshot`` is given) to ``filename``."""
    if snapshot is None:
        snapshot = _snapshot()
    with open(filename, "w", encoding="utf-8") as f:
        f.write(_plots.segments(snapshot))


def _save_memory_usage(
    filename: str = "output.svg", snapshot: Optional[Dict[str, Any]] = None
) -> None:
    """Writes an SVG of the allocated memory by allocating frame (of
    :func:`_snapshot` unless ``snapshot`` is given) to ``filename``."""
    if snapshot is None:
        snapshot = _snapshot()
    with open(filename, "w", encoding="utf-8") as f:
        f.write(_plots.memory(snapshot))
