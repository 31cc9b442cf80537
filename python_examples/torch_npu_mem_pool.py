"""torch_npu's MemPool and use_mem_pool on aclalloc's default allocator.

A serving loop keeps its model weights apart from its activations: the
weights are allocated inside ``use_mem_pool(weights)``, so they live in a
pool of their own (``weights.snapshot()`` shows them alone), while the
activations come from the default pool. A block keeps its pool after the
context; when the pool object is gone, its memory goes back to the device
once its blocks are freed.

Run: python python_examples/torch_npu_mem_pool.py
"""

from __future__ import annotations

import gc
import sys

from aclalloc import acl, npu

MiB = 1 << 20


def main() -> None:
    if acl.init(None) != 0 or acl.rt.set_device(0) != 0:
        sys.exit(acl.get_recent_err_msg())

    weights = npu.MemPool(tag="weights")
    with npu.use_mem_pool(weights):
        layers = [npu.caching_allocator_alloc(n) for n in (8 * MiB, 8 * MiB, 2 * MiB)]
    activations = [npu.caching_allocator_alloc(n) for n in (3 * MiB, 512 << 10)]

    pool_blocks = [b for s in weights.snapshot() for b in s["blocks"]]
    in_pool = sorted(b["address"] for b in pool_blocks if b["state"] == "active_allocated")
    all_weights = in_pool == sorted(layers)
    print(f"MemPool {weights.id}: {len(in_pool)} live blocks, all weights: {all_weights}")
    stats = npu.memory_stats()
    print(
        f"device allocated (weights + activations): {stats['allocated_bytes.all.current']:,} bytes"
    )

    for p in activations:
        npu.caching_allocator_delete(p)
    free_before = npu.mem_get_info()[0]
    del weights
    gc.collect()
    print(f"pool gone, weights live: device free unchanged: {npu.mem_get_info()[0] == free_before}")
    for p in layers:
        npu.caching_allocator_delete(p)
    released = npu.mem_get_info()[0] - free_before
    print(f"weights freed: {released:,} bytes went back to the device")


if __name__ == "__main__":
    main()
