"""Loading libaclalloc and declaring the C functions the package calls.

The library is loaded once per process with ``RTLD_GLOBAL``: a pluggable
allocator ``.so`` loaded later that calls ``aclrtMalloc``/``aclrtFree``
without linking anything (as torch_npu's plugins do) resolves them here.
``ACLALLOC_LIB`` (a file, or a directory holding ``libaclalloc.so``) points
the package at another build; by default it loads the copy in the wheel.

Every module declares the C functions it calls with :func:`declare`, the
structures it mirrors with :func:`mirrors` and the library functions it
takes as function pointers with :func:`function_pointer`. The registries
they fill (:data:`SIGNATURES`, :data:`STRUCTS`, :data:`FUNCTION_POINTERS`)
are what tests/python/test_c_declarations.py holds to ``include/aclalloc.h``
and ``include/acl/*.h``: a declaration made another way escapes that check.
"""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import (
    POINTER,
    c_char_p,
    c_double,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, TypeVar

c_error = c_int
"""``aclError``."""

ACL_SUCCESS = 0
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACL_ERROR_API_NOT_SUPPORT = 200001
ACL_ERROR_RT_MEMORY_ALLOCATION = 207001
ACL_HBM_MEM = 1
ACLALLOC_STAT_KEY_COUNT = 121


def library_path() -> Path:
    """The libaclalloc this process loads: ``$ACLALLOC_LIB`` or the wheel's copy."""
    given = os.environ.get("ACLALLOC_LIB")
    if given:
        path = Path(given)
        return path / "libaclalloc.so" if path.is_dir() else path
    return Path(__file__).resolve().parent / "_native" / "libaclalloc.so.0"


def _load() -> ctypes.CDLL:
    path = library_path()
    try:
        return ctypes.CDLL(str(path), mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    except OSError as e:
        raise ImportError(
            f"aclalloc cannot load its library {path}: {e}. Reinstall the package "
            "(pip install .) or point ACLALLOC_LIB at a built libaclalloc.so."
        ) from e


lib: ctypes.CDLL = _load()
"""The process's libaclalloc; every function the package calls is declared
on it through :func:`declare`."""

SIGNATURES: Dict[str, Tuple[Any, Tuple[Any, ...]]] = {}
"""C function name -> ``(restype, argtypes)``, as :func:`declare` set them."""

STRUCTS: Dict[str, type] = {}
"""C type name -> the ``ctypes.Structure`` mirroring it (see :func:`mirrors`)."""

FUNCTION_POINTERS: Dict[str, Any] = {}
"""Library function name -> the ``CFUNCTYPE`` it is taken as (see
:func:`function_pointer`)."""

_T = TypeVar("_T", bound=type)


def declare(signatures: Mapping[str, Tuple[Any, Sequence[Any]]]) -> None:
    """Sets ``restype`` and ``argtypes`` of each named function of :data:`lib`
    and records them in :data:`SIGNATURES`. A function declared twice must be
    declared the same way: ctypes keeps only the last declaration, which
    would silently change the other caller's conversions."""
    for name, (restype, argtypes) in signatures.items():
        signature = (restype, tuple(argtypes))
        if SIGNATURES.get(name, signature) != signature:
            raise RuntimeError(f"aclalloc declares {name} twice, differently")
        try:
            function = getattr(lib, name)
        except AttributeError:
            raise ImportError(
                f"the library {library_path()} has no {name}: it is older than this "
                "package. Rebuild it, or unset ACLALLOC_LIB to use the wheel's copy."
            ) from None
        function.restype, function.argtypes = signature
        SIGNATURES[name] = signature


def mirrors(c_name: str) -> Callable[[_T], _T]:
    """Class decorator: records a ``ctypes.Structure`` as the mirror of the C
    structure type ``c_name``."""

    def record(cls: _T) -> _T:
        STRUCTS[c_name] = cls
        return cls

    return record


def function_pointer(name: str, functype: Any) -> Optional[Any]:
    """The library's function ``name`` as a ``functype`` (a ``CFUNCTYPE``)
    pointer, for passing to C rather than calling; None when the library (an
    older build, through ``ACLALLOC_LIB``) lacks it."""
    FUNCTION_POINTERS[name] = functype
    address = ctypes.cast(getattr(lib, name, None), c_void_p).value
    return functype(address) if address else None


@mirrors("aclallocStatEntry")
class PoolStatEntry(ctypes.Structure):
    """``aclallocStatEntry``: a PyTorch statistic name and its value. The key
    is read as an address: its string is static, so callers decode it once."""

    _fields_ = (("key", c_void_p), ("value", c_int64))


@mirrors("aclallocAllocatorStats")
class AllocatorStats(ctypes.Structure):
    """``aclallocAllocatorStats``: a pluggable or the default allocator's counters."""

    _fields_ = (
        ("allocatedBytesCurrent", c_uint64),
        ("allocatedBytesPeak", c_uint64),
        ("allocatedBytesTotal", c_uint64),
        ("freedBytesTotal", c_uint64),
        ("allocCount", c_uint64),
        ("freeCount", c_uint64),
        ("activeCount", c_uint64),
        ("activePeak", c_uint64),
        ("failedAllocCount", c_uint64),
        ("refusedFreeCount", c_uint64),
    )


@mirrors("aclallocPluggableConfig")
class PluggableConfig(ctypes.Structure):
    """``aclallocPluggableConfig``."""

    _fields_ = (
        ("path", c_char_p),
        ("allocSymbol", c_char_p),
        ("freeSymbol", c_char_p),
        ("initSymbol", c_char_p),
        ("emptyCacheSymbol", c_char_p),
        ("memoryFractionSymbol", c_char_p),
    )


ALLOC_FUNC = ctypes.CFUNCTYPE(c_void_p, c_void_p, c_size_t)
FREE_FUNC = ctypes.CFUNCTYPE(None, c_void_p, c_void_p)
ALLOC_ADVISE_FUNC = ctypes.CFUNCTYPE(c_void_p, c_void_p, c_size_t, c_void_p)
GET_ADDR_FUNC = ctypes.CFUNCTYPE(c_void_p, c_void_p)
KERNEL_FUNC = ctypes.CFUNCTYPE(None, c_void_p, c_size_t, c_void_p)

_P = POINTER
declare(
    {
        "aclInit": (c_error, (c_char_p,)),
        "aclFinalize": (c_error, ()),
        "aclGetRecentErrMsg": (c_char_p, ()),
        "aclrtSetDevice": (c_error, (c_int32,)),
        "aclrtResetDevice": (c_error, (c_int32,)),
        "aclrtGetDevice": (c_error, (_P(c_int32),)),
        "aclrtGetDeviceCount": (c_error, (_P(c_uint32),)),
        "aclrtCreateContext": (c_error, (_P(c_void_p), c_int32)),
        "aclrtDestroyContext": (c_error, (c_void_p,)),
        "aclrtSetCurrentContext": (c_error, (c_void_p,)),
        "aclrtGetCurrentContext": (c_error, (_P(c_void_p),)),
        "aclrtCreateStream": (c_error, (_P(c_void_p),)),
        "aclrtDestroyStream": (c_error, (c_void_p,)),
        "aclrtSynchronizeStream": (c_error, (c_void_p,)),
        "aclrtSynchronizeDevice": (c_error, ()),
        "aclrtMalloc": (c_error, (_P(c_void_p), c_size_t, c_int)),
        "aclrtFree": (c_error, (c_void_p,)),
        "aclrtMemcpy": (c_error, (c_void_p, c_size_t, c_void_p, c_size_t, c_int)),
        "aclrtMemset": (c_error, (c_void_p, c_size_t, c_int32, c_size_t)),
        "aclrtGetMemInfo": (c_error, (c_int, _P(c_size_t), _P(c_size_t))),
        "aclrtAllocatorCreateDesc": (c_void_p, ()),
        "aclrtAllocatorDestroyDesc": (c_error, (c_void_p,)),
        "aclrtAllocatorSetObjToDesc": (c_error, (c_void_p, c_void_p)),
        "aclrtAllocatorSetAllocFuncToDesc": (c_error, (c_void_p, ALLOC_FUNC)),
        "aclrtAllocatorSetFreeFuncToDesc": (c_error, (c_void_p, FREE_FUNC)),
        "aclrtAllocatorSetAllocAdviseFuncToDesc": (c_error, (c_void_p, ALLOC_ADVISE_FUNC)),
        "aclrtAllocatorSetGetAddrFromBlockFuncToDesc": (c_error, (c_void_p, GET_ADDR_FUNC)),
        "aclrtAllocatorRegister": (c_error, (c_void_p, c_void_p)),
        "aclrtAllocatorUnregister": (c_error, (c_void_p,)),
        "aclrtAllocatorGetByStream": (
            c_error,
            (c_void_p, _P(c_void_p), _P(c_void_p), c_void_p, c_void_p, c_void_p, c_void_p),
        ),
        "aclallocLaunchKernel": (c_error, (c_void_p, c_size_t, KERNEL_FUNC, c_void_p)),
        "aclallocDefaultMalloc": (c_error, (_P(c_void_p), c_size_t, c_void_p)),
        "aclallocDefaultFree": (c_error, (c_void_p,)),
        "aclallocSetDefaultAllocator": (c_error, (c_void_p,)),
        "aclallocGetDefaultAllocatorName": (c_char_p, ()),
        "aclallocGetDefaultAllocator": (c_error, (_P(c_void_p),)),
        "aclallocDefaultGetStats": (c_error, (_P(AllocatorStats),)),
        "aclallocDefaultInit": (c_error, ()),
        "aclallocDefaultGetDevice": (c_error, (_P(c_int32),)),
        "aclallocPluggableCreate": (c_error, (_P(PluggableConfig), _P(c_void_p), _P(c_void_p))),
        "aclallocPluggableGetStats": (c_error, (c_void_p, _P(AllocatorStats))),
        "aclallocPluggableResetPeakStats": (c_error, (c_void_p,)),
        "aclallocPluggableEmptyCache": (c_error, (c_void_p,)),
        "aclallocPluggableSetMemoryFraction": (c_error, (c_void_p, c_double, c_int32)),
        "aclallocPoolGetStatsKeyValues": (
            c_error,
            (c_void_p, _P(PoolStatEntry), c_size_t, _P(c_size_t)),
        ),
        "aclallocPoolResetPeakStats": (c_error, (c_void_p,)),
        "aclallocPoolResetAccumulatedStats": (c_error, (c_void_p,)),
        "aclallocPoolSummary": (c_error, (c_void_p, c_char_p, c_size_t, _P(c_size_t))),
        "aclallocPoolSnapshot": (c_error, (c_void_p, c_char_p, c_size_t, _P(c_size_t))),
        "aclallocPoolRecordHistory": (c_error, (c_void_p, c_size_t)),
        "aclallocPoolRecordStacks": (c_error, (c_void_p, c_char_p, c_char_p)),
        "aclallocSetPythonFrames": (c_error, (c_char_p,)),
        "aclallocPoolEmptyCache": (c_error, (c_void_p,)),
        "aclallocPoolSetMemoryLimit": (c_error, (c_void_p, c_size_t)),
        "aclallocPoolSetMemoryFraction": (c_error, (c_void_p, c_double)),
    }
)


def recent_c_message() -> str | None:
    """``aclGetRecentErrMsg()`` of this thread, decoded (None when empty)."""
    raw = lib.aclGetRecentErrMsg()
    return None if raw is None else raw.decode("utf-8", "replace")


_carried = threading.local()


def query(call: Callable[[], int]) -> int:
    """Runs a C call whose failure is an answer, not the caller's error (is
    anything registered? is the default allocator built?), without losing
    the messages this thread's earlier failures left for
    ``acl.get_recent_err_msg()``: those are carried over, the query's own
    message is dropped."""
    pending = recent_c_message()
    try:
        return call()
    finally:
        lib.aclGetRecentErrMsg()
        if pending:
            carried = getattr(_carried, "messages", None)
            if carried is None:
                carried = _carried.messages = []
            carried.append(pending)


def take_carried_messages() -> list[str]:
    """Messages :func:`query` carried over on this thread, newest first, cleared."""
    carried = getattr(_carried, "messages", None) or []
    _carried.messages = []
    return list(reversed(carried))
