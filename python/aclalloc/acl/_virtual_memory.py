"""``acl.rt``'s virtual-memory functions: reserve address space, allocate
physical memory, map one onto the other (how torch_npu's expandable
segments get their memory).

Names, arguments and returns are pyACL's (API reference, "Function:
reserve_mem_address" and the functions after it); ``prop`` is
``aclrtPhysicalMemProp`` as a dict of its C field names::

    {"handleType": ACL_MEM_HANDLE_TYPE_NONE,
     "allocationType": ACL_MEM_ALLOCATION_TYPE_PINNED,
     "memAttr": ACL_HBM_MEM_HUGE,
     "location": {"id": 0, "type": ACL_MEM_LOCATION_TYPE_DEVICE}}

with ``"reserve"`` optional (0). Inside ``aclalloc.npu.region(tag)`` the
memory belongs to the tag and sleeps with it.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, byref, c_int, c_size_t, c_uint32, c_uint64, c_void_p
from typing import Any, Dict, Tuple

from .._args import BadArgument, fields, int32, refuse, unsigned
from .._args import handle as _handle
from .._args import size as _size
from .._lib import c_error, declare, lib, mirrors


@mirrors("aclrtMemLocation")
class MemLocation(ctypes.Structure):
    """``aclrtMemLocation``."""

    _fields_ = (("id", c_uint32), ("type", c_int))


@mirrors("aclrtPhysicalMemProp")
class PhysicalMemProp(ctypes.Structure):
    """``aclrtPhysicalMemProp``."""

    _fields_ = (
        ("handleType", c_int),
        ("allocationType", c_int),
        ("memAttr", c_int),
        ("location", MemLocation),
        ("reserve", c_uint64),
    )


declare(
    {
        "aclrtReserveMemAddress": (
            c_error,
            (POINTER(c_void_p), c_size_t, c_size_t, c_void_p, c_uint64),
        ),
        "aclrtReleaseMemAddress": (c_error, (c_void_p,)),
        "aclrtMallocPhysical": (
            c_error,
            (POINTER(c_void_p), c_size_t, POINTER(PhysicalMemProp), c_uint64),
        ),
        "aclrtFreePhysical": (c_error, (c_void_p,)),
        "aclrtMapMem": (c_error, (c_void_p, c_size_t, c_size_t, c_void_p, c_uint64)),
        "aclrtUnmapMem": (c_error, (c_void_p,)),
        "aclrtMemGetAllocationGranularity": (
            c_error,
            (POINTER(PhysicalMemProp), c_int, POINTER(c_size_t)),
        ),
    }
)


def _prop(value: Any) -> PhysicalMemProp:
    """``aclrtPhysicalMemProp`` from a dict of its C field names."""
    fields("prop", value, ("handleType", "allocationType", "memAttr", "location"), ("reserve",))
    location: Dict[str, Any] = value["location"]
    fields("prop['location']", location, ("id", "type"), ())
    prop = PhysicalMemProp()
    prop.handleType = int32("prop['handleType']", value["handleType"])
    prop.allocationType = int32("prop['allocationType']", value["allocationType"])
    prop.memAttr = int32("prop['memAttr']", value["memAttr"])
    prop.location.id = unsigned("prop['location']['id']", location["id"], 32)
    prop.location.type = int32("prop['location']['type']", location["type"])
    prop.reserve = unsigned("prop['reserve']", value.get("reserve", 0), 64)
    return prop


def reserve_mem_address(size: int, alignment: int, expect_ptr: int, flags: int) -> Tuple[int, int]:
    """``aclrtReserveMemAddress``: ``(vir_ptr, ret)``, address space of
    ``size`` bytes (a multiple of the granularity) with nothing mapped;
    ``alignment`` and ``expect_ptr`` as CANN takes them (0), ``flags`` the
    page type (0 normal, 1 huge)."""
    try:
        args = (
            _size("size", size),
            _size("alignment", alignment),
            _handle("expect_ptr", expect_ptr, none_ok=True),
            unsigned("flags", flags, 64),
        )
    except BadArgument as e:
        return 0, refuse("acl.rt.reserve_mem_address", e)
    va = c_void_p()
    rc = lib.aclrtReserveMemAddress(byref(va), *args)
    return (va.value or 0 if rc == 0 else 0), rc


def release_mem_address(vir_ptr: int) -> int:
    """``aclrtReleaseMemAddress``: refused (``ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED``,
    148051) while memory is mapped in the range."""
    try:
        return lib.aclrtReleaseMemAddress(_handle("vir_ptr", vir_ptr))
    except BadArgument as e:
        return refuse("acl.rt.release_mem_address", e)


def malloc_physical(size: int, prop: Dict[str, Any], flags: int) -> Tuple[int, int]:
    """``aclrtMallocPhysical``: ``(handle, ret)``, ``size`` bytes (a multiple
    of the granularity) of the device ``prop['location']['id']``; ``flags`` 0."""
    try:
        n, p, f = _size("size", size), _prop(prop), unsigned("flags", flags, 64)
    except BadArgument as e:
        return 0, refuse("acl.rt.malloc_physical", e)
    h = c_void_p()
    rc = lib.aclrtMallocPhysical(byref(h), n, byref(p), f)
    return (h.value or 0 if rc == 0 else 0), rc


def free_physical(handle: int) -> int:
    """``aclrtFreePhysical``: mapped memory goes at its last unmap."""
    try:
        return lib.aclrtFreePhysical(_handle("handle", handle))
    except BadArgument as e:
        return refuse("acl.rt.free_physical", e)


def map_mem(vir_ptr: int, size: int, offset: int, handle: int, flags: int) -> int:
    """``aclrtMapMem``: maps all of the physical memory ``handle`` (``size``
    its size, ``offset`` and ``flags`` 0) at ``vir_ptr``, inside a
    reservation, over no other mapping."""
    try:
        args = (
            _handle("vir_ptr", vir_ptr),
            _size("size", size),
            _size("offset", offset),
            _handle("handle", handle),
            unsigned("flags", flags, 64),
        )
    except BadArgument as e:
        return refuse("acl.rt.map_mem", e)
    return lib.aclrtMapMem(*args)


def unmap_mem(vir_ptr: int) -> int:
    """``aclrtUnmapMem``: the range is reserved again; pending stream work
    on it runs first."""
    try:
        return lib.aclrtUnmapMem(_handle("vir_ptr", vir_ptr))
    except BadArgument as e:
        return refuse("acl.rt.unmap_mem", e)


def mem_get_allocation_granularity(prop: Dict[str, Any], option: int) -> Tuple[int, int]:
    """``aclrtMemGetAllocationGranularity``: ``(granularity, ret)`` for memory
    described by ``prop``; ``option`` an ``aclrtMemGranularityOptions``
    (0 minimum, 1 recommended)."""
    try:
        p, o = _prop(prop), int32("option", option)
    except BadArgument as e:
        return 0, refuse("acl.rt.mem_get_allocation_granularity", e)
    g = c_size_t()
    rc = lib.aclrtMemGetAllocationGranularity(byref(p), o, byref(g))
    return (g.value if rc == 0 else 0), rc
