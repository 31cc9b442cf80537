"""A pyACL-style program with a custom allocator written in Python.

Written the way a pyACL program is (``acl.rt.*``, ints for handles, return
codes checked), with ``from aclalloc import acl`` in place of ``import acl``:
a small caching allocator (one instance per stream, since CANN frees a
workspace right after its launch is enqueued and it may only be reused by
later work on the same stream) registered on two streams, operator launches
that take their workspaces from it, and the counts checked at the end.

Run: python python_examples/pyacl_custom_allocator.py
"""

from __future__ import annotations

import sys
import threading

import aclalloc
from aclalloc import acl

ACL_MEM_MALLOC_HUGE_FIRST = 0
DEVICE_ID = 0


def check(ret: int, what: str) -> None:
    if ret != 0:
        sys.exit(f"{what} failed with {ret}: {acl.get_recent_err_msg()}")


class StreamCachingAllocator:
    """Keeps freed blocks per size and hands them out again on its stream."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.cached: dict[int, list[int]] = {}
        self.sizes: dict[int, int] = {}
        self.allocs = self.frees = self.device_mallocs = 0

    def alloc(self, allocator: StreamCachingAllocator, size: int) -> int:
        self.allocs += 1
        blocks = self.cached.get(size)
        if blocks:
            return blocks.pop()
        ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        if ret != 0:
            return 0  # NULL: the launch fails with ACL_ERROR_RT_MEMORY_ALLOCATION
        self.device_mallocs += 1
        self.sizes[ptr] = size
        return ptr

    def free(self, allocator: StreamCachingAllocator, block: int) -> None:
        self.frees += 1
        self.cached.setdefault(self.sizes[block], []).append(block)

    @staticmethod
    def get_addr(block: int) -> int:
        return block

    def release(self) -> None:
        for blocks in self.cached.values():
            for block in blocks:
                check(acl.rt.free(block), "acl.rt.free")
        self.cached.clear()


def main() -> None:
    check(acl.init(""), "acl.init")
    check(acl.rt.set_device(DEVICE_ID), "acl.rt.set_device")
    context, ret = acl.rt.create_context(DEVICE_ID)
    check(ret, "acl.rt.create_context")

    allocators, streams, descs = [], [], []
    for i in range(2):
        stream, ret = acl.rt.create_stream()
        check(ret, "acl.rt.create_stream")
        allocator = StreamCachingAllocator(f"stream{i}")
        desc = acl.rt.allocator_create_desc()
        check(acl.rt.allocator_set_obj_to_desc(desc, allocator), "set_obj")
        check(acl.rt.allocator_set_alloc_func_to_desc(desc, allocator.alloc), "set_alloc")
        check(acl.rt.allocator_set_free_func_to_desc(desc, allocator.free), "set_free")
        check(
            acl.rt.allocator_set_get_addr_from_block_func_to_desc(desc, allocator.get_addr),
            "set_get_addr",
        )
        check(acl.rt.allocator_register(stream, desc), "acl.rt.allocator_register")
        allocators.append(allocator)
        streams.append(stream)
        descs.append(desc)

    kernels_run = [0]
    lock = threading.Lock()

    def kernel(workspace: int, size: int) -> None:
        # The "operator": fill its workspace on the device.
        check(acl.rt.memset(workspace, size, 0x3C, size), "acl.rt.memset")
        with lock:
            kernels_run[0] += 1

    layers = [64 << 10, 1 << 20, 256 << 10, 4 << 20]
    for _ in range(50):
        for size in layers:
            for stream in streams:
                check(aclalloc.launch_kernel(stream, size, kernel), "launch_kernel")
    for stream in streams:
        check(acl.rt.synchronize_stream(stream), "acl.rt.synchronize_stream")

    launches = 50 * len(layers) * len(streams)
    for allocator in allocators:
        print(
            f"{allocator.name}: {allocator.allocs} allocs, {allocator.frees} frees, "
            f"{allocator.device_mallocs} device mallocs"
        )
        if allocator.allocs != allocator.frees:
            sys.exit("allocs and frees do not balance")
    if kernels_run[0] != launches:
        sys.exit(f"{kernels_run[0]} kernels ran, {launches} launched")

    for stream, desc, allocator in zip(streams, descs, allocators):
        check(acl.rt.allocator_unregister(stream), "acl.rt.allocator_unregister")
        check(acl.rt.allocator_destroy_desc(desc), "acl.rt.allocator_destroy_desc")
        check(acl.rt.destroy_stream(stream), "acl.rt.destroy_stream")
        allocator.release()
    check(acl.rt.destroy_context(context), "acl.rt.destroy_context")
    check(acl.rt.reset_device(DEVICE_ID), "acl.rt.reset_device")
    check(acl.finalize(), "acl.finalize")
    print(f"{launches} launches on 2 streams, every workspace returned")


if __name__ == "__main__":
    main()
