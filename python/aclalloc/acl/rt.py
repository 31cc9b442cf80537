"""``acl.rt``: devices, contexts, streams, memory, stream-ordered memory
pools and the allocator API.

Conventions are pyACL's: ints for handles, ``ret`` or ``(value, ret)``.
A C structure is given as a dict keyed by its C field names, a nested
structure as a nested dict (see :func:`mem_pool_create`).
Allocator callbacks are Python functions with pyACL's signatures::

    def alloc(allocator, size): return block          # an int; 0/None: failure
    def free(allocator, block): ...
    def advise(allocator, size, addr): return block
    def get_addr(block): return address               # an int

``allocator`` is the object given to :func:`allocator_set_obj_to_desc`
(an int, or any Python object), passed back unchanged. Callbacks run on
whichever thread the runtime uses (the launching thread or a stream's
worker); an exception in one is printed on stderr, kept for
``acl.get_recent_err_msg()``, and counts as a failed allocation (the launch
returns ``ACL_ERROR_RT_MEMORY_ALLOCATION``, 207001).

Every Python object a descriptor needs stays alive while the descriptor
does, or while a registration made with :func:`allocator_register` uses it
(as in CANN, destroying a descriptor keeps its registrations).
"""

from __future__ import annotations

import ctypes
import json
from ctypes import POINTER, byref, c_int, c_int32, c_size_t, c_uint8, c_uint32, c_uint64, c_void_p
from typing import Any, Callable, Dict, Tuple, Union

from .. import _callbacks, _errors, _stacks
from .._args import BadArgument, fields, handle, int32, refuse, unsigned
from .._args import size as _size
from .._lib import c_error, declare, lib, mirrors, query
from ._virtual_memory import (
    MemLocation,
    free_physical,
    malloc_physical,
    map_mem,
    mem_get_allocation_granularity,
    release_mem_address,
    reserve_mem_address,
    unmap_mem,
)

__all__ = [
    "allocator_create_desc",
    "allocator_destroy_desc",
    "allocator_register",
    "allocator_set_alloc_advise_func_to_desc",
    "allocator_set_alloc_func_to_desc",
    "allocator_set_free_func_to_desc",
    "allocator_set_get_addr_from_block_func_to_desc",
    "allocator_set_obj_to_desc",
    "allocator_unregister",
    "create_context",
    "create_stream",
    "destroy_context",
    "destroy_stream",
    "free",
    "free_physical",
    "get_context",
    "get_device",
    "get_device_count",
    "get_mem_info",
    "malloc",
    "malloc_physical",
    "map_mem",
    "mem_get_allocation_granularity",
    "mem_pool_create",
    "mem_pool_destroy",
    "mem_pool_free_async",
    "mem_pool_get_attr",
    "mem_pool_malloc_async",
    "mem_pool_set_attr",
    "mem_pool_snapshot",
    "mem_pool_stats",
    "mem_pool_trim_to",
    "memcpy",
    "memset",
    "release_mem_address",
    "reserve_mem_address",
    "reset_device",
    "set_context",
    "set_device",
    "synchronize_device",
    "synchronize_stream",
    "unmap_mem",
]

HostBuffer = Union[int, bytes, bytearray, memoryview, ctypes.Array]  # type: ignore[type-arg]

# -- devices and contexts -----------------------------------------------------


def set_device(device_id: int) -> int:
    """``aclrtSetDevice``: makes the device current on this thread (counted per
    process). Returns ``ret``."""
    try:
        return lib.aclrtSetDevice(int32("device_id", device_id))
    except BadArgument as e:
        return refuse("acl.rt.set_device", e)


def reset_device(device_id: int) -> int:
    """``aclrtResetDevice``: the last reset releases the device's default
    context and its streams (and their allocator registrations). Returns ``ret``."""
    try:
        rc = lib.aclrtResetDevice(int32("device_id", device_id))
    except BadArgument as e:
        return refuse("acl.rt.reset_device", e)
    _callbacks.prune()
    return rc


def get_device() -> Tuple[int, int]:
    """``aclrtGetDevice``: ``(device_id, ret)``."""
    device = c_int32(0)
    rc = lib.aclrtGetDevice(byref(device))
    return (device.value if rc == 0 else 0), rc


