"""Shared helpers of the Python tests.

The library's state is per process (runtime, default allocator), so tests
that need a fresh one (a swap before first use, the default allocator's
device, exit behaviour) run a snippet in a new interpreter with
:func:`run_python`; the others share this process, initialised once.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

os.environ.setdefault("ACLALLOC_DEVICE_COUNT", "2")
os.environ.setdefault("ACLALLOC_DEVICE_MEMORY", "1GiB")

ROOT = Path(__file__).resolve().parents[2]
C_DIR = Path(__file__).resolve().parent / "c"

# Device 0's HBM, pinned: aclrtPhysicalMemProp as pyACL's
# acl.rt.malloc_physical takes it (the values are CANN's enums).
HBM_PROP = {
    "handleType": 0,  # ACL_MEM_HANDLE_TYPE_NONE
    "allocationType": 0,  # ACL_MEM_ALLOCATION_TYPE_PINNED
    "memAttr": 4,  # ACL_HBM_MEM_HUGE
    "location": {"id": 0, "type": 1},  # ACL_MEM_LOCATION_TYPE_DEVICE
}


def run_python(
    code: str, env: dict | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh interpreter; returns the completed process."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


def build_shared_object(
    source: Path,
    out_dir: Path,
    defines: tuple[str, ...] = (),
    name: str | None = None,
    includes: tuple[str, ...] = (),
    suffix: str = ".so",
    link: tuple[str, ...] = (),
) -> Path:
    """Compiles a C or C++ file (by its suffix) into a shared object with no
    libraries linked, warnings as errors (``defines``: ``-D`` switches;
    ``name``: the object's stem, else the source's; ``includes``: more
    ``-I`` directories; ``suffix``: the object's file suffix; ``link``:
    arguments after the source, for the linker)."""
    if source.suffix == ".cpp":
        compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
        language = ("-std=c++17",)
    else:
        compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        language = ()
    if compiler is None:
        pytest.fail(f"no compiler for {source.name} on PATH; CI installs one")
    out = out_dir / ((name or source.stem) + suffix)
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            "-Wall",
            "-Wextra",
            "-Werror",
            *language,
            *(f"-D{d}" for d in defines),
            *(arg for d in (*includes, str(ROOT / "include")) for arg in ("-I", d)),
            str(source),
            *link,
            "-o",
            str(out),
        ],
        check=True,
    )
    return out


@pytest.fixture(scope="session")
def c_objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The test's C shared objects, built once."""
    out = tmp_path_factory.mktemp("c")
    return {p.stem: build_shared_object(p, out) for p in sorted(C_DIR.glob("*.c"))}


@pytest.fixture(scope="session")
def hooks_v1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """c/hooks_allocator.c built with PyTorch's older DeviceStats layout."""
    out = tmp_path_factory.mktemp("c_v1")
    source = C_DIR / "hooks_allocator.c"
    return build_shared_object(source, out, ("HK_DEVICE_STATS_V1",), "hooks_allocator_v1")


@pytest.fixture(scope="session")
def probe(c_objects: dict[str, Path]) -> ctypes.CDLL:
    """C code in this process reading the C API (see c/probe.c)."""
    import aclalloc  # noqa: F401  (loads libaclalloc with RTLD_GLOBAL first)

    lib = ctypes.CDLL(str(c_objects["probe"]))
    lib.probe_default_pool_stat.restype = ctypes.c_int64
    lib.probe_default_pool_stat.argtypes = (ctypes.c_char_p,)
    lib.probe_registered_desc.restype = ctypes.c_void_p
    lib.probe_registered_desc.argtypes = (ctypes.c_void_p,)
    return lib


@pytest.fixture(scope="session")
def acl():
    """``aclalloc.acl`` with the runtime initialised and device 0 current."""
    from aclalloc import acl as acl_module

    assert acl_module.init(None) == 0
    assert acl_module.rt.set_device(0) == 0
    return acl_module


@pytest.fixture
def stream(acl):
    """A fresh stream, destroyed after the test."""
    s, ret = acl.rt.create_stream()
    assert ret == 0 and s != 0
    yield s
    assert acl.rt.destroy_stream(s) == 0
