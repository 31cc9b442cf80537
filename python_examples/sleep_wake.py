"""Sleep and wake: give a model's device memory back between uses, keeping
its addresses.

A pool tagged "weights" (tagged before its first allocation, here through
the C API: aclallocPoolCreate + aclallocPoolSetTag) holds a "weight" tensor.
``npu.sleep(offload_tags=("weights",))`` copies it to host memory and gives
the device memory back; ``npu.wake_up()`` maps memory at the same address
and restores it.

    python python_examples/sleep_wake.py
"""

from __future__ import annotations

import ctypes
from ctypes import byref, c_char_p, c_int, c_size_t, c_void_p

from aclalloc import npu
from aclalloc._lib import lib, recent_c_message

SIZE = 64 << 20

lib.aclallocPoolCreate.argtypes = (c_void_p, c_void_p, c_void_p)
lib.aclallocPoolSetTag.argtypes = (c_void_p, c_char_p)
lib.aclallocPoolAlloc.restype = c_void_p
lib.aclallocPoolAlloc.argtypes = (c_void_p, c_size_t)
lib.aclallocPoolGetAddrFromBlock.restype = c_void_p
lib.aclallocPoolGetAddrFromBlock.argtypes = (c_void_p,)
lib.aclallocPoolFree.argtypes = (c_void_p, c_void_p)
lib.aclallocPoolDestroy.argtypes = (c_void_p,)
lib.aclrtMemcpy.argtypes = (c_void_p, c_size_t, c_void_p, c_size_t, c_int)


def check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what}: {recent_c_message()}")


def main() -> None:
    check(lib.aclrtSetDevice(0), "aclrtSetDevice")
    free_start = npu.mem_get_info(0)[0]

    pool, desc = c_void_p(), c_void_p()
    check(lib.aclallocPoolCreate(None, byref(pool), byref(desc)), "aclallocPoolCreate")
    check(lib.aclallocPoolSetTag(pool, b"weights"), "aclallocPoolSetTag")
    block = lib.aclallocPoolAlloc(pool, SIZE)
    weights = lib.aclallocPoolGetAddrFromBlock(block)
    data = bytes(range(256)) * (SIZE // 256)
    check(lib.aclrtMemcpy(weights, SIZE, data, SIZE, 1), "aclrtMemcpy to the device")
    print(f"weights at {weights:#x}: device free {npu.mem_get_info(0)[0] >> 20} MiB")

    npu.sleep(offload_tags=("weights",))
    free_asleep = npu.mem_get_info(0)[0]
    print(f"asleep: device free {free_asleep >> 20} MiB (all of it given back)")
    assert free_asleep == free_start
    rc = lib.aclrtMemcpy(weights, SIZE, data, SIZE, 1)
    print(f"a copy into sleeping memory is refused: {recent_c_message()}")
    assert rc != 0

    npu.wake_up()
    back = ctypes.create_string_buffer(SIZE)
    check(lib.aclrtMemcpy(back, SIZE, weights, SIZE, 2), "aclrtMemcpy to the host")
    assert back.raw == data
    print(f"awake: weights restored at the same address {weights:#x}")

    lib.aclallocPoolFree(pool, block)
    check(lib.aclallocPoolDestroy(pool), "aclallocPoolDestroy")
    print("sleep and wake: ok")


if __name__ == "__main__":
    main()
