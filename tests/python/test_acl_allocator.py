"""pyACL's allocator API with Python callbacks: the flow on two streams,
objects passed back unchanged and kept alive, copies at registration,
callbacks that raise, and what C code sees of it."""

from __future__ import annotations

import gc
import threading
import weakref

import aclalloc
from conftest import run_python

MEMORY_ALLOCATION = 207001
INVALID_PARAM = 100000


class CountingAllocator:
    """A pyACL-style allocator: blocks are device pointers from acl.rt.malloc."""

    def __init__(self, acl):
        self.acl = acl
        self.allocs = 0
        self.frees = 0
        self.live: set[int] = set()
        self.seen_objects: list[object] = []
        self.threads: set[str] = set()
        self.lock = threading.Lock()

    def alloc(self, allocator, size):
        with self.lock:
            self.seen_objects.append(allocator)
            self.threads.add(threading.current_thread().name)
            ptr, ret = self.acl.rt.malloc(size, 0)
            assert ret == 0
            self.allocs += 1
            self.live.add(ptr)
            return ptr

    def free(self, allocator, block):
        with self.lock:
            self.seen_objects.append(allocator)
            assert block in self.live, "free gets the block alloc returned"
            self.live.discard(block)
            self.frees += 1
            assert self.acl.rt.free(block) == 0

    def advise(self, allocator, size, addr):
        return self.alloc(allocator, size)

    @staticmethod
    def get_addr(block):
        return block

    def descriptor(self, obj):
        acl = self.acl
        desc = acl.rt.allocator_create_desc()
        assert desc
        assert acl.rt.allocator_set_obj_to_desc(desc, obj) == 0
        assert acl.rt.allocator_set_alloc_func_to_desc(desc, self.alloc) == 0
        assert acl.rt.allocator_set_free_func_to_desc(desc, self.free) == 0
        assert acl.rt.allocator_set_alloc_advise_func_to_desc(desc, self.advise) == 0
        assert acl.rt.allocator_set_get_addr_from_block_func_to_desc(desc, self.get_addr) == 0
        return desc


def test_the_flow_on_two_streams_balances(acl, probe):
    allocator = CountingAllocator(acl)
    token = object()
    desc = allocator.descriptor(token)
    streams = [acl.rt.create_stream()[0] for _ in range(2)]
    for s in streams:
        assert acl.rt.allocator_register(s, desc) == 0
        assert probe.probe_registered_desc(s) == desc, "C sees the descriptor Python registered"
    ran = []
    ran_lock = threading.Lock()

    def kernel(workspace, size):
        assert workspace and size in (512, 4096, 70000)
        with ran_lock:
            ran.append(threading.current_thread().name)

    launches = 0
    for i in range(200):
        for s in streams:
            assert aclalloc.launch_kernel(s, (512, 4096, 70000)[i % 3], kernel) == 0
            launches += 1
    for s in streams:
        assert acl.rt.synchronize_stream(s) == 0
    assert len(ran) == launches
    assert allocator.allocs == allocator.frees == launches, "every block came back"
    assert not allocator.live
    assert all(o is token for o in allocator.seen_objects), "the object comes back unchanged"
    assert threading.main_thread().name not in set(ran), "kernels run on the stream workers"
    for s in streams:
        assert acl.rt.allocator_unregister(s) == 0
        assert probe.probe_registered_desc(s) is None
        assert acl.rt.destroy_stream(s) == 0
    assert acl.rt.allocator_destroy_desc(desc) == 0


def test_an_int_object_comes_back_as_the_same_int(acl, stream):
    allocator = CountingAllocator(acl)
    desc = allocator.descriptor(0x1234)
    assert acl.rt.allocator_register(stream, desc) == 0
    assert aclalloc.launch_kernel(stream, 1024) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert allocator.seen_objects == [0x1234, 0x1234]
    assert acl.rt.allocator_destroy_desc(desc) == 0


