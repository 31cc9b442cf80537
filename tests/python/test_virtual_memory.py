"""pyACL's virtual-memory functions (``acl.rt.reserve_mem_address`` and the
functions after it in pyACL's API reference) on the host runtime: the
reserve, allocate, map sequence, its data, and its refusals."""

from __future__ import annotations

import ctypes

import pytest

from aclalloc import acl
from aclalloc.acl import rt
from conftest import HBM_PROP as PROP

MIB = 1 << 20
INVALID_PARAM, NOT_CLEARED = 100000, 148051


@pytest.fixture(autouse=True)
def device0():
    assert rt.set_device(0) == 0
    yield


def test_reserve_allocate_map_copy_and_undo():
    granularity, rc = rt.mem_get_allocation_granularity(
        PROP, rt.ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM
    )
    assert (rc, granularity) == (0, 2 * MIB)
    free_before = rt.get_mem_info(rt.ACL_HBM_MEM_HUGE)[0]
    va, rc = rt.reserve_mem_address(2 * granularity, 0, 0, 1)
    assert rc == 0 and va % granularity == 0
    handles = []
    for i in range(2):
        h, rc = rt.malloc_physical(granularity, PROP, 0)
        assert rc == 0 and h != 0
        assert rt.map_mem(va + i * granularity, granularity, 0, h, 0) == 0
        handles.append(h)
    assert rt.get_mem_info(rt.ACL_HBM_MEM_HUGE)[0] == free_before - 2 * granularity

    # One copy across both mappings, read back.
    data = bytes(range(256)) * (2 * granularity // 256 - 1)
    assert rt.memcpy(va + 128, len(data), data, len(data), 1) == 0
    back = ctypes.create_string_buffer(len(data))
    assert rt.memcpy(back, len(data), va + 128, len(data), 2) == 0
    assert back.raw == data

    # Released while mapped: refused, and nothing changes.
    assert rt.release_mem_address(va) == NOT_CLEARED
    for i, h in enumerate(handles):
        assert rt.unmap_mem(va + i * granularity) == 0
        assert rt.free_physical(h) == 0
    assert rt.release_mem_address(va) == 0
    assert rt.get_mem_info(rt.ACL_HBM_MEM_HUGE)[0] == free_before
    # Each undone twice: refused by the library, with its message.
    assert rt.free_physical(handles[0]) == INVALID_PARAM
    assert "aclrtFreePhysical" in acl.get_recent_err_msg()
    assert rt.release_mem_address(va) == INVALID_PARAM


@pytest.mark.parametrize(
    "prop, says",
    [
        (None, "expected a dict"),
        ({**PROP, "location": {"id": 0}}, "prop['location']"),
        ({**PROP, "colour": 1}, "optionally ['reserve']"),
        ({**PROP, "memAttr": "huge"}, "prop['memAttr']"),
        ({**PROP, "location": {"id": -1, "type": 1}}, "prop['location']['id']"),
    ],
)
def test_a_bad_prop_is_refused_before_c(prop, says):
    h, rc = rt.malloc_physical(2 * MIB, prop, 0)
    assert (h, rc) == (0, INVALID_PARAM)
    message = acl.get_recent_err_msg()
    assert "acl.rt.malloc_physical" in message and says in message


def test_misuse_reaches_the_library_and_is_refused():
    va, rc = rt.reserve_mem_address(2 * MIB, 0, 0, 1)
    assert rc == 0
    h, rc = rt.malloc_physical(2 * MIB, PROP, 0)
    assert rc == 0
    # Unaligned, a size other than the allocation's, a forged handle.
    assert rt.map_mem(va + 4096, 2 * MIB, 0, h, 0) == INVALID_PARAM
    assert rt.map_mem(va, 4 * MIB, 0, h, 0) == INVALID_PARAM
    assert rt.map_mem(va, 2 * MIB, 0, 0x1234, 0) == INVALID_PARAM
    assert rt.unmap_mem(va) == INVALID_PARAM, "nothing mapped there"
    assert rt.malloc_physical(3 * MIB, PROP, 0) == (0, INVALID_PARAM)
    assert rt.reserve_mem_address(-1, 0, 0, 1) == (0, INVALID_PARAM)
    assert rt.free_physical(h) == 0
    assert rt.release_mem_address(va) == 0