def get_device_count() -> Tuple[int, int]:
    """``aclrtGetDeviceCount``: ``(count, ret)``."""
    count = c_uint32(0)
    rc = lib.aclrtGetDeviceCount(byref(count))
    return (count.value if rc == 0 else 0), rc


def create_context(device_id: int) -> Tuple[int, int]:
    """``aclrtCreateContext``: a new context on the device, current on this
    thread: ``(context, ret)``."""
    try:
        device = int32("device_id", device_id)
    except BadArgument as e:
        return 0, refuse("acl.rt.create_context", e)
    context = c_void_p()
    rc = lib.aclrtCreateContext(byref(context), device)
    return (context.value or 0 if rc == 0 else 0), rc


def destroy_context(context: int) -> int:
    """``aclrtDestroyContext`` (its streams go, with their registrations)."""
    try:
        rc = lib.aclrtDestroyContext(handle("context", context))
    except BadArgument as e:
        return refuse("acl.rt.destroy_context", e)
    _callbacks.prune()
    return rc


def set_context(context: int) -> int:
    """``aclrtSetCurrentContext``: makes the context current on this thread."""
    try:
        return lib.aclrtSetCurrentContext(handle("context", context))
    except BadArgument as e:
        return refuse("acl.rt.set_context", e)


def get_context() -> Tuple[int, int]:
    """``aclrtGetCurrentContext``: ``(context, ret)``."""
    context = c_void_p()
    rc = lib.aclrtGetCurrentContext(byref(context))
    return (context.value or 0 if rc == 0 else 0), rc


# -- streams ---------------------------------------------------------------------


def create_stream() -> Tuple[int, int]:
    """``aclrtCreateStream`` in the current context: ``(stream, ret)``."""
    stream = c_void_p()
    rc = lib.aclrtCreateStream(byref(stream))
    return (stream.value or 0 if rc == 0 else 0), rc


def destroy_stream(stream: int) -> int:
    """``aclrtDestroyStream``: waits for its work; drops its allocator registration."""
    try:
        rc = lib.aclrtDestroyStream(handle("stream", stream))
    except BadArgument as e:
        return refuse("acl.rt.destroy_stream", e)
    _callbacks.prune()
    return rc


def synchronize_stream(stream: int) -> int:
    """``aclrtSynchronizeStream``: waits until the stream's work has run
    (0: the current context's default stream)."""
    try:
        return lib.aclrtSynchronizeStream(handle("stream", stream, none_ok=True) or None)
    except BadArgument as e:
        return refuse("acl.rt.synchronize_stream", e)


def synchronize_device() -> int:
    """``aclrtSynchronizeDevice``: waits for every stream of the current device."""
    return lib.aclrtSynchronizeDevice()


# -- memory ------------------------------------------------------------------------


def malloc(size: int, policy: int = 0) -> Tuple[int, int]:
    """``aclrtMalloc``: ``(dev_ptr, ret)``; ``policy`` is an
    ``aclrtMemMallocPolicy`` (0: ``ACL_MEM_MALLOC_HUGE_FIRST``)."""
    try:
        n, p = _size("size", size), int32("policy", policy)
    except BadArgument as e:
        return 0, refuse("acl.rt.malloc", e)
    ptr = c_void_p()
    rc = _stacks.call(lib.aclrtMalloc, byref(ptr), n, p)
    return (ptr.value or 0 if rc == 0 else 0), rc


def free(dev_ptr: int) -> int:
    """``aclrtFree``: a pointer not from ``malloc``, interior or freed twice is
    refused (``ACL_ERROR_INVALID_PARAM``)."""
    try:
        return _stacks.call(lib.aclrtFree, handle("dev_ptr", dev_ptr))
    except BadArgument as e:
        return refuse("acl.rt.free", e)


