"""torch_npu's pluggable-allocator flows: ``allocator()`` as an object whose
setters take C function pointers (ints), each function called where
torch_npu calls it, and a pluggable allocator's statistics with torch_npu's
keys. The plugin (c/hooks_allocator.c) records how it was called."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest

from aclalloc import npu
from conftest import ROOT, run_python

SETTERS = {
    "set_init_fn": "hk_init",
    "set_reset_fn": "hk_reset",
    "set_memory_fraction_fn": "hk_memory_fraction",
    "set_base_alloc_fn": "hk_base_alloc",
    "set_record_stream_fn": "hk_record_stream",
    "set_erase_stream_fn": "hk_erase_stream",
    "set_get_device_stats_fn": "hk_get_device_stats",
    "set_reset_peak_status_fn": "hk_reset_peak_status",
}


def test_every_hook_is_called_where_torch_npu_calls_it(c_objects):
    plugin = str(c_objects["hooks_allocator"])
    result = run_python(
        f"""
        import ctypes
        from aclalloc import acl, npu
        assert acl.init(None) == 0 and acl.rt.set_device(0) == 0
        so = {plugin!r}
        alloc = npu.NPUPluggableAllocator(so, "hk_malloc", "hk_free")
        hk = ctypes.CDLL(so)
        hk.hk_fraction_value.restype = ctypes.c_double
        hk.hk_last_stream_ptr.restype = ctypes.c_void_p
        hk.hk_last_stream.restype = ctypes.c_void_p
        def fn(name):
            return ctypes.cast(getattr(hk, name), ctypes.c_void_p).value
        for setter, name in {SETTERS!r}.items():
            getattr(alloc.allocator(), setter)(fn(name))
        assert alloc._allocator is alloc.allocator()
        npu.change_current_allocator(alloc)
        assert hk.hk_inits() == 0, "init waits for the first use"
        p = npu.caching_allocator_alloc(4096)
        q = npu.caching_allocator_alloc(100)
        assert hk.hk_inits() == 1 and hk.hk_init_device_count() == 2
        # Statistics: the function's, with torch_npu's keys.
        stats = npu.memory_stats()
        assert hk.hk_stats_device() == 0
        assert stats["num_alloc_retries"] == 3 and stats["num_ooms"] == 1, stats
        assert stats["allocated_bytes.all.current"] == 4196
        assert stats["allocation.all.allocated"] == 2
        assert stats["reserved_bytes.large_pool.peak"] == 1 << 30
        assert stats["oversize_segments.current"] == 2 and stats["max_split_size"] == 4096
        nested = npu.memory_stats_as_nested_dict()
        assert nested["num_alloc_retries"] == 3
        assert nested["allocated_bytes"]["all"]["current"] == 4196
        assert npu.memory_allocated() == 4196
        npu.memory_stats(1)
        assert hk.hk_stats_device() == 1, "the device is passed on"
        # Peaks, empty cache, the fraction.
        npu.reset_peak_memory_stats(1)
        assert hk.hk_peak_device() == 1
        npu.empty_cache()
        assert hk.hk_resets() == 1 and hk.hk_reset_check_error() == 1
        npu.set_per_process_memory_fraction(0.5)
        assert hk.hk_fraction_value() == 0.5 and hk.hk_fraction_device() == 0
        assert npu.get_per_process_memory_fraction() == 0.5
        # Streams and base allocations, for live blocks.
        s, ret = acl.rt.create_stream()
        alloc.record_stream(p, s)
        assert hk.hk_records() == 1 and hk.hk_last_stream_ptr() == p
        assert hk.hk_last_stream() == s
        alloc.erase_stream(q, s)
        assert hk.hk_erases() == 1 and hk.hk_last_stream_ptr() == q
        assert alloc.get_base_allocation(p) == (p & ~((1 << 20) - 1), 1 << 20)
        assert npu.get_allocator_backend() == "pluggable"
        assert npu.memory._get_current_allocator().allocator() is alloc.allocator()
        npu.caching_allocator_delete(p)
        npu.caching_allocator_delete(q)
        try:
            alloc.record_stream(p, s)
            raise SystemExit("a freed block reached the record-stream function")
        except RuntimeError as e:
            assert "aclallocPluggableRecordStream" in str(e), e
        assert hk.hk_records() == 1 and hk.hk_allocs() == 2 and hk.hk_frees() == 2
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.strip() == "ok"


