"""Sleep and wake for memory the program allocates itself: a tagged region.

Inside ``with npu.region("weights"):`` the device memory this thread
allocates with plain ``aclrtMalloc`` (as torch_npu's caching allocator
does), or with ``aclrtReserveMemAddress`` + ``aclrtMallocPhysical`` +
``aclrtMapMem`` (torch_npu's expandable segments), belongs to "weights".
``npu.sleep(offload_tags=("weights",))`` copies it to host memory and gives
the device memory back, the addresses kept; ``npu.wake_up()`` maps memory
at the same addresses and restores it.

    python python_examples/region_sleep.py
"""

from __future__ import annotations

import ctypes
from ctypes import byref, c_int, c_size_t, c_uint32, c_uint64, c_void_p

from aclalloc import npu
from aclalloc._lib import lib, recent_c_message

MIB = 1 << 20
PAGE = 2 * MIB
H2D, D2H = 1, 2


class MemLocation(ctypes.Structure):
    """aclrtMemLocation."""

    _fields_ = [("id", c_uint32), ("type", c_int)]


class PhysicalMemProp(ctypes.Structure):
    """aclrtPhysicalMemProp: device 0's HBM, pinned (ACL_HBM_MEM_HUGE is 4)."""

    _fields_ = [
        ("handleType", c_int),
        ("allocationType", c_int),
        ("memAttr", c_int),
        ("location", MemLocation),
        ("reserve", c_uint64),
    ]


lib.aclrtMalloc.argtypes = (c_void_p, c_size_t, c_int)
lib.aclrtFree.argtypes = (c_void_p,)
lib.aclrtMemcpy.argtypes = (c_void_p, c_size_t, c_void_p, c_size_t, c_int)
lib.aclrtReserveMemAddress.argtypes = (c_void_p, c_size_t, c_size_t, c_void_p, c_uint64)
lib.aclrtReleaseMemAddress.argtypes = (c_void_p,)
lib.aclrtMallocPhysical.argtypes = (c_void_p, c_size_t, c_void_p, c_uint64)
lib.aclrtFreePhysical.argtypes = (c_void_p,)
lib.aclrtMapMem.argtypes = (c_void_p, c_size_t, c_size_t, c_void_p, c_uint64)
lib.aclrtUnmapMem.argtypes = (c_void_p,)


def check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what}: {recent_c_message()}")


def read(address: int, size: int) -> bytes:
    out = ctypes.create_string_buffer(size)
    check(lib.aclrtMemcpy(out, size, address, size, D2H), "aclrtMemcpy to the host")
    return out.raw


def main() -> None:
    check(lib.aclrtSetDevice(0), "aclrtSetDevice")
    free_start = npu.mem_get_info(0)[0]
    prop = PhysicalMemProp(handleType=0, allocationType=0, memAttr=4)
    prop.location = MemLocation(id=0, type=1)

    with npu.region("weights"):
        buffer = c_void_p()
        check(lib.aclrtMalloc(byref(buffer), 8 * MIB, 0), "aclrtMalloc")
        segment, page = c_void_p(), c_void_p()
        check(lib.aclrtReserveMemAddress(byref(segment), PAGE, 0, None, 1), "reserve")
        check(lib.aclrtMallocPhysical(byref(page), PAGE, byref(prop), 0), "physical")
        check(lib.aclrtMapMem(segment, PAGE, 0, page, 0), "aclrtMapMem")
    weights = bytes(range(256)) * (8 * MIB // 256)
    check(lib.aclrtMemcpy(buffer, 8 * MIB, weights, 8 * MIB, H2D), "aclrtMemcpy")
    check(lib.aclrtMemcpy(segment, PAGE, weights, PAGE, H2D), "aclrtMemcpy")
    held = (free_start - npu.mem_get_info(0)[0]) >> 20
    print(
        f"region 'weights': buffer at {buffer.value:#x}, segment at {segment.value:#x}, {held} MiB"
    )

    npu.sleep(offload_tags=("weights",))
    assert npu.mem_get_info(0)[0] == free_start
    print(f"asleep: device free back to {free_start >> 20} MiB")
    rc = lib.aclrtMemcpy(weights, 16, buffer, 16, D2H)
    assert rc != 0
    print(f"a copy from sleeping memory is refused: {recent_c_message()}")

    npu.wake_up()
    assert read(buffer.value, 8 * MIB) == weights
    assert read(segment.value, PAGE) == weights[:PAGE]
    print("awake: contents restored at the same addresses")

    check(lib.aclrtFree(buffer), "aclrtFree")
    check(lib.aclrtUnmapMem(segment), "aclrtUnmapMem")
    check(lib.aclrtFreePhysical(page), "aclrtFreePhysical")
    check(lib.aclrtReleaseMemAddress(segment), "aclrtReleaseMemAddress")
    assert npu.mem_get_info(0)[0] == free_start
    print("region sleep and wake: ok")


if __name__ == "__main__":
    main()
