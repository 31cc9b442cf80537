"""``acl.rt.mem_pool_*``: CANN's stream-ordered memory pools
(``acl/acl_rt_memory_soma.h``) through the pyACL-shaped bindings: the props
dict, reuse within a stream, the attributes (exact figures, each with its C
width), trimming, destroying, aclalloc's two extensions (``mem_pool_stats``,
``mem_pool_snapshot``), and every bad input refused with a code and a
message, never an exception.

The figures follow the caching pool's rounding (docs/POOL.md): sizes round
up to 512 bytes; a request up to 1 MiB comes from a 2 MiB segment, one up to
10 MiB from a 20 MiB segment, a larger one from a segment of its size
rounded up to 2 MiB.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator

import pytest

MIB = 1 << 20
INVALID_PARAM = 100000
NOT_CLEARED = 148051  # ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED
MEMORY_ALLOCATION = 207001  # ACL_ERROR_RT_MEMORY_ALLOCATION


def props(**fields: Any) -> Dict[str, Any]:
    """``aclrtMemPoolProps`` as pyACL-style code writes it: a valid pool on
    device 0, with ``fields`` replaced."""
    from aclalloc.acl import rt

    base: Dict[str, Any] = {
        "allocType": rt.ACL_MEM_ALLOCATION_TYPE_PINNED,
        "handleType": rt.ACL_MEM_HANDLE_TYPE_NONE,
        "location": {"id": 0, "type": rt.ACL_MEM_LOCATION_TYPE_DEVICE},
        "maxSize": 0,
    }
    base.update(fields)
    return base


@pytest.fixture
def device0(acl):
    """``acl`` with device 0 current on this thread (pools grow there)."""
    device, ret = acl.rt.get_device()
    if ret != 0 or device != 0:
        assert acl.rt.set_device(0) == 0
    acl.get_recent_err_msg()
    return acl


@pytest.fixture
def pool(device0) -> Iterator[int]:
    """A fresh pool on device 0; the test frees what it allocates, so the
    pool must be destroyable afterwards."""
    handle, ret = device0.rt.mem_pool_create(props())
    assert ret == 0 and handle != 0
    yield handle
    assert device0.rt.mem_pool_destroy(handle) == 0, device0.get_recent_err_msg()


def figures(rt, pool: int) -> Dict[str, int]:
    out = {}
    for name in ("RESERVED_MEM_CURRENT", "RESERVED_MEM_HIGH", "USED_MEM_CURRENT", "USED_MEM_HIGH"):
        value, ret = rt.mem_pool_get_attr(pool, getattr(rt, f"ACL_RT_MEM_POOL_ATTR_{name}"))
        assert ret == 0
        out[name] = value
    return out


def refused(acl, ret: int, *needles: str, code: int = INVALID_PARAM) -> None:
    """``ret`` is ``code`` and the message names each of ``needles``."""
    assert ret == code
    text = acl.get_recent_err_msg()
    assert text is not None
    for needle in needles:
        assert needle in text, (needle, text)


def test_a_block_freed_on_a_stream_serves_that_stream_again(device0, pool, stream):
    rt = device0.rt
    p, ret = rt.mem_pool_malloc_async(5000, pool, stream)
    assert ret == 0 and p != 0
    other, ret = rt.mem_pool_malloc_async(5000, pool, stream)
    assert ret == 0 and other not in (0, p)
    assert rt.mem_pool_free_async(p, stream) == 0
    # No synchronize: the stream's later work runs after the free.
    again, ret = rt.mem_pool_malloc_async(5000, pool, stream)
    assert (again, ret) == (p, 0)
    for block in (again, other):
        assert rt.mem_pool_free_async(block, stream) == 0
    assert rt.synchronize_stream(stream) == 0


@pytest.mark.parametrize("internal", [0, 1])
def test_another_stream_gets_a_block_before_a_wait_only_with_internal_dependencies(
    device0, pool, stream, internal
):
    rt = device0.rt
    attr = rt.ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES
    assert rt.mem_pool_set_attr(pool, attr, internal) == 0
    second, ret = rt.create_stream()
    assert ret == 0
    p, ret = rt.mem_pool_malloc_async(9 * MIB, pool, stream)
    assert ret == 0
    assert rt.mem_pool_free_async(p, stream) == 0
    q, ret = rt.mem_pool_malloc_async(9 * MIB, pool, second)
    assert ret == 0 and q != 0
    # With internal dependencies the pool makes `second` wait for `stream`
    # and hands it the block; without, it grows.
    assert (q == p) == bool(internal)
    assert rt.mem_pool_free_async(q, second) == 0
    assert rt.synchronize_stream(stream) == 0
    assert rt.destroy_stream(second) == 0


def test_the_default_stream_is_0(device0, pool):
    rt = device0.rt
    p, ret = rt.mem_pool_malloc_async(64, pool, 0)
    assert ret == 0 and p != 0
    assert rt.mem_pool_free_async(p, 0) == 0
    assert rt.mem_pool_malloc_async(64, pool, None) == (p, 0)
    assert rt.mem_pool_free_async(p, None) == 0


def test_used_and_reserved_figures_are_exact(device0, pool, stream):
    rt = device0.rt
    assert set(figures(rt, pool).values()) == {0}
    small, ret = rt.mem_pool_malloc_async(1000, pool, stream)
    assert ret == 0
    assert figures(rt, pool) == {
        "RESERVED_MEM_CURRENT": 2 * MIB,
        "RESERVED_MEM_HIGH": 2 * MIB,
        "USED_MEM_CURRENT": 1024,
        "USED_MEM_HIGH": 1024,
    }
    large, ret = rt.mem_pool_malloc_async(5 * MIB, pool, stream)
    assert ret == 0
    assert figures(rt, pool) == {
        "RESERVED_MEM_CURRENT": 22 * MIB,
        "RESERVED_MEM_HIGH": 22 * MIB,
        "USED_MEM_CURRENT": 5 * MIB + 1024,
        "USED_MEM_HIGH": 5 * MIB + 1024,
    }
    assert rt.mem_pool_free_async(large, stream) == 0
    # 12 MiB + 300 bytes fits the freed 20 MiB segment, rounded to 512 bytes.
    odd, ret = rt.mem_pool_malloc_async(12 * MIB + 300, pool, stream)
    assert (odd, ret) == (large, 0)
    assert figures(rt, pool) == {
        "RESERVED_MEM_CURRENT": 22 * MIB,
        "RESERVED_MEM_HIGH": 22 * MIB,
        "USED_MEM_CURRENT": 12 * MIB + 512 + 1024,
        "USED_MEM_HIGH": 12 * MIB + 512 + 1024,
    }
    for block in (odd, small):
        assert rt.mem_pool_free_async(block, stream) == 0
    assert rt.mem_pool_get_attr(pool, rt.ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT) == (0, 0)
    assert rt.mem_pool_get_attr(pool, rt.ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH) == (
        12 * MIB + 512 + 1024,
        0,
    )


def test_a_high_figure_resets_with_0_and_nothing_else(device0, pool, stream):
    rt = device0.rt
    p, ret = rt.mem_pool_malloc_async(3 * MIB, pool, stream)
    assert ret == 0
    assert rt.mem_pool_free_async(p, stream) == 0
    high = rt.ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH
    assert rt.mem_pool_get_attr(pool, high) == (3 * MIB, 0)

    refused(device0, rt.mem_pool_set_attr(pool, high, 5), "aclrtMemPoolSetAttr", "writing 0")
    assert rt.mem_pool_get_attr(pool, high) == (3 * MIB, 0), "unchanged by a refusal"
    assert rt.mem_pool_set_attr(pool, high, 0) == 0
    assert rt.mem_pool_get_attr(pool, high) == (0, 0)
    # The reserved peak resets to what the pool holds now (its 20 MiB segment).
    reserved_high = rt.ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH
    assert rt.mem_pool_set_attr(pool, reserved_high, 0) == 0
    assert rt.mem_pool_get_attr(pool, reserved_high) == (20 * MIB, 0)

    current = rt.ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT
    refused(device0, rt.mem_pool_set_attr(pool, current, 0), "attr", "read-only")
    refused(device0, rt.mem_pool_set_attr(pool, 99, 0), "aclrtMemPoolAttr")
    refused(device0, rt.mem_pool_get_attr(pool, 99)[1], "aclrtMemPoolAttr")
    assert rt.mem_pool_get_attr(pool, 99) == (0, INVALID_PARAM)
    device0.get_recent_err_msg()


@pytest.mark.parametrize(
    "name",
    [
        "ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES",
        "ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC",
        "ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES",
    ],
)
def test_a_reuse_switch_is_a_uint32_0_or_1_defaulting_to_1(device0, pool, name):
    rt = device0.rt
    attr = getattr(rt, name)
    assert rt.mem_pool_get_attr(pool, attr) == (1, 0)
    assert rt.mem_pool_set_attr(pool, attr, 0) == 0
    assert rt.mem_pool_get_attr(pool, attr) == (0, 0)
    refused(device0, rt.mem_pool_set_attr(pool, attr, 2), "0 or 1")
    # Wider than a uint32_t: refused here, not truncated to 0 on the way to C.
    refused(device0, rt.mem_pool_set_attr(pool, attr, 1 << 32), "value", "4294967295")
    assert rt.mem_pool_get_attr(pool, attr) == (0, 0)
    assert rt.mem_pool_set_attr(pool, attr, 1) == 0
    assert rt.mem_pool_get_attr(pool, attr) == (1, 0)


def test_the_release_threshold_is_a_uint64_applied_at_a_synchronize(device0, pool, stream):
    rt = device0.rt
    threshold = rt.ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD
    reserved = rt.ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT
    assert rt.mem_pool_get_attr(pool, threshold) == (0, 0)
    # All 64 bits reach C and come back.
    assert rt.mem_pool_set_attr(pool, threshold, (1 << 64) - 1) == 0
    assert rt.mem_pool_get_attr(pool, threshold) == ((1 << 64) - 1, 0)
    assert rt.mem_pool_set_attr(pool, threshold, (1 << 32) + 7) == 0
    assert rt.mem_pool_get_attr(pool, threshold) == ((1 << 32) + 7, 0)
    p, ret = rt.mem_pool_malloc_async(9 * MIB, pool, stream)
    assert ret == 0
    assert rt.mem_pool_free_async(p, stream) == 0
    assert rt.synchronize_stream(stream) == 0
    assert rt.mem_pool_get_attr(pool, reserved) == (20 * MIB, 0), "under the threshold: kept"
    assert rt.mem_pool_set_attr(pool, threshold, 0) == 0
    assert rt.mem_pool_get_attr(pool, reserved) == (20 * MIB, 0), "only at a synchronize"
    assert rt.synchronize_stream(stream) == 0
    assert rt.mem_pool_get_attr(pool, reserved) == (0, 0)


def test_trim_to_frees_unused_memory_and_keeps_what_is_in_use(device0, pool, stream):
    rt = device0.rt
    reserved = rt.ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT
    small, ret = rt.mem_pool_malloc_async(1000, pool, stream)
    assert ret == 0
    large, ret = rt.mem_pool_malloc_async(5 * MIB, pool, stream)
    assert ret == 0
    assert rt.mem_pool_free_async(large, stream) == 0
    assert rt.mem_pool_get_attr(pool, reserved) == (22 * MIB, 0)
    assert rt.mem_pool_trim_to(pool, 0) == 0
    assert rt.mem_pool_get_attr(pool, reserved) == (2 * MIB, 0), "the used segment stays"
    assert rt.mem_pool_free_async(small, stream) == 0
    assert rt.mem_pool_trim_to(pool, 2 * MIB) == 0
    assert rt.mem_pool_get_attr(pool, reserved) == (2 * MIB, 0), "kept: not above 2 MiB"
    assert rt.mem_pool_trim_to(pool, 0) == 0
    assert rt.mem_pool_get_attr(pool, reserved) == (0, 0)


def test_destroy_is_refused_while_a_block_is_live(device0, stream):
    rt = device0.rt
    pool, ret = rt.mem_pool_create(props())
    assert ret == 0
    p, ret = rt.mem_pool_malloc_async(4096, pool, stream)
    assert ret == 0
    refused(device0, rt.mem_pool_destroy(pool), "aclrtMemPoolDestroy", code=NOT_CLEARED)
    # Still usable after the refusal.
    assert rt.mem_pool_get_attr(pool, rt.ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT) == (4096, 0)
    assert rt.mem_pool_free_async(p, stream) == 0
    refused(device0, rt.mem_pool_free_async(p, stream), "already freed")
    assert rt.mem_pool_destroy(pool) == 0
    # A destroyed pool is refused by every function.
    refused(device0, rt.mem_pool_malloc_async(64, pool, stream)[1], "memPool")
    refused(device0, rt.mem_pool_get_attr(pool, 1)[1], "memPool")
    refused(device0, rt.mem_pool_trim_to(pool, 0), "memPool")
    refused(device0, rt.mem_pool_destroy(pool), "memPool")


def test_max_size_bounds_the_pool(device0, stream):
    rt = device0.rt
    pool, ret = rt.mem_pool_create(props(maxSize=16 * MIB))
    assert ret == 0
    p, ret = rt.mem_pool_malloc_async(10 * MIB, pool, stream)
    assert ret == 0
    assert rt.mem_pool_malloc_async(10 * MIB, pool, stream) == (0, MEMORY_ALLOCATION)
    device0.get_recent_err_msg()
    assert rt.mem_pool_free_async(p, stream) == 0
    assert rt.mem_pool_destroy(pool) == 0


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"allocType": 1}, "allocType"),
        ({"handleType": 2}, "handleType"),
        ({"location": {"id": 0, "type": 0}}, "location.type"),
        ({"location": {"id": 1, "type": 1}}, "location.id"),
        ({"reserved": [0] * 31 + [1]}, "reserved"),
        ({"reserved": b"\0\x01"}, "reserved"),
    ],
)
def test_props_cann_refuses_are_refused_by_the_library(device0, fields, needle):
    pool, ret = device0.rt.mem_pool_create(props(**fields))
    assert pool == 0
    refused(device0, ret, "aclrtMemPoolCreate", needle)


def test_reserved_may_be_given_as_zeros(device0):
    rt = device0.rt
    for reserved in (b"", bytes(32), [0] * 32, (0,)):
        pool, ret = rt.mem_pool_create(props(reserved=reserved))
        assert ret == 0 and pool != 0
        assert rt.mem_pool_destroy(pool) == 0


BAD_PROPS = [
    (None, "pool_props"),
    ([0, 0, {"id": 0, "type": 1}, 0], "pool_props"),
    ({"allocType": 0, "handleType": 0, "maxSize": 0}, "keys"),
    (props(max_size=0), "keys"),
    (props(location=(0, 1)), "pool_props['location']"),
    (props(location={"id": 0}), "pool_props['location']"),
    (props(location={"id": 0, "type": 1, "kind": 1}), "pool_props['location']"),
    (props(location={"id": -1, "type": 1}), "pool_props['location']['id']"),
    (props(location={"id": 1 << 32, "type": 1}), "pool_props['location']['id']"),
    (props(location={"id": 0, "type": "device"}), "pool_props['location']['type']"),
    (props(allocType="pinned"), "pool_props['allocType']"),
    (props(allocType=True), "pool_props['allocType']"),
    (props(handleType=1.0), "pool_props['handleType']"),
    (props(maxSize=-1), "pool_props['maxSize']"),
    (props(maxSize=None), "pool_props['maxSize']"),
    (props(reserved=bytes(33)), "33 bytes"),
    (props(reserved=[256]), "pool_props['reserved'][0]"),
    (props(reserved=0), "pool_props['reserved']"),
]


@pytest.mark.parametrize(("bad", "needle"), BAD_PROPS)
def test_a_bad_props_dict_is_refused_with_a_message(device0, bad, needle):
    result = device0.rt.mem_pool_create(bad)
    assert result == (0, INVALID_PARAM)
    text = device0.get_recent_err_msg()
    assert text is not None and text.startswith("acl.rt.mem_pool_create failed"), text
    assert needle in text, text


def test_wrong_argument_types_return_invalid_param_and_never_raise(device0, pool, stream):
    """pyACL's convention, as every function of ``acl.rt``: a code and a
    message, no TypeError (tests/python/test_bad_input.py holds all of them
    to it)."""
    rt = device0.rt
    switch = rt.ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC
    threshold = rt.ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD
    cases = [
        (lambda: rt.mem_pool_malloc_async("64", pool, stream), (0, INVALID_PARAM), "size"),
        (lambda: rt.mem_pool_malloc_async(-1, pool, stream), (0, INVALID_PARAM), "size"),
        (lambda: rt.mem_pool_malloc_async(64, str(pool), stream), (0, INVALID_PARAM), "mem_pool"),
        (lambda: rt.mem_pool_malloc_async(64, pool, 1.5), (0, INVALID_PARAM), "stream"),
        (lambda: rt.mem_pool_free_async(None, stream), INVALID_PARAM, "ptr"),
        (lambda: rt.mem_pool_free_async(4096, "s"), INVALID_PARAM, "stream"),
        (lambda: rt.mem_pool_get_attr(pool, "7"), (0, INVALID_PARAM), "attr"),
        (lambda: rt.mem_pool_get_attr(None, 7), (0, INVALID_PARAM), "mem_pool"),
        (lambda: rt.mem_pool_set_attr(pool, switch, True), INVALID_PARAM, "value"),
        (lambda: rt.mem_pool_set_attr(pool, switch, -1), INVALID_PARAM, "value"),
        (lambda: rt.mem_pool_set_attr(pool, threshold, 1 << 64), INVALID_PARAM, "value"),
        (lambda: rt.mem_pool_set_attr(pool, threshold, 2.0), INVALID_PARAM, "value"),
        (lambda: rt.mem_pool_set_attr(pool, 1 << 40, 0), INVALID_PARAM, "attr"),
        (lambda: rt.mem_pool_trim_to(pool, -1), INVALID_PARAM, "min_bytes_to_keep"),
        (lambda: rt.mem_pool_trim_to(pool, "0"), INVALID_PARAM, "min_bytes_to_keep"),
        (lambda: rt.mem_pool_destroy(-1), INVALID_PARAM, "mem_pool"),
    ]
    for call, want, needle in cases:
        assert call() == want
        text = device0.get_recent_err_msg()
        assert text is not None and text.startswith("acl.rt.mem_pool_"), text
        assert f"The argument {needle} is" in text, text
    # None of them reached the pool.
    assert figures(rt, pool)["USED_MEM_CURRENT"] == 0
    assert rt.mem_pool_get_attr(pool, switch) == (1, 0)
    assert rt.mem_pool_get_attr(pool, threshold) == (0, 0)


def test_library_refusals_name_the_c_parameter(device0, pool, stream):
    rt = device0.rt
    refused(device0, rt.mem_pool_malloc_async(0, pool, stream)[1], "size")
    refused(device0, rt.mem_pool_malloc_async(64, 0, stream)[1], "memPool")
    refused(device0, rt.mem_pool_malloc_async(64, 0x1234, stream)[1], "memPool")
    refused(device0, rt.mem_pool_free_async(0, stream), "ptr")
    dev, ret = rt.malloc(4096)
    assert ret == 0
    refused(device0, rt.mem_pool_free_async(dev, stream), "ptr")
    assert rt.free(dev) == 0
    refused(device0, rt.mem_pool_destroy(0), "memPool")
    refused(device0, rt.mem_pool_trim_to(0, 0), "memPool")


# -- aclalloc's extensions: the pool's statistics and snapshot ----------------------


def test_mem_pool_stats_are_pytorchs_and_agree_with_the_attributes(device0, pool, stream):
    rt = device0.rt
    used = rt.ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT
    reserved = rt.ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT
    stats, ret = rt.mem_pool_stats(pool)
    assert ret == 0
    # PyTorch's memory_stats() keys, sorted.
    assert list(stats) == sorted(stats)
    for key in ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "max_split_size"):
        assert key in stats
    assert stats["allocated_bytes.all.current"] == stats["reserved_bytes.all.current"] == 0

    p, ret = rt.mem_pool_malloc_async(1000, pool, stream)
    assert ret == 0
    stats, ret = rt.mem_pool_stats(pool)
    assert ret == 0
    assert stats["allocated_bytes.all.current"] == 1024  # rounded up to 512 bytes
    assert stats["requested_bytes.all.current"] == 1000
    assert stats["reserved_bytes.all.current"] == 2 * MIB
    assert stats["allocation.all.current"] == stats["segment.all.current"] == 1
    assert stats["num_alloc_retries"] == stats["num_ooms"] == 0
    assert rt.mem_pool_get_attr(pool, used) == (stats["allocated_bytes.all.current"], 0)
    assert rt.mem_pool_get_attr(pool, reserved) == (stats["reserved_bytes.all.current"], 0)

    assert rt.mem_pool_free_async(p, stream) == 0
    stats, ret = rt.mem_pool_stats(pool)
    assert ret == 0
    assert stats["allocated_bytes.all.current"] == 0
    assert stats["allocated_bytes.all.peak"] == 1024
    assert stats["allocated_bytes.all.freed"] == 1024
    assert stats["reserved_bytes.all.current"] == stats["reserved_bytes.all.peak"] == 2 * MIB
    assert rt.mem_pool_get_attr(pool, used) == (0, 0)
    assert rt.mem_pool_get_attr(pool, reserved) == (2 * MIB, 0)


def test_mem_pool_snapshot_lists_the_pools_segments_and_blocks(device0, pool, stream):
    rt = device0.rt
    p, ret = rt.mem_pool_malloc_async(1000, pool, stream)
    assert ret == 0
    snapshot, ret = rt.mem_pool_snapshot(pool)
    assert ret == 0
    assert snapshot["version"] == 2 and snapshot["device"] == 0
    [segment] = snapshot["segments"]
    assert segment["total_size"] == 2 * MIB and segment["segment_type"] == "small"
    assert segment["allocated_size"] == 1024
    live = [b for b in segment["blocks"] if b["state"] == "active_allocated"]
    assert [(int(b["address"], 16), b["size"], b["requested_size"]) for b in live] == [
        (p, 1024, 1000)
    ]
    assert sum(b["size"] for b in segment["blocks"]) == 2 * MIB

    # Another pool's snapshot has none of this pool's segments.
    other, ret = rt.mem_pool_create(props())
    assert ret == 0
    assert rt.mem_pool_snapshot(other) == (
        {
            "version": 2,
            "device": 0,
            "segments": [],
            "device_traces": [[]],
            "history": {"enabled": False, "max_entries": 0, "entries": 0, "dropped": 0},
        },
        0,
    )
    assert rt.mem_pool_destroy(other) == 0

    assert rt.mem_pool_free_async(p, stream) == 0
    snapshot, ret = rt.mem_pool_snapshot(pool)
    assert ret == 0
    [segment] = snapshot["segments"]  # the memory stays in the pool
    assert segment["allocated_size"] == 0
    assert [b for b in segment["blocks"] if b["state"] == "active_allocated"] == []


@pytest.mark.parametrize("name", ["mem_pool_stats", "mem_pool_snapshot"])
def test_the_extensions_refuse_a_pool_that_is_not_live_with_the_librarys_code(device0, name):
    rt = device0.rt
    function = getattr(rt, name)
    c_name = {"mem_pool_stats": "aclallocPoolGetStatsKeyValues"}.get(name, "aclallocPoolSnapshot")
    pool, ret = rt.mem_pool_create(props())
    assert ret == 0
    assert rt.mem_pool_destroy(pool) == 0
    for dead in (pool, 0, 0x1234):
        result = function(dead)
        assert result == (0, INVALID_PARAM)
        refused(device0, result[1], f"acl.rt.{name} failed", c_name, "pool")
    # An earlier failure's message is kept, after this one's.
    refused(device0, rt.mem_pool_trim_to(0, 0), "aclrtMemPoolTrimTo")
    assert rt.mem_pool_trim_to(0, 0) == INVALID_PARAM
    assert function(pool) == (0, INVALID_PARAM)
    text = device0.get_recent_err_msg()
    assert text is not None
    assert text.index(f"acl.rt.{name}") < text.index("aclrtMemPoolTrimTo"), text


@pytest.mark.parametrize("name", ["mem_pool_stats", "mem_pool_snapshot"])
@pytest.mark.parametrize("bad", ["1", 1.5, None, True, -1, 1 << 64, object()])
def test_the_extensions_refuse_a_bad_handle_with_invalid_param(device0, name, bad):
    assert getattr(device0.rt, name)(bad) == (0, INVALID_PARAM)
    text = device0.get_recent_err_msg()
    assert text is not None and text.startswith(f"acl.rt.{name} failed."), text
    assert "The argument mem_pool is" in text, text
