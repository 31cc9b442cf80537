"""torch_npu's ``MemPool`` and ``use_mem_pool`` over ``aclallocMemPool*``.

A :class:`MemPool` is a caching pool per device (made when it first serves
there) whose segments come from the device or from an
:class:`NPUPluggableAllocator`. Inside ``with use_mem_pool(pool):`` the
current thread's allocations on that device (``caching_allocator_alloc``)
come from it; a block keeps its pool after the context, and its free goes
back there from any thread. When the MemPool object is gone, its memory goes
back once its blocks are freed.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import weakref
from ctypes import POINTER, byref, c_char_p, c_int, c_int32, c_size_t, c_uint64, c_void_p
from typing import Any, Dict, Iterator, List, Optional, Tuple

from .._lib import declare, lib, mirrors
from . import _default, _pools
from ._default import fail
from ._pluggable import NPUPluggableAllocator, _NPUPluggableAllocator


@mirrors("aclallocMemPoolOptions")
class _Options(ctypes.Structure):
    """``aclallocMemPoolOptions``."""

    _fields_ = (
        ("allocator", c_void_p),
        ("useOnOom", c_int32),
        ("noSplit", c_int32),
        ("tag", c_char_p),
    )


declare(
    {
        "aclallocMemPoolCreate": (c_int, (POINTER(_Options), POINTER(c_void_p))),
        "aclallocMemPoolDestroy": (c_int, (c_void_p,)),
        "aclallocMemPoolGetId": (c_int, (c_void_p, POINTER(c_uint64))),
        "aclallocMemPoolUseCount": (c_int, (c_void_p, POINTER(c_uint64))),
        "aclallocMemPoolBeginUse": (c_int, (c_void_p, c_int32)),
        "aclallocMemPoolEndUse": (c_int, (c_void_p, c_int32)),
        "aclallocMemPoolSnapshot": (c_int, (c_void_p, c_char_p, c_size_t, POINTER(c_size_t))),
        "aclallocMemPoolGetDevicePool": (c_int, (c_void_p, c_int32, POINTER(c_void_p))),
        "aclallocMemPoolListDevicePools": (
            c_int,
            (c_int32, POINTER(c_void_p), c_size_t, POINTER(c_size_t)),
        ),
    }
)

_POOLS: weakref.WeakValueDictionary[int, MemPool] = weakref.WeakValueDictionary()
"""Live MemPool objects by the second number of their id."""


def _check(function: str, rc: int) -> None:
    if rc != 0:
        raise fail(function, rc)


def _pluggable_handle(allocator: Any) -> Optional[int]:
    """The ``aclallocPluggable`` handle of what torch_npu's ``MemPool`` takes:
    an :class:`NPUPluggableAllocator`, its allocator object (``_allocator``,
    ``allocator()``), or None (no handle: device memory)."""
    if allocator is None:
        return None
    if isinstance(allocator, NPUPluggableAllocator):
        return allocator.handle()
    if isinstance(allocator, _NPUPluggableAllocator):
        return allocator._handle
    raise TypeError(
        "allocator must be an NPUPluggableAllocator, its allocator object "
        f"(_allocator) or None, not {type(allocator).__name__}"
    )


class MemPool:
    """A pool of memory in the caching allocator, as torch_npu's
    ``MemPool(allocator=None, use_on_oom=False, no_split=False)``.

    ``allocator``: an :class:`NPUPluggableAllocator`, or its allocator object
    (``new_alloc._allocator``, ``new_alloc.allocator()``, as serving engines
    pass it), whose alloc and free give the pool its segments (None: device
    memory). ``use_on_oom``: when the
    default pool is out of memory, this pool's cached blocks serve the
    request. ``no_split``: blocks are never split. ``tag``: a label of what
    is allocated through the pool.
    """

    def __init__(
        self,
        allocator: Any = None,
        use_on_oom: bool = False,
        no_split: bool = False,
        tag: Optional[str] = None,
    ) -> None:
        plugin = _pluggable_handle(allocator)
        for name, value in (("use_on_oom", use_on_oom), ("no_split", no_split)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
        if tag is not None:
            if not isinstance(tag, str):
                raise TypeError(f"tag must be a str or None, not {type(tag).__name__}")
            if not tag or "\0" in tag:
                raise ValueError("tag must be a non-empty string without NUL")
        options = _Options(
            plugin,
            int(use_on_oom),
            int(no_split),
            tag.encode() if tag is not None else None,
        )
        handle = c_void_p()
        _check("aclallocMemPoolCreate", lib.aclallocMemPoolCreate(byref(options), byref(handle)))
        self._handle: int = handle.value or 0
        number = c_uint64(0)
        _check("aclallocMemPoolGetId", lib.aclallocMemPoolGetId(self._handle, byref(number)))
        self._id: Tuple[int, int] = (0, number.value)
        self._allocator = allocator
        self._use_on_oom = use_on_oom
        self._no_split = no_split
        self._tag = tag
        _POOLS[number.value] = self

    @property
    def id(self) -> Tuple[int, int]:
        """The pool's id, ``(0, n)`` as torch_npu's."""
        return self._id

    @property
    def allocator(self) -> Any:
        """The pluggable allocator the pool takes its segments from, or None."""
        return self._allocator

    @property
    def tag(self) -> Optional[str]:
        """The pool's tag, or None."""
        return self._tag

    @property
    def use_on_oom(self) -> bool:
        return self._use_on_oom

    @property
    def no_split(self) -> bool:
        return self._no_split

    def use_count(self) -> int:
        """The pool's reference count: 1, plus each ``use_mem_pool`` context
        inside it now (on any thread)."""
        count = c_uint64(0)
        _check("aclallocMemPoolUseCount", lib.aclallocMemPoolUseCount(self._handle, byref(count)))
        return count.value

    def snapshot(self) -> List[Dict[str, Any]]:
        """The pool's segments on every device (``memory_snapshot(self.id)``)."""
        return snapshot_segments(self._id)

    def device_pool(self, device: int) -> Optional[int]:
        """The ``aclallocPool`` serving this pool on ``device``, if any."""
        pool = c_void_p()
        _check(
            "aclallocMemPoolGetDevicePool",
            lib.aclallocMemPoolGetDevicePool(self._handle, device, byref(pool)),
        )
        return pool.value or None

    def __del__(self) -> None:
        handle, self._handle = getattr(self, "_handle", 0), 0
        if handle:
            # At interpreter exit the library's module may be torn down first.
            with contextlib.suppress(Exception):
                lib.aclallocMemPoolDestroy(handle)

    def __repr__(self) -> str:
        return f"MemPool(id={self._id}, tag={self._tag!r})"


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device: Any = None) -> Iterator[None]:
    """Routes the current thread's allocations on ``device`` (None: the
    current device) to ``pool`` inside the context, as torch_npu's
    ``use_mem_pool``. Other threads are not routed; contexts nest."""
    if not isinstance(pool, MemPool):
        raise TypeError(f"pool must be a MemPool, not {type(pool).__name__}")
    index = _default.device_index(device)
    _check("aclallocMemPoolBeginUse", lib.aclallocMemPoolBeginUse(pool._handle, index))
    try:
        yield
    finally:
        _check("aclallocMemPoolEndUse", lib.aclallocMemPoolEndUse(pool._handle, index))


