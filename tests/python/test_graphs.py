"""Graph capture from Python: pyACL-style ``acl.mdl.ri_*`` (capture, replay,
the memory a model takes from a stream-ordered pool, a refused call failing
the capture, bad arguments refused with a code) and torch_npu's graph pools
in ``aclalloc.npu`` (``NPUGraph``, ``graph``, ``graph_pool_handle``): the
capture stream's allocations come from the graph's pool, ``memory_stats``
and ``memory_reserved`` count it, two graphs share a pool, and reset or an
abandoned capture gives the memory back."""

from __future__ import annotations

import pytest

import aclalloc
from aclalloc import acl, npu

MIB = 1 << 20


@pytest.fixture(autouse=True)
def _device() -> None:
    assert acl.init() in (0, 100002)
    assert acl.rt.set_device(0) == 0


def _stream() -> int:
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    return stream


def test_a_capture_records_work_and_its_model_replays_it():
    mdl = acl.mdl
    s, run_on = _stream(), _stream()
    pool, ret = acl.rt.mem_pool_create(
        {
            "allocType": acl.rt.ACL_MEM_ALLOCATION_TYPE_PINNED,
            "handleType": acl.rt.ACL_MEM_HANDLE_TYPE_NONE,
            "location": {"id": 0, "type": acl.rt.ACL_MEM_LOCATION_TYPE_DEVICE},
            "maxSize": 0,
        }
    )
    assert ret == 0
    used = acl.rt.ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT
    before, ret = acl.rt.mem_pool_get_attr(pool, used)
    assert ret == 0

    assert mdl.ri_capture_begin(s, mdl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) == 0
    status, model, ret = mdl.ri_capture_get_info(s)
    assert (status, ret) == (mdl.ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE, 0) and model
    ptr, ret = acl.rt.mem_pool_malloc_async(MIB, pool, s)
    assert ret == 0 and ptr
    assert aclalloc.launch_kernel(s, 4096) == 0
    ended, ret = mdl.ri_capture_end(s)
    assert (ended, ret) == (model, 0)
    assert mdl.ri_capture_get_info(s)[:2] == (mdl.ACL_MODEL_RI_CAPTURE_STATUS_NONE, 0)
    held, _ = acl.rt.mem_pool_get_attr(pool, used)
    assert held >= before + MIB, "the model owns the block"
    number, ret = mdl.ri_get_id(model)
    assert ret == 0 and number > 0

    for _ in range(20):
        assert mdl.ri_execute_async(model, run_on) == 0
    assert acl.rt.synchronize_stream(run_on) == 0
    # The model's memory is not the program's to free.
    assert acl.rt.mem_pool_free_async(ptr, run_on) == 100000
    assert "captured model owns" in acl.get_recent_err_msg()
    assert mdl.ri_destroy(model) == 0
    assert acl.rt.synchronize_stream(run_on) == 0
    assert acl.rt.mem_pool_get_attr(pool, used) == (before, 0)
    assert mdl.ri_execute_async(model, run_on) == 100000, "a destroyed model"
    assert acl.rt.mem_pool_destroy(pool) == 0
    for x in (s, run_on):
        assert acl.rt.destroy_stream(x) == 0


def test_a_forbidden_call_fails_the_capture_and_modes_exchange():
    mdl = acl.mdl
    s = _stream()
    assert mdl.ri_capture_begin(s, mdl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) == 0
    assert acl.rt.synchronize_stream(s) == 107041
    status, _, _ = mdl.ri_capture_get_info(s)
    assert status == mdl.ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED
    assert mdl.ri_capture_end(s) == (0, 107041)
    old, ret = mdl.ri_capture_thread_exchange_mode(mdl.ACL_MODEL_RI_CAPTURE_MODE_RELAXED)
    assert (old, ret) == (mdl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL, 0)
    assert mdl.ri_capture_thread_exchange_mode(old) == (mdl.ACL_MODEL_RI_CAPTURE_MODE_RELAXED, 0)
    assert acl.rt.destroy_stream(s) == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda: acl.mdl.ri_capture_begin("stream", 0),
        lambda: acl.mdl.ri_capture_begin(1, 1 << 40),
        lambda: acl.mdl.ri_capture_end(-1)[1],
        lambda: acl.mdl.ri_execute_async(None, 0),
        lambda: acl.mdl.ri_execute(1, "forever"),
        lambda: acl.mdl.ri_destroy(2.5),
        lambda: acl.mdl.ri_capture_get_info([])[2],
    ],
)
def test_bad_arguments_are_refused_with_a_code_not_an_exception(call):
    assert call() == 100000
    assert "The argument" in acl.get_recent_err_msg()