def test_without_a_device_stats_function_the_counters_have_torch_npu_s_keys(c_objects):
    plugin = str(c_objects["hooks_allocator"])
    result = run_python(
        f"""
        from aclalloc import acl, npu
        assert acl.init(None) == 0 and acl.rt.set_device(0) == 0
        alloc = npu.NPUPluggableAllocator({plugin!r}, "hk_malloc", "hk_free")
        npu.change_current_allocator(alloc)
        p = npu.caching_allocator_alloc(1000)
        nested = npu.memory_stats_as_nested_dict()
        assert nested["num_alloc_retries"] == 0 and nested["num_ooms"] == 0, nested
        for key in ("allocation", "segment", "active", "inactive_split", "allocated_bytes",
                    "reserved_bytes", "active_bytes", "inactive_split_bytes",
                    "requested_bytes"):
            assert set(nested[key]) == {{"all", "small_pool", "large_pool"}}, key
        assert nested["allocated_bytes"]["all"]["current"] == 1000
        assert nested["allocation"]["all"]["current"] == 1
        npu.caching_allocator_delete(p)
        npu.reset_peak_memory_stats()
        assert npu.max_memory_allocated() == 0
        assert alloc.get_base_allocation(npu.caching_allocator_alloc(64))[1] == 64
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.strip() == "ok"


def test_setters_take_ints_and_refuse_other_values(c_objects):
    alloc = npu.NPUPluggableAllocator(str(c_objects["hooks_allocator"]), "hk_malloc", "hk_free")
    obj = alloc.allocator()
    assert int(obj) != 0 and obj._handle == alloc.handle()
    hk = ctypes.CDLL(str(c_objects["hooks_allocator"]))
    for setter, name in SETTERS.items():
        address = ctypes.cast(getattr(hk, name), ctypes.c_void_p).value
        getattr(obj, setter)(address)
        getattr(obj, setter)(0)  # unset
        with pytest.raises(TypeError):
            getattr(obj, setter)("not a pointer")
        with pytest.raises(TypeError):
            getattr(obj, setter)(True)
        with pytest.raises(ValueError):
            getattr(obj, setter)(-1)


def test_a_function_given_by_address_that_throws_is_an_error_with_its_what(c_objects, tmp_path):
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.fail("no C++ compiler (c++) on PATH; CI installs one")
    so = tmp_path / "libthrowing_hooks.so"
    source = ROOT / "tests" / "python" / "cxx" / "throwing_hooks.cpp"
    subprocess.run(
        [cxx, "-shared", "-fPIC", "-I", str(ROOT / "include"), str(source), "-o", str(so)],
        check=True,
    )
    result = run_python(
        f"""
        import ctypes
        from aclalloc import acl, npu
        assert acl.init(None) == 0 and acl.rt.set_device(0) == 0
        alloc = npu.NPUPluggableAllocator({str(c_objects["hooks_allocator"])!r},
                                          "hk_malloc", "hk_free")
        hooks = ctypes.CDLL({str(so)!r})
        fn = lambda name: ctypes.cast(getattr(hooks, name), ctypes.c_void_p).value
        alloc.allocator().set_get_device_stats_fn(fn("throwing_device_stats"))
        alloc.allocator().set_reset_fn(fn("throwing_reset"))
        npu.change_current_allocator(alloc)
        p = npu.caching_allocator_alloc(64)
        for call, what in ((npu.memory_stats, "device stats unavailable"),
                           (npu.empty_cache, "reset refused")):
            try:
                call()
                raise SystemExit(f"{{call.__name__}}: the exception was lost")
            except RuntimeError as e:
                assert what in str(e) and "C++ exception" in str(e), e
        npu.caching_allocator_delete(p)
        alloc.allocator().set_get_device_stats_fn(0)
        assert npu.memory_stats()["allocation.all.freed"] == 1, "works on after a throw"
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.strip() == "ok"


@pytest.mark.parametrize(
    "build, layout",
    [
        ("current", None),
        ("current", "current"),
        ("v1", "v1"),
    ],
)
def test_a_device_stats_function_of_either_layout_gives_the_right_figures(
    c_objects, hooks_v1, build, layout
):
    """A get_device_stats hook compiled against PyTorch's current DeviceStats
    (976 bytes, the default) or the older one (952 bytes, declared): the
    figures through memory_stats are its own, nothing written past the
    library's buffer (the current layout's hook writes 24 bytes more)."""
    plugin = str(c_objects["hooks_allocator"] if build == "current" else hooks_v1)
    result = run_python(
        f"""
        import ctypes
        from aclalloc import acl, npu
        assert acl.init(None) == 0 and acl.rt.set_device(0) == 0
        so = {plugin!r}
        hk = ctypes.CDLL(so)
        assert hk.hk_device_stats_size() == {976 if build == "current" else 952}
        alloc = npu.NPUPluggableAllocator(so, "hk_malloc", "hk_free")
        fn = ctypes.cast(hk.hk_get_device_stats, ctypes.c_void_p).value
        alloc.allocator().set_get_device_stats_fn(fn, layout={layout!r})
        npu.change_current_allocator(alloc)
        p = npu.caching_allocator_alloc(4096)
        q = npu.caching_allocator_alloc(100)
        npu.caching_allocator_delete(q)
        for _ in range(3):  # again and again: the same figures
            stats = npu.memory_stats()
            assert stats["allocated_bytes.all.current"] == 4096, stats
            assert stats["allocation.all.allocated"] == 2
            assert stats["allocation.all.freed"] == 1
            assert stats["reserved_bytes.large_pool.peak"] == 1 << 30
            assert stats["num_alloc_retries"] == 3 and stats["num_ooms"] == 1
            assert stats["oversize_segments.current"] == 2
            assert stats["max_split_size"] == 4096, stats["max_split_size"]
            nested = npu.memory_stats_as_nested_dict()
            tail = (nested["num_sync_all_streams"], nested["num_device_alloc"],
                    nested["num_device_free"])
            if {build!r} == "current":
                assert tail == (5, 102, 201), tail
            else:
                assert tail == (0, 0, 0), tail
            assert nested["max_split_size"] == 4096
        npu.caching_allocator_delete(p)
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.strip() == "ok"


def test_the_device_stats_layout_is_checked(c_objects):
    alloc = npu.NPUPluggableAllocator(str(c_objects["hooks_allocator"]), "hk_malloc", "hk_free")
    obj = alloc.allocator()
    for layout in ("v1", "current"):
        obj.set_device_stats_layout(layout)
    for bad in ("v2", "auto"):
        with pytest.raises(ValueError):
            obj.set_device_stats_layout(bad)
    with pytest.raises(TypeError):
        obj.set_device_stats_layout(1)


def test_libaclalloc_itself_is_a_torch_npu_pluggable_allocator():
    """torch_npu's NPUPluggableAllocator over libaclalloc's aclallocTorch*
    exports: allocations come from aclalloc's default caching pool, and
    memory_stats reflect them (the plugin layer's counters, then the pool's
    own through aclallocTorchGetDeviceStats)."""
    result = run_python(
        """
        import ctypes
        from aclalloc import acl, npu
        from aclalloc._lib import library_path
        assert acl.init(None) == 0 and acl.rt.set_device(0) == 0
        path = str(library_path())
        new_alloc = npu.NPUPluggableAllocator(path, "aclallocTorchMalloc", "aclallocTorchFree")
        so = ctypes.CDLL(path)
        def fn(name):
            return ctypes.cast(getattr(so, name), ctypes.c_void_p).value
        obj = new_alloc.allocator()
        obj.set_init_fn(fn("aclallocTorchInit"))
        obj.set_reset_fn(fn("aclallocTorchReset"))
        obj.set_memory_fraction_fn(fn("aclallocTorchSetMemoryFraction"))
        obj.set_base_alloc_fn(fn("aclallocTorchBaseAlloc"))
        obj.set_reset_peak_status_fn(fn("aclallocTorchResetPeakStatus"))
        npu.change_current_allocator(new_alloc)
        p = npu.caching_allocator_alloc(4096)
        q = npu.caching_allocator_alloc(1 << 20)
        stats = npu.memory_stats()
        assert stats["allocation.all.current"] == 2, stats
        assert stats["allocated_bytes.all.current"] == 4096 + (1 << 20), stats
        base, size = new_alloc.get_base_allocation(p)
        assert base <= p and p + 4096 <= base + size
        # The pool's own statistics, in PyTorch's current layout.
        obj.set_get_device_stats_fn(fn("aclallocTorchGetDeviceStats"))
        stats = npu.memory_stats()
        assert stats["allocation.all.current"] == 2, stats
        assert stats["requested_bytes.all.current"] == 4096 + (1 << 20), stats
        assert stats["allocated_bytes.all.current"] >= 4096 + (1 << 20)
        assert stats["reserved_bytes.all.current"] >= stats["allocated_bytes.all.current"]
        assert stats["segment.all.current"] >= 1 and stats["num_device_alloc"] >= 1
        assert npu.memory_allocated() == stats["allocated_bytes.all.current"]
        npu.caching_allocator_delete(p)
        npu.caching_allocator_delete(q)
        stats = npu.memory_stats()
        assert stats["allocation.all.current"] == 0 and stats["allocation.all.freed"] == 2
        npu.reset_peak_memory_stats()
        assert npu.memory_stats()["allocated_bytes.all.peak"] == 0
        npu.empty_cache()
        assert npu.memory_stats()["reserved_bytes.all.current"] == 0
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.strip() == "ok"


def test_torch_npu_allocator_wires_libaclalloc_in_one_call(tmp_path):
    """aclalloc.torch_npu_allocator(): torch_npu.npu when importable (here a
    stand-in package whose npu is aclalloc.npu, torch_npu's names), every
    hook set: the figures are the pool's (num_device_alloc comes only from
    aclallocTorchGetDeviceStats), empty_cache gives its segments back."""
    fake = tmp_path / "torch_npu"
    fake.mkdir()
    (fake / "__init__.py").write_text("from aclalloc import npu  # noqa: F401\n")
    result = run_python(
        """
        import aclalloc
        from aclalloc import acl, npu
        assert acl.init(None) == 0 and acl.rt.set_device(0) == 0
        alloc = aclalloc.torch_npu_allocator()
        assert npu.get_allocator_backend() == "pluggable"
        assert npu.memory._get_current_allocator().allocator() is alloc.allocator()
        p = npu.caching_allocator_alloc(1000)
        stats = npu.memory_stats()
        assert stats["requested_bytes.all.current"] == 1000, stats
        assert stats["allocated_bytes.all.current"] == 1024, stats
        assert stats["num_device_alloc"] >= 1 and stats["reserved_bytes.all.current"] > 0
        npu.caching_allocator_delete(p)
        npu.reset_peak_memory_stats()
        assert npu.max_memory_allocated() == 0
        npu.empty_cache()
        assert npu.memory_reserved() == 0
        try:
            aclalloc.torch_npu_allocator()
            raise SystemExit("installed after the first allocation")
        except RuntimeError as e:
            assert "already initialized" in str(e), e
        assert aclalloc.torch_npu_allocator(install=False).allocator() is not None
        print("ok")
        """,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.strip() == "ok"


def test_torch_npu_allocator_without_torch_npu_says_what_to_do():
    result = run_python(
        """
        import sys
        sys.modules["torch_npu"] = None  # not importable, whatever is installed
        import aclalloc
        try:
            aclalloc.torch_npu_allocator()
        except ImportError as e:
            print(e)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "torch_npu" in result.stdout and "aclalloc.npu" in result.stdout
