"""torch_npu's MemPool and use_mem_pool: routing per thread and device,
blocks keeping their pool, deferred release, use_on_oom, no_split,
snapshots per pool, use_count, argument errors; and a serving engine's
flow: a C++ pluggable allocator on CANN's virtual-memory API that sleeps and
wakes, used through a MemPool and as the current allocator."""

from __future__ import annotations

import ctypes
import gc
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from aclalloc import npu
from aclalloc._lib import lib
from conftest import ROOT, run_python

MIB = 1 << 20
CPP = Path(__file__).resolve().parent / "cxx" / "vmm_allocator.cpp"


@pytest.fixture(scope="module")
def vmm_so(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The C++ allocator, built with g++ and no library linked."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.fail("no C++ compiler (g++) on PATH; CI installs one")
    out = tmp_path_factory.mktemp("cpp") / "vmm_allocator.so"
    flags = ["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "include")]
    subprocess.run([cxx, *flags, str(CPP), "-o", str(out)], check=True)
    return out


def live_blocks(pool: npu.MemPool) -> list[int]:
    return [
        b["address"]
        for s in pool.snapshot()
        for b in s["blocks"]
        if b["state"] == "active_allocated"
    ]


def test_allocations_inside_the_context_come_from_the_pool_and_keep_it():
    pool = npu.MemPool()
    assert pool.id[0] == 0 and pool.id[1] > 0
    assert pool.use_count() == 1
    assert pool.allocator is None
    with npu.use_mem_pool(pool):
        assert pool.use_count() == 2
        inside = npu.caching_allocator_alloc(MIB)
    assert pool.use_count() == 1
    outside = npu.caching_allocator_alloc(MIB)
    assert live_blocks(pool) == [inside]
    assert all(s["segment_pool_id"] == pool.id for s in pool.snapshot())
    default_live = [
        b["address"]
        for s in npu.memory_snapshot()
        for b in s["blocks"]
        if b["state"] == "active_allocated"
    ]
    assert outside in default_live and inside not in default_live
    assert npu.memory_snapshot(pool.id) == pool.snapshot()
    # Freed after the context: back to the pool, not the default pool.
    npu.caching_allocator_delete(inside)
    assert live_blocks(pool) == []
    npu.caching_allocator_delete(outside)


def test_only_the_thread_inside_the_context_is_routed():
    pool = npu.MemPool()
    got: dict[str, int] = {}
    inside = threading.Event()
    done = threading.Event()

    def other() -> None:
        inside.wait()
        got["other"] = npu.caching_allocator_alloc(4096)
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with npu.use_mem_pool(pool):
        inside.set()
        done.wait()
        got["mine"] = npu.caching_allocator_alloc(4096)
    thread.join()
    assert live_blocks(pool) == [got["mine"]]
    # The other thread frees its block; this thread frees the pool's block
    # from a third thread: each goes back to its own pool.
    npu.caching_allocator_delete(got["other"])
    freer = threading.Thread(target=npu.caching_allocator_delete, args=(got["mine"],))
    freer.start()
    freer.join()
    assert live_blocks(pool) == []


def test_the_context_routes_only_its_device():
    pool = npu.MemPool()
    with npu.use_mem_pool(pool, device=1):
        on_one = npu.caching_allocator_alloc(4096, device=1)
        on_zero = npu.caching_allocator_alloc(4096, device=0)
    assert live_blocks(pool) == [on_one]
    assert pool.device_pool(1) is not None and pool.device_pool(0) is None
    assert all(s["device"] == 1 for s in pool.snapshot())
    npu.caching_allocator_delete(on_one)
    npu.caching_allocator_delete(on_zero)


def test_contexts_nest_and_the_innermost_wins():
    outer, inner = npu.MemPool(), npu.MemPool()
    with npu.use_mem_pool(outer):
        a = npu.caching_allocator_alloc(1000)
        with npu.use_mem_pool(inner):
            b = npu.caching_allocator_alloc(1000)
        c = npu.caching_allocator_alloc(1000)
    assert sorted(live_blocks(outer)) == sorted([a, c])
    assert live_blocks(inner) == [b]
    for p in (a, b, c):
        npu.caching_allocator_delete(p)


def test_device_statistics_include_mem_pool_allocations():
    npu.caching_allocator_delete(npu.caching_allocator_alloc(512))
    before = npu.memory_stats()["allocated_bytes.all.current"]
    pool = npu.MemPool()
    with npu.use_mem_pool(pool):
        p = npu.caching_allocator_alloc(3 * MIB)
    assert npu.memory_stats()["allocated_bytes.all.current"] == before + 3 * MIB
    del pool
    gc.collect()
    # The MemPool is gone; its live block still counts.
    assert npu.memory_stats()["allocated_bytes.all.current"] == before + 3 * MIB
    npu.caching_allocator_delete(p)
    assert npu.memory_stats()["allocated_bytes.all.current"] == before


def test_the_memory_goes_back_when_the_pool_is_gone_and_its_blocks_freed():
    # Device 1's free memory, which nothing else changes while this runs
    # (its default pool is left unused for test_npu_memory).
    start = npu.mem_get_info(1)[0]
    pool = npu.MemPool()
    with npu.use_mem_pool(pool, device=1):
        p = npu.caching_allocator_alloc(16 * MIB, device=1)
    del pool
    gc.collect()
    assert npu.mem_get_info(1)[0] < start, "deferred while a block is live"
    data = (ctypes.c_char * 16)(*b"still mine here!")
    assert lib.aclrtMemcpy(p, 16, data, 16, 1) == 0
    npu.caching_allocator_delete(p)
    assert npu.mem_get_info(1)[0] == start


def test_no_split_gives_each_block_its_own_segment():
    pool = npu.MemPool(no_split=True)
    assert pool.no_split
    with npu.use_mem_pool(pool):
        ptrs = [npu.caching_allocator_alloc(1000) for _ in range(3)]
    segments = pool.snapshot()
    assert len(segments) == 3
    assert all(len(s["blocks"]) == 1 for s in segments)
    for p in ptrs:
        npu.caching_allocator_delete(p)


def test_use_on_oom_serves_the_default_pool_from_the_pool_s_cache():
    code = """
        from aclalloc import npu
        MIB = 1 << 20
        for use_on_oom in (True, False):
            pool = npu.MemPool(use_on_oom=use_on_oom)
            with npu.use_mem_pool(pool):
                cached = npu.caching_allocator_alloc(40 * MIB)
            npu.caching_allocator_delete(cached)
            try:
                p = npu.caching_allocator_alloc(40 * MIB)
            except npu.OutOfMemoryError:
                print(use_on_oom, "oom")
            else:
                blocks = [b["address"] for s in pool.snapshot() for b in s["blocks"]
                          if b["state"] == "active_allocated"]
                print(use_on_oom, p == cached, blocks == [p])
                npu.caching_allocator_delete(p)
            del pool
    """
    done = run_python(code, env={"ACLALLOC_DEVICE_MEMORY": "64MiB"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["True True True", "False oom"]


def test_bad_arguments_raise_as_torch_npu_s():
    with pytest.raises(TypeError):
        npu.MemPool(allocator=5)
    with pytest.raises(TypeError):
        npu.MemPool(use_on_oom=1)
    with pytest.raises(TypeError):
        npu.MemPool(no_split="yes")
    with pytest.raises(TypeError):
        npu.MemPool(tag=3)
    with pytest.raises(ValueError):
        npu.MemPool(tag="")
    with pytest.raises(TypeError):
        with npu.use_mem_pool("pool"):
            pass
    pool = npu.MemPool(tag="weights")
    assert pool.tag == "weights"
    with pytest.raises(ValueError):
        with npu.use_mem_pool(pool, device=7):
            pass
    assert pool.use_count() == 1
    with pytest.raises(TypeError):
        npu.memory_snapshot(mempool_id=5)
    with pytest.raises(ValueError):
        npu.memory_snapshot(mempool_id=(0, 10**9))


# -- a serving engine's allocator ------------------------------------------------


def fill(ptr: int, pattern: bytes) -> None:
    buf = ctypes.create_string_buffer(pattern, len(pattern))
    assert lib.aclrtMemcpy(ptr, len(pattern), buf, len(pattern), 1) == 0


def read(ptr: int, n: int) -> bytes:
    buf = ctypes.create_string_buffer(n)
    assert lib.aclrtMemcpy(buf, n, ptr, n, 2) == 0
    return buf.raw


def test_a_vmm_allocator_sleeps_and_wakes_through_a_mem_pool(vmm_so: Path):
    vmm = ctypes.CDLL(str(vmm_so))
    allocator = npu.NPUPluggableAllocator(str(vmm_so), "vmm_malloc", "vmm_free")
    pool = npu.MemPool(allocator=allocator, tag="weights")
    assert pool.allocator is allocator
    pattern = bytes(range(256)) * 4096  # 1 MiB
    ptrs = []
    for device in (0, 1):
        with npu.use_mem_pool(pool, device=device):
            ptr = npu.caching_allocator_alloc(len(pattern), device=device)
        fill(ptr, pattern)
        ptrs.append(ptr)
    assert vmm.vmm_blocks() == 2
    free_awake = npu.mem_get_info(0)[0]
    assert vmm.vmm_sleep(1) == 2
    assert npu.mem_get_info(0)[0] >= free_awake + 2 * MIB
    assert vmm.vmm_wake() == 2
    assert npu.mem_get_info(0)[0] == free_awake
    for ptr in ptrs:
        assert read(ptr, len(pattern)) == pattern, "same address, contents restored"
    assert sorted(live_blocks(pool)) == sorted(ptrs)
    for ptr in ptrs:
        npu.caching_allocator_delete(ptr)
    del pool
    gc.collect()
    assert vmm.vmm_blocks() == 0, "the pool's segments went back to the allocator"
    assert vmm.vmm_failures() == 0


def test_a_vmm_allocator_sleeps_and_wakes_as_the_current_allocator(vmm_so: Path):
    code = f"""
        import ctypes
        from aclalloc import npu
        from aclalloc._lib import lib
        vmm = ctypes.CDLL({str(vmm_so)!r})
        allocator = npu.NPUPluggableAllocator({str(vmm_so)!r}, "vmm_malloc", "vmm_free")
        npu.change_current_allocator(allocator)
        n = 3 << 20
        ptr = npu.caching_allocator_alloc(n)
        data = ctypes.create_string_buffer(b"x" * n, n)
        assert lib.aclrtMemcpy(ptr, n, data, n, 1) == 0
        awake = npu.mem_get_info(0)[0]
        assert vmm.vmm_sleep(0) == 1
        asleep = npu.mem_get_info(0)[0]
        assert vmm.vmm_wake() == 1
        print(asleep - awake, npu.mem_get_info(0)[0] == awake, vmm.vmm_failures())
        npu.caching_allocator_delete(ptr)
        print(vmm.vmm_blocks())
    """
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split("\n")[:2]
    grown, same, failures = first.split()
    assert int(grown) >= 3 << 20 and same == "True" and failures == "0"
    assert second == "0"


def test_the_mem_pool_example_runs():
    example = ROOT / "python_examples" / "torch_npu_mem_pool.py"
    done = run_python(example.read_text())
    assert done.returncode == 0, done.stderr + done.stdout
    assert "3 live blocks, all weights: True" in done.stdout
    assert "device free unchanged: True" in done.stdout
    # The 18 MiB of weights share one 20 MiB segment, which goes back whole.
    assert "weights freed: 20,971,520 bytes went back to the device" in done.stdout


def test_a_serving_engine_s_sleep_allocator_passes_the_allocator_object(vmm_so: Path):
    """As a serving engine's sleep allocator does it: the pool is given the
    pluggable allocator's ``_allocator`` (torch_npu's MemPool takes that, the
    NPUPluggableAllocator itself, or None)."""
    vmm = ctypes.CDLL(str(vmm_so))
    new_alloc = npu.NPUPluggableAllocator(str(vmm_so), "vmm_malloc", "vmm_free")
    before = vmm.vmm_blocks()
    pools = [npu.MemPool(new_alloc._allocator), npu.MemPool(new_alloc.allocator())]
    pools.append(npu.MemPool(allocator=new_alloc))
    assert pools[0].allocator is new_alloc._allocator and pools[2].allocator is new_alloc
    pattern = bytes(range(256)) * 4096  # 1 MiB
    ptrs = []
    for pool in pools:
        with npu.use_mem_pool(pool):
            ptr = npu.caching_allocator_alloc(len(pattern))
        fill(ptr, pattern)
        ptrs.append(ptr)
        assert live_blocks(pool) == [ptr]
    assert vmm.vmm_blocks() == before + 3, "each pool's segment from the plugin"
    assert vmm.vmm_sleep(1) == before + 3 and vmm.vmm_wake() == before + 3
    for ptr in ptrs:
        assert read(ptr, len(pattern)) == pattern
        npu.caching_allocator_delete(ptr)
    del pools, pool
    gc.collect()
    assert vmm.vmm_blocks() == before
    with pytest.raises(TypeError, match="_allocator"):
        npu.MemPool(int(new_alloc._allocator))
    assert vmm.vmm_failures() == 0