def _address(name: str, value: Any, writable: bool) -> Tuple[int, Any]:
    """An address: an int (trusted as pyACL trusts it for host memory; device
    ranges are checked by the library), or a Python buffer, whose address and
    length are taken from the object itself."""
    if isinstance(value, int) and not isinstance(value, bool):
        return handle(name, value) or 0, None
    try:
        view = memoryview(value)
    except TypeError:
        raise BadArgument(
            f"The argument {name} is {value!r}: expected an address (int) or a buffer."
        ) from None
    if writable and view.readonly:
        raise BadArgument(f"The argument {name} is a read-only buffer; the copy writes to it.")
    if not view.contiguous:
        raise BadArgument(f"The argument {name} is not a contiguous buffer.")
    keep = (ctypes.c_char * view.nbytes).from_buffer(view) if not view.readonly else None
    if keep is None:
        copy = ctypes.create_string_buffer(view.tobytes(), view.nbytes)
        return ctypes.addressof(copy), copy
    return ctypes.addressof(keep), keep


def memcpy(dst: HostBuffer, dest_max: int, src: HostBuffer, count: int, kind: int) -> int:
    """``aclrtMemcpy(dst, dest_max, src, count, kind)``. Host sides may be
    given as Python buffers (bytes for the source, a bytearray or writable
    array for the destination); their lengths bound the copy."""
    try:
        limit, n, k = _size("dest_max", dest_max), _size("count", count), int32("kind", kind)
        dst_addr, dst_keep = _address("dst", dst, writable=True)
        src_addr, src_keep = _address("src", src, writable=False)
        if dst_keep is not None and limit > ctypes.sizeof(dst_keep):
            raise BadArgument(f"dest_max {limit} is larger than the dst buffer.")
        if src_keep is not None and n > ctypes.sizeof(src_keep):
            raise BadArgument(f"count {n} is larger than the src buffer.")
    except BadArgument as e:
        return refuse("acl.rt.memcpy", e)
    rc = lib.aclrtMemcpy(dst_addr or None, limit, src_addr or None, n, k)
    del dst_keep, src_keep
    return rc


def memset(dev_ptr: int, max_count: int, value: int, count: int) -> int:
    """``aclrtMemset(dev_ptr, max_count, value, count)``."""
    try:
        args = (
            handle("dev_ptr", dev_ptr),
            _size("max_count", max_count),
            int32("value", value),
            _size("count", count),
        )
    except BadArgument as e:
        return refuse("acl.rt.memset", e)
    return lib.aclrtMemset(*args)


def get_mem_info(attr: int) -> Tuple[int, int, int]:
    """``aclrtGetMemInfo``: ``(free, total, ret)`` of the current device."""
    try:
        a = int32("attr", attr)
    except BadArgument as e:
        return 0, 0, refuse("acl.rt.get_mem_info", e)
    free_, total = c_size_t(0), c_size_t(0)
    rc = lib.aclrtGetMemInfo(a, byref(free_), byref(total))
    return (free_.value, total.value, rc) if rc == 0 else (0, 0, rc)


# -- stream-ordered memory pools --------------------------------------------------
#
# CANN's acl/acl_rt_memory_soma.h (docs/STREAM_ORDERED.md). pyACL's API
# reference has no Python functions for these pools; the names and shapes
# below follow its conventions for the nearest ones: C's name in snake case,
# outputs returned before ``ret``, inputs in C's order, and a structure as a
# dict of its C field names with a nested structure as a nested dict, as
# ``handle, ret = acl.rt.malloc_physical(size, prop, flags)`` takes its
# ``aclrtPhysicalMemProp`` (location ``{'id': 0, 'type':
# ACL_MEM_LOCATION_TYPE_DEVICE}``): pyACL API reference, "Function:
# malloc_physical" (aclpythondevg_01_0126) and "aclrtPhysicalMemProp"
# (aclpythondevg_01_0963).
#
# The constants are here as names of this module, not in ``__all__``, which
# lists the functions.

ACL_MEM_ALLOCATION_TYPE_PINNED = 0
ACL_MEM_HANDLE_TYPE_NONE = 0
ACL_MEM_LOCATION_TYPE_DEVICE = 1
ACL_HBM_MEM_HUGE = 4
ACL_HBM_MEM_NORMAL = 5
ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM = 0
ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1

ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1
ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC = 2
ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3
ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD = 4
ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT = 5
ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH = 6
ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT = 7
ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH = 8

