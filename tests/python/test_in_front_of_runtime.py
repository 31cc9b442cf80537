"""libaclalloc in front of a runtime that is not its own, the way torch_npu
meets CANN: the stand-in vendor runtime (tests/vendor/libfakeascendcl.c,
installed here as libascendcl.so, with counters) is loaded RTLD_LOCAL by a
CPython extension module that links it (ext/npu_c.c, in the place of
torch_npu's ``_C``), imported before aclalloc; libaclalloc then finds that
runtime among the loaded objects and forwards to it. Device memory must
come from the stand-in, the torch_npu hooks must report aclalloc's pool,
MemPools and tags must work on that memory, and, with libaclalloc
preloaded (what ``aclalloc run`` does), memory the extension allocates
itself inside a region must sleep and wake."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

import aclalloc
from conftest import ROOT, build_shared_object, run_python

VENDOR = ROOT / "tests" / "vendor"
EXT = Path(__file__).resolve().parent / "ext" / "npu_c.c"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A directory with libascendcl.so (the stand-in) and the extension npu_c."""
    out = tmp_path_factory.mktemp("in_front")
    build_shared_object(
        VENDOR / "libfakeascendcl.c",
        out,
        name="libascendcl",
        includes=(str(VENDOR),),
        link=("-Wl,-soname,libascendcl.so", "-ldl", "-lpthread"),
    )
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        pytest.fail(f"Python.h is not in {include}: install python3-dev (CI does)")
    build_shared_object(
        EXT,
        out,
        includes=(include,),
        suffix=sysconfig.get_config_var("EXT_SUFFIX") or ".so",
        link=(f"-L{out}", "-lascendcl", f"-Wl,-rpath,{out}"),
    )
    return out


# The start of every scenario: the extension first (it loads the runtime
# RTLD_LOCAL, as `import torch_npu` does), then aclalloc.
PRELUDE = """
import ctypes, sys
sys.path.insert(0, {dir!r})
import npu_c
vendor = ctypes.CDLL({dir!r} + "/libascendcl.so", mode=ctypes.RTLD_LOCAL)
vendor.fakeVendorPhysicalBytes.restype = ctypes.c_size_t
vendor.fakeVendorDeviceMallocs.restype = ctypes.c_uint64
vendor.fakeVendorVmCalls.restype = ctypes.c_uint64
import aclalloc
from aclalloc import acl, npu
assert acl.init(None) == 0 and acl.rt.set_device(0) == 0
def device_calls():
    return vendor.fakeVendorDeviceMallocs() + vendor.fakeVendorVmCalls()
"""


def _run(built: Path, body: str, preload: bool = False):
    env = {"LD_PRELOAD": str(aclalloc.library_path())} if preload else {}
    code = PRELUDE.format(dir=str(built)) + body
    result = run_python(code, env=env)
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.strip().splitlines()[-1] == "ok", result.stdout
    return result


def test_torch_npu_s_path_takes_device_memory_from_the_runtime(built):
    _run(
        built,
        """
alloc = aclalloc.torch_npu_allocator(npu)
before = device_calls()
p = npu.caching_allocator_alloc(3 << 20)
assert device_calls() > before, "the pool grew through the stand-in"
stats = npu.memory_stats()
assert stats["requested_bytes.all.current"] == 3 << 20, stats
assert stats["num_device_alloc"] >= 1 and stats["reserved_bytes.all.current"] >= 3 << 20
# The block is the stand-in's memory: its own copy reaches it.
assert npu_c.write(p, b"abc" * 100) == 0
rc, data = npu_c.read(p, 300)
assert rc == 0 and data == b"abc" * 100
# A MemPool from the allocator object's _allocator, as serving engines build it.
pool = npu.MemPool(alloc._allocator)
with npu.use_mem_pool(pool):
    q = npu.caching_allocator_alloc(4096)
# The pool's segment is a block of the device's pool, counted there.
assert npu.memory_stats()["allocation.all.current"] == 2
npu.caching_allocator_delete(q)
npu.caching_allocator_delete(p)
npu.empty_cache()
assert npu.memory_reserved() > 0, "a live MemPool keeps its segment, as PyTorch's"
del pool
npu.empty_cache()
assert npu.memory_reserved() == 0
print("ok")
""",
    )


def test_a_tagged_mem_pool_sleeps_on_the_runtime_s_memory(built):
    _run(
        built,
        """
pool = npu.MemPool(tag="kv")
with npu.use_mem_pool(pool):
    p = npu.caching_allocator_alloc(5 << 20)
pattern = bytes(range(256)) * 64
assert npu_c.write(p, pattern) == 0
held = vendor.fakeVendorPhysicalBytes()
assert held >= 5 << 20, "a tagged pool maps the runtime's physical memory"
npu.sleep(offload_tags=("kv",))
asleep = vendor.fakeVendorPhysicalBytes()
assert asleep == 0, (asleep, held)
npu.wake_up()
assert vendor.fakeVendorPhysicalBytes() == held
rc, data = npu_c.read(p, len(pattern))
assert rc == 0 and data == pattern, "contents restored at the same address"
with npu.use_mem_pool(pool):
    npu.caching_allocator_delete(p)
print("ok")
""",
    )


def test_a_region_sleeps_the_extension_s_own_memory_when_preloaded(built):
    _run(
        built,
        """
base = vendor.fakeVendorPhysicalBytes()
with npu.region("weights"):
    rc, p = npu_c.malloc(3 << 20)
    assert rc == 0, acl.get_recent_err_msg()
    rc, va, handle = npu_c.segment(4 << 20)
    assert rc == 0, acl.get_recent_err_msg()
assert vendor.fakeVendorPhysicalBytes() - base >= 7 << 20, "made with the runtime's physical memory"
a, b = b"weights!" * 4096, b"segment." * 4096
assert npu_c.write(p, a) == 0 and npu_c.write(va, b) == 0
npu.sleep(offload_tags=("weights",))
assert vendor.fakeVendorPhysicalBytes() == base, "asleep: every page given back"
rc, _ = npu_c.read(p, 8)
assert rc != 0 and "weights" in acl.get_recent_err_msg(), (rc, acl.get_recent_err_msg())
npu.wake_up()
assert npu_c.read(p, len(a)) == (0, a) and npu_c.read(va, len(b)) == (0, b)
assert npu_c.release_segment(va, handle) == 0 and npu_c.free(p) == 0
assert vendor.fakeVendorPhysicalBytes() == base
print("ok")
""",
        preload=True,
    )
