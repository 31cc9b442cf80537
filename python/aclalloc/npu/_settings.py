"""torch_npu's allocator settings: the backend's name, the per-process
memory fraction as set, ``_set_allocator_settings``, and the release of
expandable segments' address space (``empty_virt_addr_cache``)."""

from __future__ import annotations

import ctypes
import os
from typing import Any, Dict

from .._lib import declare, lib
from . import _default
from ._default import fail

FRACTIONS: Dict[int, float] = {}
"""The fraction :func:`set_per_process_memory_fraction` set last, per device."""

CONF_VAR = "ACLALLOC_ALLOC_CONF"
"""The library's pool settings (``PYTORCH_NPU_ALLOC_CONF``'s syntax)."""

_BACKENDS = {"pool": "native", "plugin": "pluggable"}

declare({"aclallocPoolEmptyVirtAddrCache": (ctypes.c_int, (ctypes.c_void_p,))})


def get_allocator_backend() -> str:
    """The default allocator's backend: ``"native"`` for the caching pool
    (torch_npu's name for its caching allocator), ``"pluggable"`` for an
    :class:`NPUPluggableAllocator`, else the library's name of it
    (``"device"``, ``"descriptor"``)."""
    name = _default.kind()
    if name is None:
        raise RuntimeError(
            "get_allocator_backend: the default allocator's environment setting is invalid."
        )
    return _BACKENDS.get(name, name)


def get_per_process_memory_fraction(device: Any = None) -> float:
    """The fraction of ``device``'s memory the default allocator may take, as
    :func:`set_per_process_memory_fraction` set it (1.0 until it was set).
    Builds the default allocator if needed, as torch_npu's lazy init does."""
    index = _default.device_index(device)
    with _default.on_device(index):
        _default.initialize()
    return FRACTIONS.get(index, 1.0)


def empty_virt_addr_cache() -> None:
    """Releases the address space that expandable segments of the default
    pools (one per device) keep reserved with no block in it, after giving
    their free pages back. Does nothing before the default allocator is
    built, or when it is not the caching pool."""
    state = _default.built()
    if state is None or state.kind != "pool":
        return
    for index in range(_default.device_count()):
        pool = _default.built_for(index)
        if pool is None:
            continue
        rc = lib.aclallocPoolEmptyVirtAddrCache(pool.obj)
        if rc != 0:
            raise fail("empty_virt_addr_cache", rc)


def _pairs(settings: str) -> Dict[str, str]:
    pairs: Dict[str, str] = {}
    for item in settings.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition(":")
        if not sep or not key.strip():
            raise ValueError(f"_set_allocator_settings: {item!r} is not key:value")
        pairs[key.strip()] = value.strip()
    return pairs


_RUNTIME_KEYS = ("memory_fraction", "per_process_memory_fraction", "memory_limit_mb")


def set_allocator_settings(settings: str) -> None:
    """torch's ``_set_allocator_settings("key:value,...")``. Before the
    default allocator is built, the pairs are merged into ``ACLALLOC_ALLOC_CONF``
    (later values win) and the caching pool is built with them; its keys and
    errors are those of the variable. Afterwards only the limit can change
    (``memory_fraction``, ``per_process_memory_fraction``,
    ``memory_limit_mb``); any other key raises RuntimeError."""
    if not isinstance(settings, str):
        raise TypeError(f"settings must be a str, not {type(settings).__name__}")
    pairs = _pairs(settings)
    state = _default.built()
    if state is None:
        merged = _pairs(os.environ.get(CONF_VAR, ""))
        merged.update(pairs)
        os.environ[CONF_VAR] = ",".join(f"{k}:{v}" for k, v in merged.items())
        return
    fixed = [k for k in pairs if k not in _RUNTIME_KEYS]
    if fixed:
        raise RuntimeError(
            f"_set_allocator_settings: {', '.join(fixed)} cannot change once the default "
            "allocator is built (set them before its first use, or in ACLALLOC_ALLOC_CONF)."
        )
    if state.kind != "pool":
        if pairs:
            raise RuntimeError(
                f"_set_allocator_settings: the default allocator ({state.kind}) has no "
                "pool settings."
            )
        return
    for key, value in pairs.items():
        try:
            number = float(value)
        except ValueError:
            raise ValueError(
                f"_set_allocator_settings: {key} needs a number, not {value!r}"
            ) from None
        if key == "memory_limit_mb":
            rc = lib.aclallocPoolSetMemoryLimit(state.obj, int(number * (1 << 20)))
        else:
            rc = lib.aclallocPoolSetMemoryFraction(state.obj, number)
            if rc == 0:
                FRACTIONS[state.device] = number
        if rc != 0:
            raise fail("_set_allocator_settings", rc)
