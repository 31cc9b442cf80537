"""torch_npu's own pluggable-allocator tests (test/allocator/
test_pluggable_allocator_extensions.py in Ascend/pytorch) on aclalloc: its
extension module (cxx/pluggable_allocator_extensions.cpp, the same exports)
built against PyTorch's current DeviceStats and against the older one,
imported as a CPython extension (RTLD_LOCAL, as torch.utils.cpp_extension
loads it), its functions looked up by ``ctypes.CDLL`` and handed over by
address, and the four tests run in their order with aclalloc.npu in place of
torch_npu.npu (``torch.zeros(10, device='npu')`` becomes a 40-byte block
set to 0 and read back)."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from conftest import build_shared_object, run_python

SOURCE = Path(__file__).resolve().parent / "cxx" / "pluggable_allocator_extensions.cpp"


def _build(out_dir: Path, defines: tuple[str, ...]) -> Path:
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        pytest.fail(f"Python.h is not in {include}: install python3-dev (CI does)")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return build_shared_object(SOURCE, out_dir, defines, includes=(include,), suffix=suffix)


@pytest.fixture(scope="module", params=["current", "v1"])
def extension(request, tmp_path_factory) -> tuple[str, Path]:
    defines = ("EXT_DEVICE_STATS_V1",) if request.param == "v1" else ()
    return request.param, _build(tmp_path_factory.mktemp(f"ext_{request.param}"), defines)


def test_torch_npu_s_four_tests_pass_with_either_device_stats_layout(extension):
    layout, so = extension
    result = run_python(
        f"""
        import ctypes, importlib.util, sys
        from aclalloc import acl, npu
        assert acl.init(None) == 0 and acl.rt.set_device(0) == 0
        spec = importlib.util.spec_from_file_location(
            "pluggable_allocator_extensions", {str(so)!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        os_path = {str(so)!r}

        def zeros_round_trip(n):
            p = npu.caching_allocator_alloc(4 * n)
            assert acl.rt.memset(p, 4 * n, 0, 4 * n) == 0
            out = bytearray(b"\\xff" * (4 * n))
            assert acl.rt.memcpy(out, len(out), p, len(out), 2) == 0  # device to host
            return p, bytes(out)

        # test_pluggable_allocator
        new_alloc = npu.memory.NPUPluggableAllocator(os_path, "my_malloc", "my_free")
        npu.memory.change_current_allocator(new_alloc)
        assert not module.check_custom_allocator_used()
        kept, data = zeros_round_trip(10)
        assert data == bytes(40)
        assert module.check_custom_allocator_used()

        # test_pluggable_allocator_after_init
        ori, _ = zeros_round_trip(10)
        again = npu.memory.NPUPluggableAllocator(os_path, "my_malloc", "my_free")
        try:
            npu.memory.change_current_allocator(again)
            raise SystemExit("swapped an initialized allocator")
        except RuntimeError as e:
            assert "Can't swap an already initialized allocator" in str(e), e

        # test_set_get_device_stats_fn
        myallocator = ctypes.CDLL(os_path)
        get_device_stats_fn = ctypes.cast(
            getattr(myallocator, "my_get_device_stats"), ctypes.c_void_p).value
        new_alloc.allocator().set_get_device_stats_fn(get_device_stats_fn)
        assert npu.memory_stats_as_nested_dict()["num_alloc_retries"] == 0

        # test_set_reset_peak_status_fn
        reset_peak_status_fn = ctypes.cast(
            getattr(myallocator, "my_reset_peak_status"), ctypes.c_void_p).value
        new_alloc.allocator().set_reset_peak_status_fn(reset_peak_status_fn)
        npu.reset_peak_memory_stats()
        assert npu.max_memory_allocated() == 0

        # Beyond torch_npu's tests: with its layout declared, every figure is
        # the function's (a default-constructed DeviceStats: all 0).
        new_alloc.allocator().set_get_device_stats_fn(get_device_stats_fn, layout={layout!r})
        stats = npu.memory_stats()
        nonzero = {{k: v for k, v in stats.items() if v != 0}}
        assert not nonzero, nonzero
        npu.caching_allocator_delete(kept)
        npu.caching_allocator_delete(ori)
        sys.stdout.flush()
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr + result.stdout
    lines = result.stdout.strip().splitlines()
    assert "ok" in lines, result.stdout
    # The module's own prints: two allocations, the peak reset, two frees.
    assert sum(line.startswith("alloc ptr = ") for line in lines) == 2, result.stdout
    assert "resetPeakStatus success!" in lines, result.stdout
    assert sum(line.startswith("free ptr = ") for line in lines) == 2, result.stdout
