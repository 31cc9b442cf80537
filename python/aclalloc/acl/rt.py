"""``acl.rt``: devices, contexts, streams, memory and the allocator API.

Conventions are pyACL's: ints for handles, ``ret`` or ``(value, ret)``.
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
from ctypes import byref, c_int32, c_size_t, c_uint32, c_void_p
from typing import Any, Callable, Tuple, Union

from .. import _callbacks, _stacks
from .._args import BadArgument, handle, int32, refuse
from .._args import size as _size
from .._lib import lib

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
    "get_context",
    "get_device",
    "get_device_count",
    "get_mem_info",
    "malloc",
    "memcpy",
    "memset",
    "reset_device",
    "set_context",
    "set_device",
    "synchronize_device",
    "synchronize_stream",
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
