"""NPUPluggableAllocator and change_current_allocator with a C .so built
here that calls aclrtMalloc/aclrtFree without linking any library."""

from __future__ import annotations

import ctypes

import pytest

from aclalloc import npu
from conftest import run_python


def test_the_library_s_acl_functions_are_global(acl):
    # What a plugin loaded later resolves its undefined aclrt* symbols from.
    process = ctypes.CDLL(None)
    assert process.aclrtMalloc and process.aclrtFree


def test_a_plugin_serves_the_default_allocator_and_a_stream(c_objects):
    plugin = c_objects["plugin_allocator"]
    result = run_python(
        f"""
        import ctypes
        import aclalloc
        from aclalloc import acl, npu
        assert acl.init(None) == 0 and acl.rt.set_device(0) == 0
        alloc = npu.NPUPluggableAllocator({str(plugin)!r}, "my_malloc", "my_free")
        npu.change_current_allocator(alloc)
        npu.change_current_allocator(alloc)  # again: still before first use
        counters = ctypes.CDLL({str(plugin)!r})
        ptrs = [npu.caching_allocator_alloc(n) for n in (100, 5000, 1 << 20)]
        assert counters.plugin_allocs() == 3
        stats = npu.memory_stats()
        assert stats["allocation.all.current"] == 3, stats
        assert stats["allocated_bytes.all.current"] == 100 + 5000 + (1 << 20), stats
        for p in ptrs:
            npu.caching_allocator_delete(p)
        assert counters.plugin_frees() == 3 and counters.plugin_size_mismatches() == 0
        assert npu.memory_allocated() == 0 and npu.max_memory_allocated() == 100 + 5000 + (1 << 20)
        npu.reset_peak_memory_stats()
        assert npu.max_memory_allocated() == 0
        try:
            npu.change_current_allocator(npu.NPUPluggableAllocator(
                {str(plugin)!r}, "my_malloc", "my_free"))
            raise SystemExit("swap after first use accepted")
        except RuntimeError as e:
            assert "already initialized" in str(e), e
        # The same plugin registered on a stream through pyACL.
        s, ret = acl.rt.create_stream()
        assert acl.rt.allocator_register(s, alloc.allocator()) == 0
        for _ in range(20):
            assert aclalloc.launch_kernel(s, 4096, lambda w, n: None) == 0
        assert acl.rt.synchronize_stream(s) == 0
        assert counters.plugin_allocs() == 23 and counters.plugin_frees() == 23
        try:
            npu.set_per_process_memory_fraction(0.5)
            raise SystemExit("a plugin without a fraction function accepted a fraction")
        except RuntimeError as e:
            assert "aclallocPluggableSetMemoryFraction" in str(e), e
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.strip() == "ok"


def test_the_swap_is_refused_after_first_use_in_a_fresh_interpreter(c_objects):
    plugin = c_objects["plugin_allocator"]
    result = run_python(
        f"""
        from aclalloc import acl, npu
        assert acl.init(None) == 0 and acl.rt.set_device(0) == 0
        p = npu.caching_allocator_alloc(1024)   # the default pool serves memory
        alloc = npu.NPUPluggableAllocator({str(plugin)!r}, "my_malloc", "my_free")
        try:
            npu.change_current_allocator(alloc)
        except RuntimeError as e:
            print(e)
        else:
            raise SystemExit("swapped after first use")
        npu.caching_allocator_delete(p)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "Can't swap an already initialized allocator" in result.stdout


def test_loading_errors_raise_with_the_library_s_message(c_objects, acl):
    with pytest.raises(RuntimeError, match="cannot be loaded"):
        npu.NPUPluggableAllocator("/nonexistent/plugin.so", "my_malloc", "my_free")
    with pytest.raises(RuntimeError, match="cannot be resolved"):
        npu.NPUPluggableAllocator(str(c_objects["plugin_allocator"]), "nope", "my_free")
    with pytest.raises(TypeError):
        npu.NPUPluggableAllocator(42, "my_malloc", "my_free")
    with pytest.raises(ValueError):
        npu.NPUPluggableAllocator("", "my_malloc", "my_free")
