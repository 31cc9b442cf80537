"""aclalloc.npu.region: memory the program allocates itself (plain
aclrtMalloc, and reserve + aclrtMallocPhysical + aclrtMapMem as torch_npu's
expandable segments) inside ``with npu.region(tag):`` sleeps and wakes with
npu.sleep / npu.wake_up, on the host runtime."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_int, c_size_t, c_void_p

import pytest

from aclalloc import npu
from aclalloc._lib import lib, recent_c_message
from aclalloc.acl import rt
from conftest import HBM_PROP as PROP

MIB = 1 << 20
PAGE = 2 * MIB
H2D, D2H = 1, 2


# A private handle on the library: these declarations are this file's.
_lib = ctypes.CDLL(lib._name)
for name, argtypes in [
    ("aclrtMalloc", (c_void_p, c_size_t, c_int)),
    ("aclrtFree", (c_void_p,)),
    ("aclrtMemcpy", (c_void_p, c_size_t, c_void_p, c_size_t, c_int)),
    ("aclallocRegionEnd", ()),
]:
    getattr(_lib, name).argtypes = argtypes
    getattr(_lib, name).restype = c_int


@pytest.fixture(autouse=True)
def device0():
    assert _lib.aclrtSetDevice(0) == 0
    yield
    npu.wake_up()


def ok(rc: int) -> None:
    assert rc == 0, recent_c_message()


def malloc(size: int) -> int:
    p = c_void_p()
    ok(_lib.aclrtMalloc(byref(p), size, 0))
    return p.value


def pattern(size: int, seed: int) -> bytes:
    return bytes((i * 7 + seed) & 0xFF for i in range(256)) * (size // 256)


def put(address: int, data: bytes) -> None:
    ok(_lib.aclrtMemcpy(address, len(data), data, len(data), H2D))


def get(address: int, size: int) -> bytes:
    out = ctypes.create_string_buffer(size)
    ok(_lib.aclrtMemcpy(out, size, address, size, D2H))
    return out.raw


def refused(address: int, tag: str) -> None:
    out = ctypes.create_string_buffer(16)
    assert _lib.aclrtMemcpy(out, 16, address, 16, D2H) != 0
    assert f'"{tag}"' in recent_c_message()


class Segment:
    """A torch_npu-style expandable segment of `pages` pages, made with
    pyACL's virtual-memory functions."""

    def __init__(self, pages: int):
        self.va, rc = rt.reserve_mem_address(pages * PAGE, 0, 0, 1)
        ok(rc)
        self.handles = []
        for i in range(pages):
            h, rc = rt.malloc_physical(PAGE, PROP, 0)
            ok(rc)
            ok(rt.map_mem(self.va + i * PAGE, PAGE, 0, h, 0))
            self.handles.append(h)
        self.size = pages * PAGE

    def release(self) -> None:
        for i, h in enumerate(self.handles):
            ok(rt.unmap_mem(self.va + i * PAGE))
            ok(rt.free_physical(h))
        ok(rt.release_mem_address(self.va))


def test_offloaded_region_memory_wakes_with_its_contents():
    free_start = npu.mem_get_info(0)[0]
    with npu.region("weights") as tag:
        assert tag == "weights"
        buf = malloc(6 * MIB)
        seg = Segment(2)
    put(buf, pattern(6 * MIB, 1))
    put(seg.va, pattern(seg.size, 2))
    npu.sleep(offload_tags="weights")
    assert npu.mem_get_info(0)[0] == free_start
    refused(buf, "weights")
    refused(seg.va + PAGE, "weights")
    npu.wake_up()
    assert get(buf, 6 * MIB) == pattern(6 * MIB, 1)
    assert get(seg.va, seg.size) == pattern(seg.size, 2)
    ok(_lib.aclrtFree(buf))
    seg.release()
    assert npu.mem_get_info(0)[0] == free_start


def test_discarded_tags_wake_fresh_and_tags_wake_apart():
    with npu.region("kv"):
        kv = malloc(2 * MIB)
        with npu.region("inner"):
            inner = malloc(2 * MIB)
    put(kv, pattern(2 * MIB, 3))
    put(inner, pattern(2 * MIB, 4))
    npu.sleep(offload_tags=["inner"])
    npu.wake_up(tags=["kv"])
    assert get(kv, 2 * MIB) == bytes(2 * MIB), "discarded: fresh memory"
    refused(inner, "inner")
    npu.wake_up(tags=("inner",))
    assert get(inner, 2 * MIB) == pattern(2 * MIB, 4)
    for p in (kv, inner):
        ok(_lib.aclrtFree(p))


def test_region_memory_is_freed_while_asleep():
    free_start = npu.mem_get_info(0)[0]
    with npu.region("frees"):
        buf = malloc(MIB)
        seg = Segment(1)
    npu.sleep()
    ok(_lib.aclrtFree(buf))
    seg.release()
    assert npu.mem_get_info(0)[0] == free_start


def test_a_wake_short_of_memory_raises_and_leaves_everything_asleep():
    with npu.region("oom"):
        a = malloc(8 * MIB)
        b = malloc(8 * MIB)
    put(a, pattern(8 * MIB, 5))
    put(b, pattern(8 * MIB, 6))
    npu.sleep(offload_tags=("oom",))
    hog = malloc(npu.mem_get_info(0)[0] - 12 * MIB)
    room = npu.mem_get_info(0)[0]
    with pytest.raises(npu.OutOfMemoryError):
        npu.wake_up()
    assert npu.mem_get_info(0)[0] == room, "what woke went back to sleep"
    refused(a, "oom")
    refused(b, "oom")
    ok(_lib.aclrtFree(hog))
    npu.wake_up()
    assert get(a, 8 * MIB) == pattern(8 * MIB, 5)
    assert get(b, 8 * MIB) == pattern(8 * MIB, 6)
    for p in (a, b):
        ok(_lib.aclrtFree(p))


def test_the_region_closes_when_the_block_raises():
    with pytest.raises(KeyError), npu.region("raising"):
        raise KeyError("inside")
    plain = malloc(MIB)
    put(plain, pattern(MIB, 7))
    npu.sleep()
    assert get(plain, MIB) == pattern(MIB, 7), "not region memory"
    ok(_lib.aclrtFree(plain))
    # No region is left open: an end without a begin is refused.
    assert _lib.aclallocRegionEnd() != 0
    assert "aclallocRegionBegin" in recent_c_message()


def test_bad_tags_are_refused():
    with pytest.raises(ValueError), npu.region(""):
        pass
    with pytest.raises(TypeError), npu.region(b"bytes"):  # type: ignore[arg-type]
        pass
    assert "region" in npu.__all__
