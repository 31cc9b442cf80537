"""Per-call cost of the Python package, measured with time.perf_counter.

* ``launch_kernel`` on a stream with a Python allocator registered (alloc,
  getAddrFromBlock and free are Python callbacks; the kernel is none), per
  launch, synchronized at the end of each run (no ``fn``: the library's empty
  kernel runs);
* ``launch_kernel`` on a stream without a registration (the default caching
  pool serves the workspace);
* the first again with a Python kernel (an empty function), which the
  stream's worker calls under the GIL;
* ``npu.memory_stats()`` (121 statistics from the pool, sorted dict).

Each figure is the best of RUNS runs of N calls, divided by N (best: the
run least disturbed by the rest of the machine).

Run (after ``pip install .``): python benches/python_bench.py
"""

from __future__ import annotations

import time

import aclalloc
from aclalloc import acl, npu

RUNS = 7
N = 20_000
WORKSPACE = 64 << 10


def best_per_call(body, n: int = N, runs: int = RUNS) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        body(n)
        best = min(best, time.perf_counter() - start)
    return best / n


def main() -> None:
    assert acl.init(None) == 0 and acl.rt.set_device(0) == 0
    python_stream, _ = acl.rt.create_stream()
    pool_stream, _ = acl.rt.create_stream()

    cache: list[int] = []

    def alloc(allocator, size):
        if cache:
            return cache.pop()
        ptr, _ = acl.rt.malloc(size, 0)
        return ptr

    def free(allocator, block):
        cache.append(block)

    desc = acl.rt.allocator_create_desc()
    acl.rt.allocator_set_obj_to_desc(desc, "bench")
    acl.rt.allocator_set_alloc_func_to_desc(desc, alloc)
    acl.rt.allocator_set_free_func_to_desc(desc, free)
    acl.rt.allocator_set_get_addr_from_block_func_to_desc(desc, lambda b: b)
    assert acl.rt.allocator_register(python_stream, desc) == 0

    def launches(stream, fn=None):
        def body(n):
            launch = aclalloc.launch_kernel
            for _ in range(n):
                launch(stream, WORKSPACE, fn)
            acl.rt.synchronize_stream(stream)

        return body

    def kernel(workspace, size):
        pass

    def stats(n):
        for _ in range(n):
            npu.memory_stats()

    launches(python_stream)(1000)
    launches(pool_stream)(1000)
    rows = [
        ("launch_kernel, Python allocator (64 KiB)", best_per_call(launches(python_stream))),
        ("launch_kernel, default pool (64 KiB)", best_per_call(launches(pool_stream))),
        (
            "launch_kernel, Python allocator + Python kernel",
            best_per_call(launches(python_stream, kernel)),
        ),
        ("npu.memory_stats()", best_per_call(stats, n=5_000)),
    ]
    print(f"best of {RUNS} runs, per call")
    for name, seconds in rows:
        print(f"{name:<44} {seconds * 1e6:8.2f} us")


if __name__ == "__main__":
    main()