def test_destroying_the_descriptor_keeps_its_registrations_and_their_objects(acl, stream):
    allocator = CountingAllocator(acl)

    class Owner:
        pass

    owner = Owner()
    desc = allocator.descriptor(owner)
    assert acl.rt.allocator_register(stream, desc) == 0
    assert acl.rt.allocator_destroy_desc(desc) == 0
    assert acl.rt.allocator_destroy_desc(desc) == INVALID_PARAM, "destroyed twice"
    acl.get_recent_err_msg()
    ref = weakref.ref(owner)
    del owner
    gc.collect()
    assert ref() is not None, "the registration keeps the object alive"
    assert aclalloc.launch_kernel(stream, 2048) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert allocator.allocs == allocator.frees == 1
    assert allocator.seen_objects[0] is ref()
    assert acl.rt.allocator_unregister(stream) == 0
    allocator.seen_objects.clear()
    gc.collect()
    assert ref() is None, "released once nothing uses it"


def test_a_registration_keeps_the_callbacks_it_was_registered_with(acl, stream):
    first, second = CountingAllocator(acl), CountingAllocator(acl)
    desc = first.descriptor("obj")
    assert acl.rt.allocator_register(stream, desc) == 0
    # Changing the descriptor afterwards does not change the registration (a copy).
    assert acl.rt.allocator_set_alloc_func_to_desc(desc, second.alloc) == 0
    assert acl.rt.allocator_set_obj_to_desc(desc, "other") == 0
    assert aclalloc.launch_kernel(stream, 512) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert (first.allocs, second.allocs) == (1, 0)
    assert first.seen_objects[0] == "obj"
    # Registering again takes the new contents.
    assert acl.rt.allocator_set_free_func_to_desc(desc, second.free) == 0
    assert acl.rt.allocator_register(stream, desc) == 0
    assert aclalloc.launch_kernel(stream, 512) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert (first.allocs, second.allocs) == (1, 1)
    assert second.seen_objects[0] == "other"
    assert acl.rt.allocator_destroy_desc(desc) == 0


def test_an_incomplete_or_bad_descriptor_is_refused(acl, stream):
    desc = acl.rt.allocator_create_desc()
    assert acl.rt.allocator_register(stream, desc) == INVALID_PARAM, "no obj, no callbacks"
    assert acl.get_recent_err_msg()
    assert acl.rt.allocator_set_alloc_func_to_desc(desc, "not callable") == INVALID_PARAM
    assert "callable" in acl.get_recent_err_msg()
    assert acl.rt.allocator_set_obj_to_desc(desc, None) == INVALID_PARAM
    acl.get_recent_err_msg()
    assert acl.rt.allocator_set_obj_to_desc(0xBAD, 1) == INVALID_PARAM, "not a descriptor"
    assert acl.get_recent_err_msg()
    assert acl.rt.allocator_register(stream, 0xBAD) == INVALID_PARAM
    assert acl.rt.allocator_register("s", desc) == INVALID_PARAM
    assert acl.rt.allocator_unregister(None) == INVALID_PARAM
    acl.get_recent_err_msg()
    assert acl.rt.allocator_destroy_desc(desc) == 0


def _raising_case(acl, stream, capfd, **overrides):
    allocator = CountingAllocator(acl)
    desc = allocator.descriptor("obj")
    setters = {
        "alloc": acl.rt.allocator_set_alloc_func_to_desc,
        "get_addr": acl.rt.allocator_set_get_addr_from_block_func_to_desc,
    }
    for name, func in overrides.items():
        assert setters[name](desc, func) == 0
    assert acl.rt.allocator_register(stream, desc) == 0
    ret = aclalloc.launch_kernel(stream, 4096, lambda w, n: None)
    message = acl.get_recent_err_msg()
    err = capfd.readouterr().err
    assert acl.rt.allocator_destroy_desc(desc) == 0
    return ret, message, err, allocator


def test_an_alloc_callback_that_raises_fails_the_launch_with_its_message(acl, stream, capfd):
    def alloc(allocator, size):
        raise MemoryError(f"pool exhausted for {size}")

    ret, message, err, _ = _raising_case(acl, stream, capfd, alloc=alloc)
    assert ret == MEMORY_ALLOCATION
    assert "MemoryError: pool exhausted for 4096" in message
    assert "aclallocLaunchKernel failed" in message
    assert "Traceback" in err and "pool exhausted for 4096" in err


