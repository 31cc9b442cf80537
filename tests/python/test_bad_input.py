"""Every pyACL-shaped function with every kind of bad argument returns a code
(never raises, never crashes), and every torch_npu-shaped one raises
TypeError, ValueError or RuntimeError. Run in a fresh interpreter, so that a
crash shows as the child's exit status instead of taking pytest down."""

from __future__ import annotations

from conftest import run_python

SCRIPT = r"""
import inspect, itertools
import aclalloc
from aclalloc import acl, npu

assert acl.init(None) == 0 and acl.rt.set_device(0) == 0
freed, ret = acl.rt.malloc(4096)
assert acl.rt.free(freed) == 0
stream, _ = acl.rt.create_stream()
dead_stream, _ = acl.rt.create_stream()
assert acl.rt.destroy_stream(dead_stream) == 0
dead_desc = acl.rt.allocator_create_desc()
assert acl.rt.allocator_destroy_desc(dead_desc) == 0
BAD = [None, -1, 1 << 64, "x", 1.5, object(), 0xDEAD0, freed, dead_stream, dead_desc, True]

def good(name):
    return {"size": 64, "policy": 0, "dest_max": 64, "count": 8, "max_count": 64, "value": 0,
            "kind": 3, "attr": 1, "device_id": 0, "stream": stream}.get(name, 0)

calls = 0
for name in acl.rt.__all__:
    function = getattr(acl.rt, name)
    params = list(inspect.signature(function).parameters)
    for position, bad in itertools.product(range(len(params)), BAD):
        args = [good(p) for p in params]
        args[position] = bad
        if name in ("reset_device", "destroy_context", "destroy_stream") and bad in (0,):
            continue
        result = function(*args)
        ret = result[-1] if isinstance(result, tuple) else result
        assert isinstance(ret, int), (name, args, result)
        if name in ("allocator_create_desc",):
            continue
        if ret != 0 and ret is not result:
            assert all(v == 0 for v in result[:-1]), (name, args, result)
        acl.get_recent_err_msg()
        calls += 1
for bad in BAD:
    ret = aclalloc.launch_kernel(bad, 64)
    assert isinstance(ret, int)
    acl.get_recent_err_msg()
    calls += 1

NPU = {
    "caching_allocator_alloc": 1, "caching_allocator_delete": 1,
    "set_per_process_memory_fraction": 1, "memory_stats": 1, "memory_allocated": 1,
    "memory_summary": 1, "mem_get_info": 1, "reset_peak_memory_stats": 1,
    "NPUPluggableAllocator": 3, "change_current_allocator": 1,
}
raised = 0
for name, arity in NPU.items():
    function = getattr(npu, name)
    for position, bad in itertools.product(range(arity), BAD + [2.0, -0.5, 10**30]):
        args = ["npu:0"] * arity
        args[position] = bad
        try:
            function(*args)
        except (TypeError, ValueError, RuntimeError):
            raised += 1
print(calls, raised)
"""


def test_no_bad_argument_crashes_or_raises_from_pyacl_functions():
    result = run_python(SCRIPT, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    calls, raised = map(int, result.stdout.split())
    assert calls > 300
    assert raised > 100