_SWITCHES = frozenset(
    (
        ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES,
        ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC,
        ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
    )
)
"""The ``uint32_t`` attributes; the others are ``uint64_t``."""

_RESERVED_BYTES = 32


@mirrors("aclrtMemPoolProps")
class _MemPoolProps(ctypes.Structure):
    """``aclrtMemPoolProps``."""

    _fields_ = (
        ("allocType", c_int),
        ("handleType", c_int),
        ("location", MemLocation),
        ("maxSize", c_size_t),
        ("reserved", c_uint8 * _RESERVED_BYTES),
    )


declare(
    {
        "aclrtMemPoolCreate": (c_error, (POINTER(c_void_p), POINTER(_MemPoolProps))),
        "aclrtMemPoolDestroy": (c_error, (c_void_p,)),
        "aclrtMemPoolSetAttr": (c_error, (c_void_p, c_int, c_void_p)),
        "aclrtMemPoolGetAttr": (c_error, (c_void_p, c_int, c_void_p)),
        "aclrtMemPoolMallocAsync": (c_error, (POINTER(c_void_p), c_size_t, c_void_p, c_void_p)),
        "aclrtMemPoolFreeAsync": (c_error, (c_void_p, c_void_p)),
        "aclrtMemPoolTrimTo": (c_error, (c_void_p, c_size_t)),
    }
)


def _reserved(name: str, value: Any) -> bytes:
    """Bytes, or a list or tuple of ints from 0 to 255, at most 32 of them."""
    if isinstance(value, (bytes, bytearray)):
        raw = bytes(value)
    elif isinstance(value, (list, tuple)):
        raw = bytes(unsigned(f"{name}[{i}]", b, 8) for i, b in enumerate(value))
    else:
        raise BadArgument(
            f"The argument {name} is {value!r}: expected bytes or a list of ints from 0 to 255."
        )
    if len(raw) > _RESERVED_BYTES:
        raise BadArgument(
            f"The argument {name} has {len(raw)} bytes: aclrtMemPoolProps.reserved has "
            f"{_RESERVED_BYTES}."
        )
    return raw


def _pool_props(value: Any) -> _MemPoolProps:
    """``aclrtMemPoolProps`` from a dict of its C field names."""
    fields("pool_props", value, ("allocType", "handleType", "location", "maxSize"), ("reserved",))
    location: Dict[str, Any] = value["location"]
    fields("pool_props['location']", location, ("id", "type"), ())
    props = _MemPoolProps()
    props.allocType = int32("pool_props['allocType']", value["allocType"])
    props.handleType = int32("pool_props['handleType']", value["handleType"])
    props.location.id = unsigned("pool_props['location']['id']", location["id"], 32)
    props.location.type = int32("pool_props['location']['type']", location["type"])
    props.maxSize = _size("pool_props['maxSize']", value["maxSize"])
    raw = _reserved("pool_props['reserved']", value.get("reserved", b""))
    ctypes.memmove(props.reserved, raw, len(raw))
    return props


def mem_pool_create(pool_props: Dict[str, Any]) -> Tuple[int, int]:
    """``aclrtMemPoolCreate``: ``(mem_pool, ret)``. ``pool_props`` is
    ``aclrtMemPoolProps`` as a dict of its C field names::

        {"allocType": ACL_MEM_ALLOCATION_TYPE_PINNED,
         "handleType": ACL_MEM_HANDLE_TYPE_NONE,
         "location": {"id": 0, "type": ACL_MEM_LOCATION_TYPE_DEVICE},
         "maxSize": 0}                      # the pool's limit; 0: the device's size

    and optionally ``"reserved"`` (bytes or a list of ints, at most 32,
    zero-padded; CANN requires every byte 0). pyACL documents no binding for
    this function: the dict follows its ``acl.rt.malloc_physical`` props.
    On the host runtime the device must be the current one."""
    try:
        props = _pool_props(pool_props)
    except BadArgument as e:
        return 0, refuse("acl.rt.mem_pool_create", e)
    pool = c_void_p()
    rc = lib.aclrtMemPoolCreate(byref(pool), byref(props))
    return (pool.value or 0 if rc == 0 else 0), rc