def test_a_get_addr_that_raises_frees_the_block_and_fails_the_launch(acl, stream, capfd):
    def get_addr(block):
        raise KeyError(block)

    ret, message, err, allocator = _raising_case(acl, stream, capfd, get_addr=get_addr)
    assert ret == MEMORY_ALLOCATION
    assert "getAddrFromBlock" in message and "KeyError" in message
    assert "Traceback" in err
    assert allocator.allocs == allocator.frees == 1, "the block went back"


def test_callbacks_returning_the_wrong_type_fail_cleanly(acl, stream, capfd):
    ret, message, _, _ = _raising_case(acl, stream, capfd, alloc=lambda a, n: "block")
    assert ret == MEMORY_ALLOCATION
    assert "TypeError" in message
    ret, message, _, _ = _raising_case(acl, stream, capfd, alloc=lambda a, n: -1)
    assert ret == MEMORY_ALLOCATION and "ValueError" in message
    ret, message, _, _ = _raising_case(acl, stream, capfd, alloc=lambda a, n: None)
    assert ret == MEMORY_ALLOCATION, "None is NULL: a failed allocation"


def test_a_free_callback_that_raises_is_reported(acl, stream, capfd):
    allocator = CountingAllocator(acl)
    desc = allocator.descriptor("obj")

    def free(a, block):
        raise RuntimeError("free failed")

    assert acl.rt.allocator_set_free_func_to_desc(desc, free) == 0
    assert acl.rt.allocator_register(stream, desc) == 0
    assert aclalloc.launch_kernel(stream, 4096) == 0, "the launch itself succeeded"
    assert acl.rt.synchronize_stream(stream) == 0
    assert "free callback" in acl.get_recent_err_msg()
    assert "RuntimeError: free failed" in capfd.readouterr().err
    assert acl.rt.allocator_destroy_desc(desc) == 0
    for block in list(allocator.live):
        assert acl.rt.free(block) == 0


def test_a_kernel_that_raises_is_reported_from_the_worker(acl, stream, capfd):
    def kernel(workspace, size):
        raise ZeroDivisionError("kernel bug")

    assert aclalloc.launch_kernel(stream, 0, kernel) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert "ZeroDivisionError: kernel bug" in acl.get_recent_err_msg()
    assert "kernel bug" in capfd.readouterr().err


def test_launch_kernel_arguments(acl, stream):
    seen = {}
    assert aclalloc.launch_kernel(stream, 0, lambda w, n: seen.update(zero=(w, n))) == 0
    assert aclalloc.launch_kernel(None, 1000, lambda w, n: seen.update(default=(w, n))) == 0
    assert acl.rt.synchronize_stream(stream) == 0 and acl.rt.synchronize_stream(0) == 0
    assert seen["zero"] == (0, 0), "size 0: no workspace"
    workspace, size = seen["default"]
    assert workspace != 0 and size == 1000, "the default allocator served it"
    assert aclalloc.launch_kernel(stream, -1) == INVALID_PARAM
    assert aclalloc.launch_kernel(stream, 8, fn=42) == INVALID_PARAM
    assert aclalloc.launch_kernel(0xBAD0, 8) == INVALID_PARAM, "not a stream"
    assert acl.get_recent_err_msg()


