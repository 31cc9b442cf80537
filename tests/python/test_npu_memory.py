"""aclalloc.npu: torch_npu's memory API over the default allocator, checked
against the C API's own figures (read by C code in this process) and
against sizes computed here."""

from __future__ import annotations

import pickle
import warnings

import pytest

from aclalloc import npu
from conftest import run_python

MiB = 1 << 20


def _round(size: int) -> int:
    return max(512, (size + 511) // 512 * 512)


@pytest.fixture
def stats_session(acl):
    """Device 0 current; the default pool built by a first allocation."""
    npu.caching_allocator_delete(npu.caching_allocator_alloc(1))
    return npu


def test_statistics_are_the_c_apis_figures(stats_session, probe):
    before = npu.memory_stats()
    sizes = [100, 1000, 70_000, 3 * MiB, 24 * MiB]
    ptrs = [npu.caching_allocator_alloc(n) for n in sizes]
    after = npu.memory_stats()
    assert list(after) == sorted(after), "keys sorted, as PyTorch's"
    assert len(after) == 122
    for key, value in after.items():
        if key != "num_sync_all_streams":
            assert probe.probe_default_pool_stat(key.encode()) == value, key
    grew = after["allocated_bytes.all.current"] - before["allocated_bytes.all.current"]
    assert grew == sum(_round(n) for n in sizes)
    assert after["allocation.all.current"] - before["allocation.all.current"] == len(sizes)
    assert after["requested_bytes.all.current"] - before["requested_bytes.all.current"] == sum(
        sizes
    )
    assert after["allocated_bytes.all.peak"] >= after["allocated_bytes.all.current"]
    assert npu.memory_allocated() == after["allocated_bytes.all.current"]
    assert npu.memory_allocated(0) == npu.memory_allocated("npu:0") == npu.memory_allocated()
    assert npu.max_memory_allocated() == after["allocated_bytes.all.peak"]
    assert npu.memory_reserved() == after["reserved_bytes.all.current"]
    assert npu.memory_reserved() >= npu.memory_allocated()
    assert npu.max_memory_reserved() == after["reserved_bytes.all.peak"]
    nested = npu.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == after["allocated_bytes.all.current"]
    assert nested["num_ooms"] == after["num_ooms"]
    with pytest.warns(FutureWarning):
        assert npu.memory_cached() == npu.memory_reserved()
    with pytest.warns(FutureWarning):
        assert npu.max_memory_cached() == npu.max_memory_reserved()
    for p in ptrs:
        npu.caching_allocator_delete(p)
    assert npu.memory_allocated() == before["allocated_bytes.all.current"]
    assert probe.probe_default_pool_stat(b"allocated_bytes.all.current") == npu.memory_allocated()


def test_resets(stats_session, probe):
    p = npu.caching_allocator_alloc(8 * MiB)
    npu.caching_allocator_delete(p)
    assert npu.max_memory_allocated() >= 8 * MiB
    npu.reset_peak_memory_stats()
    assert npu.max_memory_allocated() == npu.memory_allocated()
    assert npu.memory_stats()["allocation.all.allocated"] > 0
    npu.reset_accumulated_memory_stats()
    stats = npu.memory_stats()
    assert stats["allocation.all.allocated"] == stats["allocation.all.freed"] == 0
    assert probe.probe_default_pool_stat(b"allocation.all.allocated") == 0
    p = npu.caching_allocator_alloc(9 * MiB)
    npu.caching_allocator_delete(p)
    with pytest.warns(FutureWarning):
        npu.reset_max_memory_allocated()
    with pytest.warns(FutureWarning):
        npu.reset_max_memory_cached()
    assert npu.max_memory_allocated() == npu.memory_allocated()


def test_empty_cache_returns_free_segments(stats_session):
    p = npu.caching_allocator_alloc(40 * MiB)
    npu.caching_allocator_delete(p)
    cached = npu.memory_reserved()
    npu.empty_cache()
    assert npu.memory_reserved() <= cached - 40 * MiB


def test_snapshot_segments_add_up(stats_session, tmp_path):
    ptrs = {npu.caching_allocator_alloc(n): _round(n) for n in (700, 5000, 2 * MiB + 1)}
    segments = npu.memory_snapshot()
    assert segments
    found = {}
    for seg in segments:
        assert seg["device"] == 0
        assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
        assert seg["allocated_size"] == sum(
            b["size"] for b in seg["blocks"] if b["state"] == "active_allocated"
        )
        address = seg["address"]
        for block in seg["blocks"]:
            assert block["address"] == address, "blocks tile their segment"
            address += block["size"]
            if block["state"] == "active_allocated":
                found[block["address"]] = block["size"]
    for p, size in ptrs.items():
        assert found.get(p) == size
    snapshot = npu.memory._snapshot()
    assert snapshot["segments"] == segments
    assert len(snapshot["device_traces"]) == 2
    path = tmp_path / "snap.pickle"
    npu.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        loaded = pickle.load(f)
    assert loaded["segments"] == segments
    assert npu.memory._snapshot(device=1)["segments"] == []
    for p in ptrs:
        npu.caching_allocator_delete(p)


def test_record_memory_history_checks_arguments_and_says_what_it_records(stats_session):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        npu.memory._record_memory_history()
        npu.memory._record_memory_history(enabled=None)
    with pytest.raises(ValueError):
        npu.memory._record_memory_history(enabled="yes")
    with pytest.raises(ValueError):
        npu.memory._record_memory_history(max_entries=0)
    with pytest.raises(TypeError):
        npu.memory._record_memory_history(max_entries="10")


def _trace(device: int = 0) -> list:
    return npu.memory._snapshot()["device_traces"][device]


_HISTORY_TEST = "test_history_records_the_default_pools_events_in_pytorchs_shape"


def test_history_records_the_default_pools_events_in_pytorchs_shape(stats_session, tmp_path):
    npu.memory._record_memory_history(max_entries=10_000)
    assert _trace() == [], "each call starts a fresh history"
    before = npu.memory_stats()
    sizes = [100, 70_000, 3 * MiB, 24 * MiB + 3]
    ptrs = [npu.caching_allocator_alloc(n) for n in sizes]
    for p in ptrs[:2]:
        npu.caching_allocator_delete(p)
    with pytest.raises(npu.OutOfMemoryError):
        npu.caching_allocator_alloc(4 << 30)
    after = npu.memory_stats()
    snapshot = npu.memory._snapshot()
    assert len(snapshot["device_traces"]) == 2 and snapshot["device_traces"][1] == []
    trace = snapshot["device_traces"][0]
    for e in trace:
        assert set(e) == {"action", "addr", "size", "stream", "time_us", "frames"}, e
        for key in ("addr", "size", "stream", "time_us"):
            assert type(e[key]) is int, (key, e)
        # context="all": allocations and frees carry their Python stack.
        names = [f["name"] for f in e["frames"]]
        with_stack = e["action"] in ("alloc", "free_requested", "free_completed")
        assert (_HISTORY_TEST in names) == with_stack, e
    times = [e["time_us"] for e in trace]
    assert times == sorted(times)
    allocs = [e for e in trace if e["action"] == "alloc"]
    assert [(e["addr"], e["size"]) for e in allocs] == list(zip(ptrs, sizes))
    requested = [e for e in trace if e["action"] == "free_requested"]
    completed = [e for e in trace if e["action"] == "free_completed"]
    assert [(e["addr"], e["size"]) for e in completed] == list(zip(ptrs[:2], sizes[:2]))
    assert [e["addr"] for e in requested] == ptrs[:2]
    for r, c in zip(requested, completed):
        assert trace.index(r) < trace.index(c)
    # The events add up to the statistics' changes over the same calls.
    freed = sum(e["size"] for e in completed)
    assert sum(e["size"] for e in allocs) - freed == (
        after["requested_bytes.all.current"] - before["requested_bytes.all.current"]
    )
    segments = sum(e["size"] for e in trace if e["action"] == "segment_alloc") - sum(
        e["size"] for e in trace if e["action"] == "segment_free"
    )
    assert segments == after["reserved_bytes.all.current"] - before["reserved_bytes.all.current"]
    ooms = [e for e in trace if e["action"] == "oom"]
    assert len(ooms) == 1 and ooms[0]["size"] == 4 << 30
    assert after["num_ooms"] - before["num_ooms"] == 1
    # Every segment's blocks tile it, with integer addresses.
    for seg in snapshot["segments"]:
        assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
        assert type(seg["address"]) is int and type(seg["stream"]) is int
    # The pickle is the same snapshot.
    path = tmp_path / "history.pickle"
    npu.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        assert pickle.load(f) == snapshot
    # Off: later calls are not recorded, and the trace is empty.
    npu.memory._record_memory_history(enabled=None)
    p = npu.caching_allocator_alloc(5000)
    npu.caching_allocator_delete(p)
    assert _trace() == []
    for p in ptrs[2:]:
        npu.caching_allocator_delete(p)


def test_a_full_history_keeps_the_newest_events(stats_session):
    npu.memory._record_memory_history(max_entries=4)
    ptrs = [npu.caching_allocator_alloc(1000 + i) for i in range(6)]
    trace = _trace()
    assert [e["action"] for e in trace] == ["alloc"] * 4
    assert [e["addr"] for e in trace] == ptrs[2:]
    npu.memory._record_memory_history(enabled="state")
    for p in ptrs:
        npu.caching_allocator_delete(p)
    assert _trace() == [], "'state' records no trace"
    with pytest.raises(RuntimeError, match="fewer events"):
        npu.memory._record_memory_history(max_entries=1 << 62)


def test_each_device_has_its_own_pool(stats_session):
    stats = npu.memory_stats(1)
    assert stats and all(v == 0 for k, v in stats.items() if k != "max_split_size")
    assert npu.memory_allocated("npu:1") == 0
    assert "aclalloc caching pool" in npu.memory_summary(1)
    assert "aclalloc caching pool" in npu.memory_summary()
    free, total = npu.mem_get_info(1)
    assert total == 1 << 30 and 0 < free <= total
    free0, total0 = npu.mem_get_info()
    assert total0 == 1 << 30 and free0 <= total0 - npu.memory_reserved()
    on0 = npu.memory_allocated(0)
    p = npu.caching_allocator_alloc(1 << 20, device=1)
    assert npu.memory_allocated(1) == 1 << 20, "device 1's own pool"
    assert npu.memory_allocated(0) == on0, "device 0's pool did not move"
    assert npu.mem_get_info(1)[0] < free, "device 1's memory serves it"
    npu.caching_allocator_delete(p)
    assert npu.memory_allocated(1) == 0


def test_bad_arguments_raise(stats_session):
    with pytest.raises(ValueError):
        npu.caching_allocator_alloc(-1)
    with pytest.raises(TypeError):
        npu.caching_allocator_alloc("1")
    with pytest.raises(ValueError):
        npu.caching_allocator_alloc(10, device=5)
    with pytest.raises(ValueError):
        npu.memory_stats("gpu:0")
    with pytest.raises(TypeError):
        npu.memory_stats(1.5)
    with pytest.raises(TypeError):
        npu.caching_allocator_alloc(10, stream="s")
    with pytest.raises(npu.OutOfMemoryError, match="aclallocDefaultMalloc failed"):
        npu.caching_allocator_alloc(2 << 30)
    p = npu.caching_allocator_alloc(64)
    npu.caching_allocator_delete(p)
    with pytest.raises(RuntimeError, match="already freed"):
        npu.caching_allocator_delete(p)
    with pytest.raises(RuntimeError, match="not allocated here"):
        npu.caching_allocator_delete(0x1000)
    with pytest.raises(TypeError):
        npu.caching_allocator_delete("p")
    with pytest.raises(ValueError):
        npu.caching_allocator_delete(0)
    with pytest.raises(TypeError):
        npu.set_per_process_memory_fraction(1)
    with pytest.raises(ValueError, match="Allowed range"):
        npu.set_per_process_memory_fraction(1.5)
    with pytest.raises(TypeError):
        npu.change_current_allocator("allocator")


def test_before_first_use_and_the_memory_fraction_in_a_fresh_interpreter():
    result = run_python(
        """
        from aclalloc import acl, npu
        assert acl.init(None) == 0 and acl.rt.set_device(0) == 0
        assert npu.memory_stats() == {}, "not initialized: empty, as PyTorch"
        assert npu.memory_allocated() == 0
        npu.empty_cache()
        npu.set_per_process_memory_fraction(0.25)
        assert npu.memory_stats()["allocation.all.allocated"] == 0, "built, nothing allocated"
        p = npu.caching_allocator_alloc(200 << 20)
        try:
            npu.caching_allocator_alloc(100 << 20)
            raise SystemExit("over the fraction")
        except npu.OutOfMemoryError as e:
            assert "limit" in str(e), str(e)
        npu.caching_allocator_delete(p)
        npu.set_per_process_memory_fraction(0.0)
        try:
            npu.caching_allocator_alloc(512)
            raise SystemExit("fraction 0 admits nothing")
        except npu.OutOfMemoryError:
            pass
        assert npu.memory_stats()["num_ooms"] == 2
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.strip() == "ok"


def test_the_default_pool_lives_where_it_was_built():
    result = run_python(
        """
        from aclalloc import acl, npu
        assert acl.init(None) == 0 and acl.rt.set_device(1) == 0
        p = npu.caching_allocator_alloc(4096)
        assert npu.memory_allocated() == 4096 == npu.memory_allocated(1)
        assert npu.memory_allocated(0) == 0
        assert npu.memory_snapshot()[0]["device"] == 1
        npu.caching_allocator_delete(p)
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
