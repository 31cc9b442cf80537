"""libaclalloc as torch_npu's allocator in one call.

torch_npu takes a pluggable allocator as a shared object and two function
names, and its other functions by address (``allocator().set_*_fn``).
:func:`torch_npu_allocator` hands torch_npu libaclalloc's ``aclallocTorch*``
exports (``docs/PLUGGABLE.md``), so every tensor torch_npu allocates comes
from aclalloc's caching pool of its device and ``memory_stats``,
``reset_peak_memory_stats``, ``empty_cache`` and
``set_per_process_memory_fraction`` read and drive that pool.
"""

from __future__ import annotations

import ctypes
from ctypes import CFUNCTYPE, POINTER, c_bool, c_double, c_int32, c_size_t, c_void_p
from types import ModuleType
from typing import Any, Optional

from ._lib import function_pointer, library_path
from .npu._pluggable import DeviceStats

MALLOC, FREE = "aclallocTorchMalloc", "aclallocTorchFree"

_SIGNATURES = {
    MALLOC: CFUNCTYPE(c_void_p, c_size_t, c_int32, c_void_p),
    FREE: CFUNCTYPE(None, c_void_p, c_size_t, c_int32, c_void_p),
    "aclallocTorchInit": CFUNCTYPE(None, c_int32),
    "aclallocTorchReset": CFUNCTYPE(None, c_bool),
    "aclallocTorchSetMemoryFraction": CFUNCTYPE(None, c_double, c_int32),
    "aclallocTorchBaseAlloc": CFUNCTYPE(c_void_p, c_void_p, POINTER(c_size_t)),
    "aclallocTorchGetDeviceStats": CFUNCTYPE(DeviceStats, c_int32),
    "aclallocTorchResetPeakStatus": CFUNCTYPE(None, c_int32),
}
"""Each export torch_npu is given, with its C signature (checked against
``include/aclalloc.h`` with the package's other declarations)."""

_POINTERS = {name: function_pointer(name, functype) for name, functype in _SIGNATURES.items()}

HOOKS = (
    ("set_init_fn", "aclallocTorchInit"),
    ("set_reset_fn", "aclallocTorchReset"),
    ("set_memory_fraction_fn", "aclallocTorchSetMemoryFraction"),
    ("set_base_alloc_fn", "aclallocTorchBaseAlloc"),
    ("set_get_device_stats_fn", "aclallocTorchGetDeviceStats"),
    ("set_reset_peak_status_fn", "aclallocTorchResetPeakStatus"),
)
"""torch_npu's setter -> the libaclalloc export it is given."""


def _torch_npu_npu() -> ModuleType:
    try:
        import torch_npu  # type: ignore[import-not-found]
    except ImportError as e:
        raise ImportError(
            "aclalloc.torch_npu_allocator() wires libaclalloc into torch_npu, which "
            f"cannot be imported here ({e}). Install torch_npu, or pass the module "
            "to wire explicitly (aclalloc.npu has torch_npu.npu's names)."
        ) from e
    return torch_npu.npu


def torch_npu_allocator(npu: Optional[ModuleType] = None, *, install: bool = True) -> Any:
    """Makes libaclalloc torch_npu's allocator and returns the allocator object.

    ``npu``: the module whose ``NPUPluggableAllocator`` and
    ``memory.change_current_allocator`` are used (None: ``torch_npu.npu``,
    imported now; :mod:`aclalloc.npu` works the same). ``install``: also make
    it the current allocator, which torch_npu allows only before its first
    allocation (else it raises ``RuntimeError``); with False the caller
    passes the returned object to ``change_current_allocator`` or
    ``MemPool`` itself.

    The same as these lines (``so`` being :func:`aclalloc.library_path`)::

        alloc = torch_npu.npu.NPUPluggableAllocator(
            so, "aclallocTorchMalloc", "aclallocTorchFree")
        lib = ctypes.CDLL(so)
        fn = lambda name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        alloc.allocator().set_init_fn(fn("aclallocTorchInit"))
        ...  # reset, memory fraction, base alloc, device stats, peak reset
        torch_npu.npu.memory.change_current_allocator(alloc)
    """
    if npu is None:
        npu = _torch_npu_npu()
    missing = [name for name, pointer in _POINTERS.items() if pointer is None]
    if missing:
        raise RuntimeError(
            f"{library_path()} lacks {', '.join(missing)}: it is older than this "
            "package; reinstall it (pip install .) or point ACLALLOC_LIB at a newer build."
        )
    alloc = npu.NPUPluggableAllocator(str(library_path()), MALLOC, FREE)
    functions = alloc.allocator()
    for setter, name in HOOKS:
        getattr(functions, setter)(ctypes.cast(_POINTERS[name], c_void_p).value)
    if install:
        npu.memory.change_current_allocator(alloc)
    return alloc