def mem_pool_destroy(mem_pool: int) -> int:
    """``aclrtMemPoolDestroy``: refused (``ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED``,
    148051) while a block allocated from the pool is not freed, a free still
    queued on a stream included."""
    try:
        return lib.aclrtMemPoolDestroy(handle("mem_pool", mem_pool))
    except BadArgument as e:
        return refuse("acl.rt.mem_pool_destroy", e)


def mem_pool_set_attr(mem_pool: int, attr: int, value: int) -> int:
    """``aclrtMemPoolSetAttr``: ``attr`` is an ``aclrtMemPoolAttr``; ``value``
    is passed as a ``uint32_t`` for the three ``ACL_RT_MEM_POOL_REUSE_*``
    switches (0 or 1), as a ``uint64_t`` otherwise (the release threshold; 0
    to reset a ``HIGH`` figure)."""
    try:
        pool, a = handle("mem_pool", mem_pool), int32("attr", attr)
        v: Union[c_uint32, c_uint64]
        if a in _SWITCHES:
            v = c_uint32(unsigned("value", value, 32))
        else:
            v = c_uint64(unsigned("value", value, 64))
    except BadArgument as e:
        return refuse("acl.rt.mem_pool_set_attr", e)
    return lib.aclrtMemPoolSetAttr(pool, a, byref(v))


def mem_pool_get_attr(mem_pool: int, attr: int) -> Tuple[int, int]:
    """``aclrtMemPoolGetAttr``: ``(value, ret)``, the attribute read as its
    C type (``uint32_t`` for the reuse switches, ``uint64_t`` otherwise)."""
    try:
        pool, a = handle("mem_pool", mem_pool), int32("attr", attr)
    except BadArgument as e:
        return 0, refuse("acl.rt.mem_pool_get_attr", e)
    value: Union[c_uint32, c_uint64] = c_uint32(0) if a in _SWITCHES else c_uint64(0)
    rc = lib.aclrtMemPoolGetAttr(pool, a, byref(value))
    return (value.value if rc == 0 else 0), rc


def mem_pool_malloc_async(size: int, mem_pool: int, stream: int) -> Tuple[int, int]:
    """``aclrtMemPoolMallocAsync``: ``(ptr, ret)``, at once, for work queued
    on ``stream`` (0: the current context's default stream) after the call."""
    try:
        n, pool = _size("size", size), handle("mem_pool", mem_pool)
        s = handle("stream", stream, none_ok=True) or None
    except BadArgument as e:
        return 0, refuse("acl.rt.mem_pool_malloc_async", e)
    ptr = c_void_p()
    rc = _stacks.call(lib.aclrtMemPoolMallocAsync, byref(ptr), n, pool, s)
    return (ptr.value or 0 if rc == 0 else 0), rc


def mem_pool_free_async(ptr: int, stream: int) -> int:
    """``aclrtMemPoolFreeAsync``: the block goes back to its pool when
    ``stream`` (0: the default stream) reaches the free. Returns ``ret``."""
    try:
        p, s = handle("ptr", ptr), handle("stream", stream, none_ok=True) or None
    except BadArgument as e:
        return refuse("acl.rt.mem_pool_free_async", e)
    return _stacks.call(lib.aclrtMemPoolFreeAsync, p, s)


def mem_pool_trim_to(mem_pool: int, min_bytes_to_keep: int) -> int:
    """``aclrtMemPoolTrimTo``: gives free memory back until at most
    ``min_bytes_to_keep`` bytes stay reserved. Returns ``ret``."""
    try:
        pool, keep = handle("mem_pool", mem_pool), _size("min_bytes_to_keep", min_bytes_to_keep)
    except BadArgument as e:
        return refuse("acl.rt.mem_pool_trim_to", e)
    return lib.aclrtMemPoolTrimTo(pool, keep)


# aclalloc's extensions: an aclrtMemPool is one of aclalloc's caching pools,
# so aclalloc's pool functions take it (docs/STREAM_ORDERED.md, "Statistics").

_ACL_ERROR_FAILURE = 500001


