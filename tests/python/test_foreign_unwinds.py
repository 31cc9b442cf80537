"""Foreign unwinds and exceptions through the Python package: a daemon
thread that launches Python kernels while the interpreter exits (CPython
ends the stream's worker with pthread_exit when a kernel asks for the GIL
then), and a pluggable allocator written in C++ that throws."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import ROOT, run_python


def test_a_daemon_thread_launching_python_kernels_lets_the_interpreter_exit():
    code = """
        import threading, time
        import aclalloc
        from aclalloc import acl
        assert acl.init(None) == 0 and acl.rt.set_device(0) == 0

        def kernel(address, size):
            time.sleep(0.0005)

        def launching():
            assert acl.rt.set_device(0) == 0
            while True:
                assert aclalloc.launch_kernel(None, 256, kernel) == 0

        threading.Thread(target=launching, daemon=True).start()
        time.sleep(0.2)
        print("exiting")
        """
    for run in range(5):
        result = run_python(code)
        assert result.returncode == 0 and result.stdout == "exiting\n", (
            run,
            result.returncode,
            result.stdout,
            result.stderr,
        )


def test_a_throwing_plugin_s_what_is_in_the_exception_and_the_next_call_works(tmp_path):
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.fail("no C++ compiler (c++) on PATH; CI installs one")
    so = tmp_path / "libthrowing_plugin.so"
    source = ROOT / "tests" / "plugin_support" / "throwing_plugin.cpp"
    subprocess.run([cxx, "-shared", "-fPIC", str(source), "-o", str(so)], check=True)
    result = run_python(
        f"""
        from aclalloc import acl, npu
        assert acl.init(None) == 0 and acl.rt.set_device(0) == 0
        alloc = npu.NPUPluggableAllocator({str(so)!r}, "throwing_malloc", "throwing_free")
        npu.change_current_allocator(alloc)
        try:
            npu.caching_allocator_alloc(512)
        except RuntimeError as e:
            print(type(e).__name__, str(e).replace(chr(10), " | "))
        else:
            raise SystemExit("no exception")
        npu.caching_allocator_delete(npu.caching_allocator_alloc(512))
        print("the next call works")
        """,
        env={"THROWING_CALL": "1"},
    )
    assert result.returncode == 0, (result.stdout, result.stderr)
    first, second = result.stdout.splitlines()
    assert "throwing_malloc" in first and "threw a C++ exception: the plugin gives up" in first
    assert second == "the next call works"
