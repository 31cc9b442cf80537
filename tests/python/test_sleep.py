"""aclalloc.npu.sleep / wake_up over tagged pools made with the C API
(aclallocPoolCreate + aclallocPoolSetTag) on two devices: device 0's pool
with expandable segments, device 1's with fixed ones."""

from __future__ import annotations

import ctypes
import subprocess
from ctypes import byref, c_char_p, c_double, c_int, c_int32, c_size_t, c_void_p

import pytest

from aclalloc import npu
from aclalloc._lib import lib, recent_c_message

MIB = 1 << 20
SIZE = 24 * MIB
H2D, D2H = 1, 2


class PoolConfig(ctypes.Structure):
    """aclallocPoolConfig (include/aclalloc.h)."""

    _fields_ = [
        ("max_split_size", c_size_t),
        ("garbage_collection_threshold", c_double),
        ("memory_limit", c_size_t),
        ("memory_fraction", c_double),
        ("expandable_segments", c_int32),
        ("roundup_power2_divisions", c_size_t * 16),
    ]


for name, restype, argtypes in [
    ("aclallocPoolConfigInit", c_int, (ctypes.POINTER(PoolConfig),)),
    ("aclallocPoolCreate", c_int, (ctypes.POINTER(PoolConfig), c_void_p, c_void_p)),
    ("aclallocPoolSetTag", c_int, (c_void_p, c_char_p)),
    ("aclallocPoolAlloc", c_void_p, (c_void_p, c_size_t)),
    ("aclallocPoolGetAddrFromBlock", c_void_p, (c_void_p,)),
    ("aclallocPoolFree", None, (c_void_p, c_void_p)),
    ("aclallocPoolDestroy", c_int, (c_void_p,)),
    ("aclrtMemcpy", c_int, (c_void_p, c_size_t, c_void_p, c_size_t, c_int)),
    ("aclrtMemset", c_int, (c_void_p, c_size_t, c_int, c_size_t)),
]:
    getattr(lib, name).restype = restype
    getattr(lib, name).argtypes = argtypes