def _pool_extension(
    function: str, mem_pool: Any, read: Callable[[int], Any], ask: Callable[[int], int]
) -> Tuple[Any, int]:
    """``(read(pool), 0)``, or ``(0, ret)`` when the library refuses the pool.

    ``read`` is one of ``aclalloc.npu``'s helpers, which raise with the
    library's message (taken, so cleared, from its log) but not its code. On
    a failure the message is kept under ``function`` for
    ``acl.get_recent_err_msg()`` and ``ask`` (the C function asked for a
    length only: nothing written, nothing built twice on success) gives the
    code, its own copy of the message dropped."""
    try:
        pool = handle("mem_pool", mem_pool) or 0
    except BadArgument as e:
        return 0, refuse(function, e)
    try:
        return read(pool), 0
    except RuntimeError as e:
        _errors.record(function, str(e))
        rc = query(lambda: ask(pool))
        # Not refused a second time (the first failure was not the pool's):
        # still a failure, with its message.
        return 0, rc if rc != 0 else _ACL_ERROR_FAILURE


def mem_pool_stats(mem_pool: int) -> Tuple[Union[Dict[str, int], int], int]:
    """``(stats, ret)``: the pool's statistics as PyTorch's
    ``torch.cuda.memory_stats()`` flat dict. An aclalloc extension (pyACL
    and CANN have no such function): ``aclallocPoolGetStatsKeyValues`` on
    the pool, which is one of aclalloc's caching pools.

    The keys are PyTorch's, sorted: ``"<stat>.<pool>.<kind>"`` for
    ``allocation``, ``segment``, ``active``, ``inactive_split`` (counts) and
    ``allocated_bytes``, ``reserved_bytes``, ``active_bytes``,
    ``inactive_split_bytes``, ``requested_bytes`` (bytes), with ``<pool>``
    ``all``, ``small_pool`` or ``large_pool`` and ``<kind>`` ``current``,
    ``peak``, ``allocated`` or ``freed``; ``oversize_allocations.*`` and
    ``oversize_segments.*`` (``current``, ``peak``, ``allocated``,
    ``freed``); and ``num_alloc_retries``, ``num_ooms``,
    ``num_device_alloc``, ``num_device_free``, ``num_sync_all_streams``,
    ``max_split_size``. ``allocated_bytes.all.current`` and
    ``reserved_bytes.all.current`` are the figures
    ``ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT`` and
    ``ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT`` read.

    A pool that is not live (destroyed, made up, 0) is refused by the
    library: ``(0, ACL_ERROR_INVALID_PARAM)`` and its message."""
    # Imported here: ``aclalloc.acl`` alone does not load torch_npu's API.
    from ..npu import _pools

    def read(pool: int) -> Dict[str, int]:
        names, values = _pools.stats(pool)
        return dict(zip(names, values))

    def ask(pool: int) -> int:
        return lib.aclallocPoolGetStatsKeyValues(pool, None, 0, byref(c_size_t(0)))

    return _pool_extension("acl.rt.mem_pool_stats", mem_pool, read, ask)


def mem_pool_snapshot(mem_pool: int) -> Tuple[Union[Dict[str, Any], int], int]:
    """``(snapshot, ret)``: the pool's segments and blocks, the JSON of
    ``aclallocPoolSnapshot`` parsed. An aclalloc extension (pyACL and CANN
    have no such function); the shape is PyTorch's ``_snapshot()``'s, as
    aclalloc's C function writes it::

        {"version": 2, "device": 0,
         "segments": [{"device", "address", "total_size", "stream",
                       "segment_type",            # "small" or "large"
                       "is_expandable", "mapped_size", "unmapped_size",
                       "allocated_size", "active_size", "requested_size",
                       "blocks": [{"address", "size", "requested_size",
                                   "state"}]}],   # "active_allocated"/"inactive"
         "device_traces": [[...]],                # with the history recorded
         "history": {"enabled", "max_entries", "entries", "dropped"}}

    Addresses and streams are hex strings (``int(block["address"], 16)`` is
    the pointer :func:`mem_pool_malloc_async` returned); sizes are ints. A
    block freed with :func:`mem_pool_free_async` on its own stream is
    ``inactive`` at once. A pool that is not live is refused by the
    library: ``(0, ACL_ERROR_INVALID_PARAM)`` and its message."""
    from ..npu import _default  # here, as in mem_pool_stats

    def read(pool: int) -> Dict[str, Any]:
        snapshot: Dict[str, Any] = json.loads(_default.c_string(lib.aclallocPoolSnapshot, pool))
        return snapshot

    def ask(pool: int) -> int:
        return lib.aclallocPoolSnapshot(pool, None, 0, byref(c_size_t(0)))

    return _pool_extension("acl.rt.mem_pool_snapshot", mem_pool, read, ask)


