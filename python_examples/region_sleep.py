"""Sleep and wake for memory the program allocates itself: a tagged region.

Inside ``with npu.region("weights"):`` the device memory this thread
allocates with plain ``aclrtMalloc`` (as torch_npu's caching allocator
does), or with ``aclrtReserveMemAddress`` + ``aclrtMallocPhysical`` +
``aclrtMapMem`` (torch_npu's expandable segments), belongs to "weights".
``npu.sleep(offload_tags=("weights",))`` copies it to host memory and gives
the device memory back, the addresses kept; ``npu.wake_up()`` maps memory
at the same addresses and restores it. The calls are pyACL's (``acl.rt``).

    python python_examples/region_sleep.py
"""

from __future__ import annotations

from aclalloc import acl, npu
from aclalloc.acl import rt

MIB = 1 << 20
H2D, D2H = 1, 2

# Device 0's HBM, pinned: aclrtPhysicalMemProp as pyACL takes it.
PROP = {
    "handleType": rt.ACL_MEM_HANDLE_TYPE_NONE,
    "allocationType": rt.ACL_MEM_ALLOCATION_TYPE_PINNED,
    "memAttr": rt.ACL_HBM_MEM_HUGE,
    "location": {"id": 0, "type": rt.ACL_MEM_LOCATION_TYPE_DEVICE},
}


def check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what}: {acl.get_recent_err_msg()}")


def value(result: tuple, what: str) -> int:
    """The value of a pyACL ``(value, ret)``."""
    check(result[-1], what)
    return result[0]


def read(address: int, size: int) -> bytes:
    out = bytearray(size)
    check(rt.memcpy(out, size, address, size, D2H), "aclrtMemcpy to the host")
    return bytes(out)


def main() -> None:
    check(rt.set_device(0), "aclrtSetDevice")
    free_start = npu.mem_get_info(0)[0]
    page = value(rt.mem_get_allocation_granularity(PROP, 0), "granularity")

    with npu.region("weights"):
        buffer = value(rt.malloc(8 * MIB), "aclrtMalloc")
        segment = value(rt.reserve_mem_address(page, 0, 0, 1), "aclrtReserveMemAddress")
        physical = value(rt.malloc_physical(page, PROP, 0), "aclrtMallocPhysical")
        check(rt.map_mem(segment, page, 0, physical, 0), "aclrtMapMem")
    weights = bytes(range(256)) * (8 * MIB // 256)
    check(rt.memcpy(buffer, 8 * MIB, weights, 8 * MIB, H2D), "aclrtMemcpy")
    check(rt.memcpy(segment, page, weights, page, H2D), "aclrtMemcpy")
    held = (free_start - npu.mem_get_info(0)[0]) >> 20
    print(f"region 'weights': buffer at {buffer:#x}, segment at {segment:#x}, {held} MiB")

    npu.sleep(offload_tags=("weights",))
    assert npu.mem_get_info(0)[0] == free_start
    print(f"asleep: device free back to {free_start >> 20} MiB")
    assert rt.memcpy(bytearray(16), 16, buffer, 16, D2H) != 0
    print(f"a copy from sleeping memory is refused: {acl.get_recent_err_msg()}")

    npu.wake_up()
    assert read(buffer, 8 * MIB) == weights
    assert read(segment, page) == weights[:page]
    print("awake: contents restored at the same addresses")

    check(rt.free(buffer), "aclrtFree")
    check(rt.unmap_mem(segment), "aclrtUnmapMem")
    check(rt.free_physical(physical), "aclrtFreePhysical")
    check(rt.release_mem_address(segment), "aclrtReleaseMemAddress")
    assert npu.mem_get_info(0)[0] == free_start
    print("region sleep and wake: ok")


if __name__ == "__main__":
    main()