class Tagged:
    """A tagged pool on `device` with one block of SIZE bytes holding `seed`'s pattern."""

    def __init__(self, device: int, tag: str, expandable: bool, seed: int = 1):
        self.device = device
        assert lib.aclrtSetDevice(device) == 0
        self.free_at_start = npu.mem_get_info(device)[0]
        cfg = PoolConfig()
        assert lib.aclallocPoolConfigInit(byref(cfg)) == 0
        cfg.expandable_segments = int(expandable)
        self.pool, desc = c_void_p(), c_void_p()
        assert lib.aclallocPoolCreate(byref(cfg), byref(self.pool), byref(desc)) == 0
        assert lib.aclallocPoolSetTag(self.pool, tag.encode()) == 0, recent_c_message()
        self.block = lib.aclallocPoolAlloc(self.pool, SIZE)
        assert self.block, recent_c_message()
        self.addr = lib.aclallocPoolGetAddrFromBlock(self.block)
        self.pattern = bytes((i * 31 + seed) & 0xFF for i in range(256)) * (SIZE // 256)
        assert self.copy_in(self.pattern) == 0

    def copy_in(self, data: bytes) -> int:
        lib.aclrtSetDevice(self.device)
        return lib.aclrtMemcpy(self.addr, SIZE, data, SIZE, H2D)

    def read(self) -> bytes:
        lib.aclrtSetDevice(self.device)
        out = ctypes.create_string_buffer(SIZE)
        assert lib.aclrtMemcpy(out, SIZE, self.addr, SIZE, D2H) == 0, recent_c_message()
        return out.raw

    def free_now(self) -> int:
        return npu.mem_get_info(self.device)[0]

    def destroy(self) -> None:
        lib.aclrtSetDevice(self.device)
        lib.aclallocPoolFree(self.pool, self.block)
        assert lib.aclallocPoolDestroy(self.pool) == 0, recent_c_message()


@pytest.fixture
def pools():
    made = []
    yield lambda *args, **kw: made.append(Tagged(*args, **kw)) or made[-1]
    npu.wake_up()
    for p in made:
        p.destroy()


def test_offload_restores_contents_and_discard_gives_usable_memory(pools):
    weights = pools(0, "weights", expandable=True, seed=1)
    kv = pools(1, "kv_cache", expandable=False, seed=2)
    addrs = (weights.addr, kv.addr)
    npu.sleep(offload_tags=("weights",))
    # Every byte the pools held is back on its device.
    assert weights.free_now() == weights.free_at_start
    assert kv.free_now() == kv.free_at_start
    npu.wake_up()
    assert (weights.addr, kv.addr) == addrs
    assert weights.read() == weights.pattern
    assert kv.free_now() <= kv.free_at_start - SIZE, "kv_cache is mapped again"
    # Discarded: fresh memory, usable.
    lib.aclrtSetDevice(1)
    assert lib.aclrtMemset(kv.addr, SIZE, 0x5A, SIZE) == 0
    assert kv.read() == b"\x5a" * SIZE


def test_sleeping_memory_is_refused_with_the_tag_in_the_message(pools):
    weights = pools(0, "weights", expandable=True)
    npu.sleep("weights")
    assert weights.copy_in(weights.pattern) != 0
    message = recent_c_message()
    assert 'tagged "weights", which is asleep' in message
    lib.aclrtSetDevice(0)
    assert lib.aclrtMemset(weights.addr, SIZE, 0, SIZE) != 0
    assert "asleep" in recent_c_message()
    assert not lib.aclallocPoolAlloc(weights.pool, MIB)
    assert 'pool tagged "weights" is asleep' in recent_c_message()
    npu.wake_up(tags=["weights"])
    assert weights.read() == weights.pattern


def test_a_hundred_cycles_with_expandable_segments_leave_no_growth(pools):
    weights = pools(0, "weights", expandable=True)
    firsts = None
    for cycle in range(100):
        npu.sleep(offload_tags=("weights",))
        asleep = weights.free_now()
        npu.wake_up()
        awake = weights.free_now()
        if firsts is None:
            firsts = (asleep, awake)
        assert (asleep, awake) == firsts, f"cycle {cycle + 1}"
    assert firsts[0] - firsts[1] >= SIZE
    assert weights.read() == weights.pattern


def test_sleep_twice_and_wake_while_awake_are_harmless_and_tags_choose(pools):
    weights = pools(0, "weights", expandable=False)
    kv = pools(1, "kv_cache", expandable=True)
    npu.wake_up()  # awake: nothing happens
    npu.sleep(["weights"])
    npu.sleep()  # asleep already: the offloaded copy stays
    npu.wake_up(tags=["kv_cache"])
    assert kv.free_now() < kv.free_at_start, "kv_cache is awake"
    assert weights.free_now() == weights.free_at_start, "weights still asleep"
    npu.wake_up(tags=[])  # no tag named: nothing woken
    assert weights.free_now() == weights.free_at_start
    npu.wake_up()
    assert weights.read() == weights.pattern


def test_destroy_while_asleep_releases_everything():
    weights = Tagged(0, "weights", expandable=True)
    kv = Tagged(1, "kv_cache", expandable=False)
    npu.sleep(offload_tags="weights")
    for p in (weights, kv):
        p.destroy()
        assert p.free_now() == p.free_at_start
    npu.wake_up()  # nothing left to wake
    for p in (weights, kv):
        assert p.free_now() == p.free_at_start


def test_bad_arguments():
    with pytest.raises(TypeError):
        npu.sleep(offload_tags=5)
    with pytest.raises(TypeError):
        npu.wake_up(tags=[b"weights"])


def test_a_tagged_mem_pool_sleeps_and_wakes_what_use_mem_pool_allocated():
    lib.aclrtSetDevice(0)
    before = npu.mem_get_info(0)[0]
    pool = npu.MemPool(tag="weights")
    with npu.use_mem_pool(pool):
        ptr = npu.caching_allocator_alloc(SIZE)
    pattern = bytes((i * 7 + 3) & 0xFF for i in range(256)) * (SIZE // 256)
    assert lib.aclrtMemcpy(ptr, SIZE, pattern, SIZE, H2D) == 0, recent_c_message()
    held = npu.mem_get_info(0)[0]
    assert held <= before - SIZE
    npu.sleep(offload_tags=("weights",))
    try:
        assert npu.mem_get_info(0)[0] >= held + SIZE, "the pool's pages went back"
        assert lib.aclrtMemset(ptr, SIZE, 0, SIZE) != 0
        assert 'tagged "weights"' in recent_c_message()
    finally:
        npu.wake_up()
    assert npu.mem_get_info(0)[0] == held
    out = ctypes.create_string_buffer(SIZE)
    assert lib.aclrtMemcpy(out, SIZE, ptr, SIZE, D2H) == 0, recent_c_message()
    assert out.raw == pattern
    npu.caching_allocator_delete(ptr)
    del pool


def test_a_mem_pool_over_a_pluggable_allocator_keeps_its_tag_as_a_label(tmp_path):
    src = tmp_path / "plain.c"
    src.write_text(
        "#include <stdlib.h>\n"
        "void *plain_alloc(size_t n, int d, void *s) {\n"
        "  (void)d; (void)s; return aligned_alloc(512, (n + 511) / 512 * 512);\n"
        "}\n"
        "void plain_free(void *p, size_t n, int d, void *s) {\n"
        "  (void)n; (void)d; (void)s; free(p);\n"
        "}\n"
    )
    so = tmp_path / "libplain.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    allocator = npu.NPUPluggableAllocator(str(so), "plain_alloc", "plain_free")
    pool = npu.MemPool(allocator=allocator, tag="weights")
    assert pool.tag == "weights"
    lib.aclrtSetDevice(0)
    with npu.use_mem_pool(pool):
        ptr = npu.caching_allocator_alloc(MIB)
    # The allocator's memory is its own to give back: sleep leaves it mapped.
    npu.sleep(offload_tags=("weights",))
    try:
        # Host memory from aligned_alloc: written directly.
        ctypes.memset(ptr, 0x5A, MIB)
        assert ctypes.string_at(ptr + MIB - 1, 1) == b"\x5a"
    finally:
        npu.wake_up()
    npu.caching_allocator_delete(ptr)