# -- the allocator API -----------------------------------------------------------


def allocator_create_desc() -> int:
    """``aclrtAllocatorCreateDesc``: a new descriptor (0 on failure)."""
    return lib.aclrtAllocatorCreateDesc() or 0


def allocator_destroy_desc(desc: int) -> int:
    """``aclrtAllocatorDestroyDesc``: registrations made from it stay, and keep
    their Python objects alive."""
    try:
        return _callbacks.destroy_desc(handle("allocatorDesc", desc))  # type: ignore[arg-type]
    except BadArgument as e:
        return refuse("acl.rt.allocator_destroy_desc", e)


def allocator_set_obj_to_desc(desc: int, allocator: Any) -> int:
    """``aclrtAllocatorSetObjToDesc``: ``allocator`` (an int or any object) is
    what the callbacks receive. None is refused, as CANN refuses NULL."""
    try:
        d = handle("allocatorDesc", desc)
        if allocator is None:
            raise BadArgument("The argument allocator is None: expected an object.")
    except BadArgument as e:
        return refuse("acl.rt.allocator_set_obj_to_desc", e)
    return _callbacks.set_field(d, "obj", allocator)  # type: ignore[arg-type]


def _set_function(function: str, field: str, desc: int, func: Callable[..., Any]) -> int:
    try:
        d = handle("allocatorDesc", desc)
        if not callable(func):
            raise BadArgument(f"The argument func is {func!r}: expected a callable.")
    except BadArgument as e:
        return refuse(function, e)
    return _callbacks.set_field(d, field, func)  # type: ignore[arg-type]


def allocator_set_alloc_func_to_desc(desc: int, func: Callable[[Any, int], int]) -> int:
    """``aclrtAllocatorSetAllocFuncToDesc``: ``func(allocator, size) -> block``."""
    return _set_function("acl.rt.allocator_set_alloc_func_to_desc", "alloc", desc, func)


def allocator_set_free_func_to_desc(desc: int, func: Callable[[Any, int], None]) -> int:
    """``aclrtAllocatorSetFreeFuncToDesc``: ``func(allocator, block)``."""
    return _set_function("acl.rt.allocator_set_free_func_to_desc", "free", desc, func)


def allocator_set_alloc_advise_func_to_desc(desc: int, func: Callable[[Any, int, int], int]) -> int:
    """``aclrtAllocatorSetAllocAdviseFuncToDesc``: ``func(allocator, size, addr) -> block``."""
    return _set_function("acl.rt.allocator_set_alloc_advise_func_to_desc", "advise", desc, func)


def allocator_set_get_addr_from_block_func_to_desc(desc: int, func: Callable[[int], int]) -> int:
    """``aclrtAllocatorSetGetAddrFromBlockFuncToDesc``: ``func(block) -> address``."""
    return _set_function(
        "acl.rt.allocator_set_get_addr_from_block_func_to_desc", "get_addr", desc, func
    )


def allocator_register(stream: int, desc: int) -> int:
    """``aclrtAllocatorRegister``: the stream's launches use a copy of the
    descriptor as it is now; the last registration wins."""
    try:
        s, d = handle("stream", stream), handle("allocatorDesc", desc)
    except BadArgument as e:
        return refuse("acl.rt.allocator_register", e)
    return _callbacks.register(s, d)  # type: ignore[arg-type]


def allocator_unregister(stream: int) -> int:
    """``aclrtAllocatorUnregister``: the stream goes back to the default allocator."""
    try:
        s = handle("stream", stream)
    except BadArgument as e:
        return refuse("acl.rt.allocator_unregister", e)
    return _callbacks.unregister(s)  # type: ignore[arg-type]