def _pool_reserved(pool: npu.MemPool) -> int:
    handle = pool.device_pool(0)
    if handle is None:
        return 0
    names, values = npu.memory._pools.stats(handle)
    return values[names.index("reserved_bytes.all.current")]


def test_a_graph_allocates_from_its_pool_and_stats_count_it():
    g = npu.NPUGraph()
    reserved_before = npu.memory_reserved(0)
    with npu.graph(g):
        s = g.capture_stream
        assert npu.is_current_stream_capturing(s)
        out = npu.caching_allocator_alloc(4096, stream=s)
        assert aclalloc.launch_kernel(s, 2 * MIB) == 0
    assert not npu.is_current_stream_capturing(g.capture_stream)
    pool = npu.memory._mempool._pool_of(g.pool())
    assert npu.graph_pool_users(g.pool()) == 1
    assert _pool_reserved(pool) >= 2 * MIB
    assert npu.memory_reserved(0) >= reserved_before + 2 * MIB, "memory_reserved counts it"
    stats = npu.memory_stats(0)
    assert stats["reserved_bytes.all.current"] == npu.memory_reserved(0)
    segments = npu.memory_snapshot(g.pool())
    assert segments and all(seg["segment_pool_id"] == g.pool() for seg in segments)
    for _ in range(10):
        g.replay()
    assert acl.rt.synchronize_stream(g.capture_stream) == 0

    g.reset()
    assert npu.graph_pool_users(g.pool()) == 0
    npu.caching_allocator_delete(out)
    assert _pool_reserved(pool) == 0, "nothing uses the pool: its memory went back"
    assert npu.memory_reserved(0) == reserved_before


def test_two_graphs_share_a_pool_from_graph_pool_handle():
    handle = npu.graph_pool_handle()
    first, second = npu.NPUGraph(), npu.NPUGraph()
    with npu.graph(first, pool=handle):
        assert aclalloc.launch_kernel(first.capture_stream, MIB) == 0
    with npu.graph(second, pool=first.pool()):
        assert aclalloc.launch_kernel(second.capture_stream, MIB) == 0
    assert first.pool() == second.pool() == handle
    pool = npu.memory._mempool._pool_of(handle)
    assert npu.graph_pool_users(handle) == 2
    first.replay()
    second.replay()
    first.reset()
    # The graph's memory goes once its queued replay has run.
    assert acl.rt.synchronize_stream(first.capture_stream) == 0
    assert npu.graph_pool_users(handle) == 1
    assert _pool_reserved(pool) >= MIB, "the second graph still holds its memory"
    second.replay()
    assert acl.rt.synchronize_stream(second.capture_stream) == 0
    second.reset()
    assert _pool_reserved(pool) == 0


def test_an_abandoned_capture_gives_its_pool_memory_back():
    reserved_before = npu.memory_reserved(0)
    g = npu.NPUGraph()
    with pytest.raises(KeyError), npu.graph(g):
        assert aclalloc.launch_kernel(g.capture_stream, 3 * MIB) == 0
        assert npu.memory_reserved(0) >= reserved_before + 3 * MIB
        raise KeyError("the model code failed")
    assert npu.graph_pool_users(g.pool()) == 0
    assert npu.memory_reserved(0) == reserved_before
    with pytest.raises(RuntimeError, match="not captured"):
        g.replay()
    # A failed capture: the forbidden call fails it, capture_end says why.
    with pytest.raises(RuntimeError, match="capture mode is not relaxed"), npu.graph(g):
        assert aclalloc.launch_kernel(g.capture_stream, 3 * MIB) == 0
        assert acl.rt.synchronize_stream(g.capture_stream) == 107041
    assert npu.memory_reserved(0) == reserved_before