def _pool_of(mempool_id: Any) -> MemPool:
    valid = (
        isinstance(mempool_id, tuple)
        and len(mempool_id) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) for n in mempool_id)
    )
    if not valid:
        raise TypeError(f"mempool_id must be a tuple of two ints, not {mempool_id!r}")
    pool = _POOLS.get(mempool_id[1]) if mempool_id[0] == 0 else None
    if pool is None:
        raise ValueError(f"no live MemPool has the id {mempool_id}")
    return pool


def snapshot_segments(mempool_id: Any) -> List[Dict[str, Any]]:
    """The segments of the MemPool ``mempool_id``, in ``memory_snapshot``'s
    shape, with ``segment_pool_id`` its id."""
    pool = _pool_of(mempool_id)
    raw = json.loads(_default.c_string(lib.aclallocMemPoolSnapshot, pool._handle))
    segments = []
    for segment in _pools.segments(raw, 0):
        segment["segment_pool_id"] = pool.id
        segments.append(segment)
    return segments


def _device_pools(device: int) -> List[int]:
    """The caching pools of every MemPool on ``device``, including those of
    MemPools gone whose blocks are not all freed."""
    count = c_size_t(0)
    _check(
        "aclallocMemPoolListDevicePools",
        lib.aclallocMemPoolListDevicePools(device, None, 0, byref(count)),
    )
    while True:
        handles = (c_void_p * count.value)()
        wanted = count.value
        _check(
            "aclallocMemPoolListDevicePools",
            lib.aclallocMemPoolListDevicePools(device, handles, wanted, byref(count)),
        )
        if count.value <= wanted:
            return [h for h in handles[: count.value] if h]


def add_device_stats(names: List[str], values: List[int], device: int) -> List[int]:
    """``values`` (the default pool's statistics on ``device``, keyed by
    ``names``) with those of every MemPool's pool on that device added (also
    of MemPools gone whose blocks are not all freed), as PyTorch counts every
    pool of a device. Counts and totals add exactly; a peak becomes the sum
    of the pools' peaks (an upper bound of the device's); settings stay."""
    total = list(values)
    for handle in _device_pools(device):
        their_names, theirs = _pools.stats(handle)
        by_name = dict(zip(their_names, theirs))
        for i, name in enumerate(names):
            if name != "max_split_size" and name in by_name:
                total[i] += by_name[name]
    return total


def device_stats_alone(device: int) -> List[Tuple[str, int]]:
    """The statistics of every MemPool's pool on ``device`` added up, when
    the device has no default pool to add them to (none: empty)."""
    handles = _device_pools(device)
    if not handles:
        return []
    names, first = _pools.stats(handles[0])
    zeros = [v if k == "max_split_size" else 0 for k, v in zip(names, first)]
    return list(zip(names, add_device_stats(names, zeros, device)))
