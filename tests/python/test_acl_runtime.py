"""aclalloc.acl: pyACL's runtime functions, their return conventions, and
bad input answered with codes and messages, never a crash."""

from __future__ import annotations

import ctypes

import pytest

from conftest import run_python

INVALID_PARAM = 100000
CONTEXT_NULL = 107002
INVALID_DEVICE = 107001


def test_init_twice_and_finalize_in_a_fresh_interpreter():
    result = run_python(
        """
        from aclalloc import acl
        assert acl.init(None) == 0
        assert acl.init("") == 100002, "repeat initialize"
        assert "aclInit" in acl.get_recent_err_msg()
        assert acl.get_recent_err_msg() is None, "messages are cleared once read"
        assert acl.init(42) == 100000
        assert "config_path" in acl.get_recent_err_msg()
        assert acl.rt.set_device(0) == 0
        s, ret = acl.rt.create_stream()
        assert ret == 0
        assert acl.finalize() == 0
        assert acl.finalize() == 100037, "repeat finalize"
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_devices(acl):
    count, ret = acl.rt.get_device_count()
    assert (count, ret) == (2, 0)
    assert acl.rt.get_device() == (0, 0)
    assert acl.rt.set_device(1) == 0
    assert acl.rt.get_device() == (1, 0)
    assert acl.rt.reset_device(1) == 0
    assert acl.rt.set_device(0) == 0
    assert acl.rt.set_device(7) == INVALID_DEVICE
    assert "7" in acl.get_recent_err_msg()
    for bad in (-(1 << 40), "0", None, 1.0):
        assert acl.rt.set_device(bad) == INVALID_PARAM
        assert "device_id" in acl.get_recent_err_msg()
    assert acl.rt.reset_device("x") == INVALID_PARAM
    acl.get_recent_err_msg()


def test_contexts(acl):
    main, ret = acl.rt.get_context()
    assert ret == 0 and main != 0
    ctx, ret = acl.rt.create_context(1)
    assert ret == 0 and ctx not in (0, main)
    assert acl.rt.get_context() == (ctx, 0), "a new context is current"
    assert acl.rt.get_device() == (1, 0)
    assert acl.rt.set_context(main) == 0
    assert acl.rt.get_device() == (0, 0)
    assert acl.rt.destroy_context(ctx) == 0
    assert acl.rt.destroy_context(ctx) == INVALID_PARAM, "destroyed twice"
    assert acl.get_recent_err_msg()
    assert acl.rt.set_context(0xDEAD0000) == INVALID_PARAM, "never created"
    assert acl.get_recent_err_msg()
    assert acl.rt.create_context(9)[1] == INVALID_DEVICE
    assert acl.rt.create_context("1") == (0, INVALID_PARAM)
    acl.get_recent_err_msg()


def test_a_thread_without_a_context(acl):
    import threading

    seen = {}

    def body():
        seen["device"] = acl.rt.get_device()
        seen["context"] = acl.rt.get_context()
        seen["msg"] = acl.get_recent_err_msg()

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen["device"] == (0, CONTEXT_NULL)
    assert seen["context"] == (0, CONTEXT_NULL)
    assert seen["msg"]


def test_streams(acl):
    s, ret = acl.rt.create_stream()
    assert ret == 0 and s
    assert acl.rt.synchronize_stream(s) == 0
    assert acl.rt.synchronize_stream(0) == 0, "0: the default stream"
    assert acl.rt.synchronize_device() == 0
    assert acl.rt.destroy_stream(s) == 0
    assert acl.rt.destroy_stream(s) == INVALID_PARAM, "a destroyed stream"
    assert acl.rt.synchronize_stream(s) == INVALID_PARAM
    assert acl.get_recent_err_msg()
    assert acl.rt.destroy_stream(-1) == INVALID_PARAM
    assert acl.rt.destroy_stream(1 << 64) == INVALID_PARAM
    assert "stream" in acl.get_recent_err_msg()


def test_memory_copy_set_and_info(acl):
    free_before, total, ret = acl.rt.get_mem_info(1)
    assert ret == 0 and total == 1 << 30 and free_before <= total
    dev, ret = acl.rt.malloc(4096, 0)
    assert ret == 0 and dev
    free_after, _, _ = acl.rt.get_mem_info(1)
    assert free_after <= free_before - 4096
    assert acl.rt.memset(dev, 4096, 0x5A, 4096) == 0
    out = bytearray(16)
    assert acl.rt.memcpy(out, 16, dev, 16, 2) == 0  # device to host
    assert out == b"\x5a" * 16
    assert acl.rt.memcpy(dev, 4096, b"hello", 5, 1) == 0  # host to device
    assert acl.rt.memcpy(out, 16, dev, 5, 2) == 0
    assert bytes(out[:5]) == b"hello"
    host = (ctypes.c_char * 8)()
    assert acl.rt.memcpy(ctypes.addressof(host), 8, dev, 8, 2) == 0, "an int host address"
    assert host.raw[:5] == b"hello"
    # Device ranges are checked: past the end of the allocation.
    assert acl.rt.memset(dev, 8192, 0, 8192) == INVALID_PARAM
    assert acl.get_recent_err_msg()
    # Host buffers bound the copy.
    assert acl.rt.memcpy(out, 64, dev, 64, 2) == INVALID_PARAM
    assert "dest_max" in acl.get_recent_err_msg()
    assert acl.rt.memcpy(b"ro", 2, dev, 2, 2) == INVALID_PARAM
    assert "read-only" in acl.get_recent_err_msg()
    assert acl.rt.memcpy(dev, 10, "text", 4, 1) == INVALID_PARAM
    acl.get_recent_err_msg()
    assert acl.rt.free(dev) == 0
    assert acl.rt.free(dev) == INVALID_PARAM, "a freed pointer"
    assert "aclrtFree" in acl.get_recent_err_msg()
    assert acl.rt.memset(dev, 16, 0, 16) == INVALID_PARAM, "a freed pointer"
    acl.get_recent_err_msg()


@pytest.mark.parametrize(
    "call",
    [
        lambda acl: acl.rt.malloc(-1),
        lambda acl: acl.rt.malloc("1"),
        lambda acl: acl.rt.malloc(1 << 70),
        lambda acl: acl.rt.free(None),
        lambda acl: acl.rt.free(-5),
        lambda acl: acl.rt.free(0x1234),
        lambda acl: acl.rt.memset(0x1234, 8, 0, 8),
        lambda acl: acl.rt.memset(object(), 8, 0, 8),
        lambda acl: acl.rt.get_mem_info("hbm"),
        lambda acl: acl.rt.malloc(1 << 40),
    ],
)
def test_bad_memory_input_returns_a_code_and_a_message(acl, call):
    result = call(acl)
    ret = result[-1] if isinstance(result, tuple) else result
    assert ret != 0
    if isinstance(result, tuple):
        assert all(v == 0 for v in result[:-1]), "no value on failure"
    assert acl.get_recent_err_msg()


def test_the_package_s_own_queries_keep_earlier_messages(acl, stream):
    from aclalloc import npu

    desc = acl.rt.allocator_create_desc()
    acl.rt.allocator_set_obj_to_desc(desc, 1)
    acl.rt.allocator_set_alloc_func_to_desc(desc, lambda a, n: 0)
    acl.rt.allocator_set_free_func_to_desc(desc, lambda a, b: None)
    acl.rt.allocator_set_get_addr_from_block_func_to_desc(desc, lambda b: b)
    assert acl.rt.allocator_register(stream, desc) == 0
    assert acl.rt.free(0x1234) == INVALID_PARAM
    # Queries that fail by design (is anything registered? the default
    # allocator? the current device?) must not swallow that message.
    assert acl.rt.destroy_stream(0xBAD) == INVALID_PARAM  # prunes registrations
    npu.memory_stats()
    message = acl.get_recent_err_msg()
    assert "aclrtFree failed" in message and "aclrtDestroyStream failed" in message
    assert message.index("aclrtDestroyStream") < message.index("aclrtFree"), "newest first"
    assert acl.get_recent_err_msg() is None
    assert acl.rt.allocator_destroy_desc(desc) == 0