def test_exiting_with_live_registrations_is_clean():
    result = run_python(
        """
        import aclalloc
        from aclalloc import acl
        assert acl.init(None) == 0 and acl.rt.set_device(0) == 0
        blocks = {}
        def alloc(obj, size):
            p, ret = acl.rt.malloc(size, 0)
            return p
        def free(obj, block):
            acl.rt.free(block)
        desc = acl.rt.allocator_create_desc()
        acl.rt.allocator_set_obj_to_desc(desc, object())
        acl.rt.allocator_set_alloc_func_to_desc(desc, alloc)
        acl.rt.allocator_set_free_func_to_desc(desc, free)
        acl.rt.allocator_set_get_addr_from_block_func_to_desc(desc, lambda b: b)
        streams = [acl.rt.create_stream()[0] for _ in range(3)]
        for s in streams:
            assert acl.rt.allocator_register(s, desc) == 0
            for _ in range(50):
                assert aclalloc.launch_kernel(s, 8192, lambda w, n: None) == 0
        print("exiting with launches pending and registrations live")
        """,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "exiting" in result.stdout
    assert "Traceback" not in result.stderr


def test_two_threads_launching_on_their_own_streams(acl):
    """Each thread has its stream and its allocator object; one descriptor
    per stream (the CANN contract for concurrent streams)."""
    context, ret = acl.rt.get_context()
    assert ret == 0
    results = {}

    def worker(index):
        assert acl.rt.set_context(context) == 0
        allocator = CountingAllocator(acl)
        desc = allocator.descriptor(("thread", index))
        s, ret = acl.rt.create_stream()
        assert ret == 0
        assert acl.rt.allocator_register(s, desc) == 0
        codes = [aclalloc.launch_kernel(s, 1024 * (1 + i % 4)) for i in range(300)]
        assert acl.rt.synchronize_stream(s) == 0
        assert acl.rt.destroy_stream(s) == 0, "drops the registration"
        assert acl.rt.allocator_destroy_desc(desc) == 0
        results[index] = (codes, allocator, s)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for index, (codes, allocator, _) in results.items():
        assert codes == [0] * 300
        assert allocator.allocs == allocator.frees == 300
        assert set(allocator.seen_objects) == {("thread", index)}
    from aclalloc import _callbacks

    for _, _, s in results.values():
        assert s not in _callbacks._registrations, "a destroyed stream's registration is dropped"


def test_c_code_calls_the_python_allocator_it_gets_from_the_registration(acl, stream):
    """What C code (a real executor) does with aclrtAllocatorGetByStream: call
    the four callbacks itself. They reach the Python functions, allocAdvise
    included, with the user's object and blocks."""
    import ctypes

    from aclalloc import _lib

    allocator = CountingAllocator(acl)
    advised = []

    def advise(obj, size, addr):
        advised.append((obj, size, addr))
        return allocator.alloc(obj, size)

    desc = allocator.descriptor("owner")
    assert acl.rt.allocator_set_alloc_advise_func_to_desc(desc, advise) == 0
    assert acl.rt.allocator_register(stream, desc) == 0
    got = [ctypes.c_void_p() for _ in range(6)]
    rc = _lib.lib.aclrtAllocatorGetByStream(
        stream, *[ctypes.byref(g) for g in got[:2]], *[ctypes.byref(g) for g in got[2:]]
    )
    assert rc == 0 and got[0].value == desc
    obj = got[1].value
    alloc = _lib.ALLOC_FUNC(got[2].value)
    free = _lib.FREE_FUNC(got[3].value)
    advise_fn = _lib.ALLOC_ADVISE_FUNC(got[4].value)
    get_addr = _lib.GET_ADDR_FUNC(got[5].value)

    block = alloc(obj, 1000)
    assert block and get_addr(block) in allocator.live
    block2 = advise_fn(obj, 2000, 0x5000)
    assert advised == [("owner", 2000, 0x5000)]
    assert get_addr(block2) in allocator.live and get_addr(block2) != get_addr(block)
    free(obj, block)
    free(obj, block2)
    assert allocator.allocs == allocator.frees == 2 and not allocator.live
    # A block freed twice, or a forged one, is reported and changes nothing.
    free(obj, block)
    assert "not a live block" in acl.get_recent_err_msg()
    assert get_addr(0x1234) is None
    assert alloc(0x1234, 8) is None, "a forged allocator object"
    assert "names no live Python allocator" in acl.get_recent_err_msg()
    assert allocator.frees == 2
    assert acl.rt.allocator_unregister(stream) == 0
    assert acl.rt.allocator_destroy_desc(desc) == 0
