"""A torch_npu-style memory statistics session on aclalloc's default pool.

The calls and keys are torch_npu's (``torch.npu.memory_stats()`` and
friends), with ``from aclalloc import npu`` in place of ``torch.npu``:
allocate through the caching allocator, read the statistics, print the
summary, look at a snapshot, release the cache, reset the peaks.

Run: python python_examples/torch_npu_memory_stats.py [snapshot.pickle]
"""

from __future__ import annotations

import sys

from aclalloc import acl, npu

MiB = 1 << 20


def main() -> None:
    if acl.init(None) != 0 or acl.rt.set_device(0) != 0:
        sys.exit(acl.get_recent_err_msg())

    # An "inference step": activations of several sizes, some freed early.
    live = [npu.caching_allocator_alloc(n) for n in (4 * MiB, 512 << 10, 12 * MiB, 3000)]
    npu.caching_allocator_delete(live.pop(1))
    stats = npu.memory_stats()
    print(f"allocated now   {stats['allocated_bytes.all.current']:>12,} bytes")
    print(f"allocated peak  {stats['allocated_bytes.all.peak']:>12,} bytes")
    print(f"reserved now    {stats['reserved_bytes.all.current']:>12,} bytes")
    print(f"segments        {stats['segment.all.current']:>12,}")
    print(f"device mallocs  {stats['num_device_alloc']:>12,}")
    assert npu.memory_allocated() == stats["allocated_bytes.all.current"]

    print(npu.memory_summary())

    for segment in npu.memory_snapshot():
        used = sum(b["size"] for b in segment["blocks"] if b["state"] == "active_allocated")
        print(
            f"segment {segment['address']:#x} {segment['segment_type']:>5} "
            f"{segment['total_size']:>10,} bytes, {used:>10,} in use, "
            f"{len(segment['blocks'])} blocks"
        )
    if len(sys.argv) > 1:
        npu.memory._dump_snapshot(sys.argv[1])
        print(f"snapshot written to {sys.argv[1]}")

    for p in live:
        npu.caching_allocator_delete(p)
    reserved = npu.memory_reserved()
    npu.empty_cache()
    print(f"empty_cache released {reserved - npu.memory_reserved():,} bytes")
    npu.reset_peak_memory_stats()
    assert npu.max_memory_allocated() == npu.memory_allocated() == 0
    free, total = npu.mem_get_info()
    print(f"device 0: {free:,} of {total:,} bytes free")


if __name__ == "__main__":
    main()
