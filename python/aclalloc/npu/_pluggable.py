"""torch_npu's allocator objects: ``NPUPluggableAllocator(...).allocator()``
and its setters, which take C function pointers as ints
(``ctypes.cast(lib.my_fn, ctypes.c_void_p).value``) with torch_npu's C
signatures:

============================  =====================================================
setter                        the function's C signature
============================  =====================================================
``set_init_fn``               ``void init(int device_count)``
``set_reset_fn``              ``void reset(bool check_error)``
``set_memory_fraction_fn``    ``void memory_fraction(double fraction, int device)``
``set_base_alloc_fn``         ``void *base_alloc(void *ptr, size_t *size)``
``set_record_stream_fn``      ``void record_stream(void *ptr, aclrtStream stream)``
``set_erase_stream_fn``       ``void erase_stream(void *ptr, aclrtStream stream)``
``set_get_device_stats_fn``   ``DeviceStats get_device_stats(int device)``
``set_reset_peak_status_fn``  ``void reset_peak_status(int device)``
============================  =====================================================

``DeviceStats`` has the layout of PyTorch's ``c10::CachingDeviceAllocator::DeviceStats``
(torch_npu's): ``aclallocPluggableDeviceStats`` in ``aclalloc.h``, 976 bytes,
ending with ``num_sync_all_streams``, ``num_device_alloc``, ``num_device_free``
and ``max_split_size``. A function built against PyTorch's older layout
(``DeviceStatsV1``, 952 bytes, without those three counters) works too: the
library always calls it with room for the larger layout and tells the two
apart (or is told: ``set_get_device_stats_fn(ptr, layout="v1")``). The
library calls each function where torch_npu does (see ``aclalloc.h``,
``aclallocPluggableSetInitFn`` and the rest).
"""

from __future__ import annotations

import ctypes
from ctypes import CFUNCTYPE, POINTER, byref, c_bool, c_double, c_int, c_int32, c_size_t, c_void_p
from typing import Any, Callable, Dict, Tuple

from .._lib import PluggableConfig, declare, lib, mirrors
from ._default import fail

STAT_TYPES = ("all", "small_pool", "large_pool")


@mirrors("aclallocStat")
class Stat(ctypes.Structure):
    """``aclallocStat``."""

    _fields_ = [(name, ctypes.c_int64) for name in ("current", "peak", "allocated", "freed")]


_ARRAYS = (
    "allocation",
    "segment",
    "active",
    "inactive_split",
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "inactive_split_bytes",
    "requested_bytes",
)


_COUNTERS = ("num_sync_all_streams", "num_device_alloc", "num_device_free")
"""The counters the current layout has and the older one lacks."""


@mirrors("aclallocPluggableDeviceStats")
class DeviceStats(ctypes.Structure):
    """``aclallocPluggableDeviceStats``: PyTorch's current ``DeviceStats`` layout."""

    _fields_ = [
        *((name, Stat * 3) for name in _ARRAYS),
        ("num_alloc_retries", ctypes.c_int64),
        ("num_ooms", ctypes.c_int64),
        ("oversize_allocations", Stat),
        ("oversize_segments", Stat),
        *((name, ctypes.c_int64) for name in _COUNTERS),
        ("max_split_size", ctypes.c_int64),
    ]


@mirrors("aclallocPluggableDeviceStatsV1")
class DeviceStatsV1(ctypes.Structure):
    """``aclallocPluggableDeviceStatsV1``: PyTorch's older ``DeviceStats`` layout."""

    _fields_ = [
        *((name, Stat * 3) for name in _ARRAYS),
        ("num_alloc_retries", ctypes.c_int64),
        ("num_ooms", ctypes.c_int64),
        ("oversize_allocations", Stat),
        ("oversize_segments", Stat),
        ("max_split_size", ctypes.c_int64),
    ]


assert ctypes.sizeof(DeviceStats) == 976 and DeviceStats.max_split_size.offset == 968
assert ctypes.sizeof(DeviceStatsV1) == 952 and DeviceStatsV1.max_split_size.offset == 944

DEVICE_STATS_LAYOUTS = {"current": 0, "v1": 1}
"""``aclallocPluggableSetDeviceStatsLayout``'s values (``ACLALLOC_DEVICE_STATS_LAYOUT_*``)."""

_SETTERS = {
    "aclallocPluggableSetInitFn": CFUNCTYPE(None, c_int32),
    "aclallocPluggableSetResetFn": CFUNCTYPE(None, c_bool),
    "aclallocPluggableSetMemoryFractionFn": CFUNCTYPE(None, c_double, c_int32),
    "aclallocPluggableSetBaseAllocFn": CFUNCTYPE(c_void_p, c_void_p, POINTER(c_size_t)),
    "aclallocPluggableSetRecordStreamFn": CFUNCTYPE(None, c_void_p, c_void_p),
    "aclallocPluggableSetEraseStreamFn": CFUNCTYPE(None, c_void_p, c_void_p),
    "aclallocPluggableSetGetDeviceStatsFn": CFUNCTYPE(DeviceStats, c_int32),
    "aclallocPluggableSetResetPeakStatusFn": CFUNCTYPE(None, c_int32),
}
"""Each setter of a torch_npu hook and the C type of the hook it takes."""

declare({name: (c_int, (c_void_p, functype)) for name, functype in _SETTERS.items()})
declare(
    {
        "aclallocPluggableGetDeviceStats": (c_int, (c_void_p, c_int32, POINTER(DeviceStats))),
        "aclallocPluggableResetPeakStatus": (c_int, (c_void_p, c_int32)),
        "aclallocPluggableSetDeviceStatsLayout": (c_int, (c_void_p, c_int32)),
        "aclallocPluggableGetBaseAllocation": (
            c_int,
            (c_void_p, c_void_p, POINTER(c_void_p), POINTER(c_size_t)),
        ),
        "aclallocPluggableRecordStream": (c_int, (c_void_p, c_void_p, c_void_p)),
        "aclallocPluggableEraseStream": (c_int, (c_void_p, c_void_p, c_void_p)),
    }
)


def _function_pointer(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} takes a function pointer (an int), not {type(value).__name__}")
    if not 0 <= value < 1 << 64:
        raise ValueError(f"{name}: {value} is not an address")
    return value


class _NPUPluggableAllocator(int):
    """The allocator object of a pluggable allocator (torch_npu's
    ``torch_npu._C._NPUPluggableAllocator``): the int is its allocator
    descriptor (``aclrtAllocatorDesc``, for ``acl.rt.allocator_register`` or
    C code), and its methods set the functions torch_npu's object takes.
    Each setter takes a function pointer as an int (0 unsets it)."""

    _handle: int

    def __new__(cls, descriptor: int, handle: int) -> _NPUPluggableAllocator:
        obj = super().__new__(cls, descriptor)
        obj._handle = handle
        return obj

    def _set(self, function: str, setter: str, pointer: Any) -> None:
        address = _function_pointer(function, pointer)
        # The hook's own C type, as the setter's prototype has it (0: NULL, unset).
        rc = getattr(lib, setter)(self._handle, _SETTERS[setter](address))
        if rc != 0:
            raise fail(setter, rc)

    def set_init_fn(self, func_ptr: int) -> None:
        """``void init(int device_count)``: called once, at the next use."""
        self._set("set_init_fn", "aclallocPluggableSetInitFn", func_ptr)

    def set_reset_fn(self, func_ptr: int) -> None:
        """``void reset(bool check_error)``: called by ``empty_cache``."""
        self._set("set_reset_fn", "aclallocPluggableSetResetFn", func_ptr)

    def set_memory_fraction_fn(self, func_ptr: int) -> None:
        """``void memory_fraction(double fraction, int device)``: called by
        ``set_per_process_memory_fraction``."""
        self._set("set_memory_fraction_fn", "aclallocPluggableSetMemoryFractionFn", func_ptr)

    def set_base_alloc_fn(self, func_ptr: int) -> None:
        """``void *base_alloc(void *ptr, size_t *size)``: answers base-allocation queries."""
        self._set("set_base_alloc_fn", "aclallocPluggableSetBaseAllocFn", func_ptr)

    def set_record_stream_fn(self, func_ptr: int) -> None:
        """``void record_stream(void *ptr, aclrtStream stream)``."""
        self._set("set_record_stream_fn", "aclallocPluggableSetRecordStreamFn", func_ptr)

    def set_erase_stream_fn(self, func_ptr: int) -> None:
        """``void erase_stream(void *ptr, aclrtStream stream)``."""
        self._set("set_erase_stream_fn", "aclallocPluggableSetEraseStreamFn", func_ptr)

    def set_get_device_stats_fn(self, func_ptr: int, layout: str | None = None) -> None:
        """``DeviceStats get_device_stats(int device)``: answers ``memory_stats``.

        ``layout`` (an aclalloc extension): ``"current"`` (PyTorch's
        ``DeviceStats`` with ``num_device_alloc``, 976 bytes), ``"v1"`` (the
        older 952-byte layout, of a function built against an older
        PyTorch); None leaves the choice as it was (``"current"`` at first).
        The function is always called with room for the larger layout."""
        if layout is not None:
            self.set_device_stats_layout(layout)
        self._set("set_get_device_stats_fn", "aclallocPluggableSetGetDeviceStatsFn", func_ptr)

    def set_device_stats_layout(self, layout: str) -> None:
        """Which ``DeviceStats`` layout the get-device-stats function returns:
        ``"current"`` or ``"v1"`` (an aclalloc extension)."""
        if not isinstance(layout, str):
            raise TypeError(f"layout must be a str, not {type(layout).__name__}")
        if layout not in DEVICE_STATS_LAYOUTS:
            raise ValueError(
                f"layout must be one of {sorted(DEVICE_STATS_LAYOUTS)}, not {layout!r}"
            )
        rc = lib.aclallocPluggableSetDeviceStatsLayout(self._handle, DEVICE_STATS_LAYOUTS[layout])
        if rc != 0:
            raise fail("aclallocPluggableSetDeviceStatsLayout", rc)

    def set_reset_peak_status_fn(self, func_ptr: int) -> None:
        """``void reset_peak_status(int device)``: called by ``reset_peak_memory_stats``."""
        self._set("set_reset_peak_status_fn", "aclallocPluggableSetResetPeakStatusFn", func_ptr)

    def __repr__(self) -> str:
        return f"<_NPUPluggableAllocator descriptor={int(self):#x}>"


class _NPUAllocator:
    """torch_npu's wrapper of an allocator object: ``allocator()`` returns it,
    and ``_allocator`` holds it."""

    def __init__(self, allocator: Any) -> None:
        self._allocator = allocator

    def allocator(self) -> Any:
        return self._allocator


def device_stats(handle: int, device: int) -> Dict[str, Any]:
    """A pluggable allocator's statistics for ``device`` as PyTorch's nested
    dict: its get-device-stats function's, or the counters the library keeps."""
    raw = DeviceStats()
    rc = lib.aclallocPluggableGetDeviceStats(handle, device, byref(raw))
    if rc != 0:
        raise fail("aclallocPluggableGetDeviceStats", rc)

    def stat(s: Stat) -> Dict[str, int]:
        return {k: getattr(s, k) for k in ("current", "peak", "allocated", "freed")}

    nested: Dict[str, Any] = {
        name: {t: stat(getattr(raw, name)[i]) for i, t in enumerate(STAT_TYPES)} for name in _ARRAYS
    }
    nested["num_alloc_retries"] = raw.num_alloc_retries
    nested["num_ooms"] = raw.num_ooms
    nested["oversize_allocations"] = stat(raw.oversize_allocations)
    nested["oversize_segments"] = stat(raw.oversize_segments)
    for name in _COUNTERS:
        nested[name] = getattr(raw, name)
    nested["max_split_size"] = raw.max_split_size
    return nested


def flatten(nested: Dict[str, Any]) -> Dict[str, Any]:
    """PyTorch's flat keys (``a.b.c``), sorted."""
    flat: list = []

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(f"{prefix}.{key}" if prefix else key, value)
        else:
            flat.append((prefix, node))

    walk("", nested)
    return dict(sorted(flat))


def reset_peak_status(handle: int, device: int) -> None:
    """The library's peaks, then the reset-peak-status function, if set."""
    rc = lib.aclallocPluggableResetPeakStatus(handle, device)
    if rc != 0:
        raise fail("aclallocPluggableResetPeakStatus", rc)


def base_allocation(handle: int, ptr: int) -> tuple[int, int]:
    """``(base, size)`` of the allocation ``ptr`` lies in."""
    base, size = c_void_p(), c_size_t(0)
    rc = lib.aclallocPluggableGetBaseAllocation(handle, ptr, byref(base), byref(size))
    if rc != 0:
        raise fail("aclallocPluggableGetBaseAllocation", rc)
    return base.value or 0, size.value


def stream_call(handle: int, ptr: int, stream: int, erase: bool) -> None:
    """Tells the record-stream (or erase-stream) function about ``ptr``."""
    name = "aclallocPluggableEraseStream" if erase else "aclallocPluggableRecordStream"
    function: Callable[..., int] = getattr(lib, name)
    rc = function(handle, ptr, stream or None)
    if rc != 0:
        raise fail(name, rc)


class NPUPluggableAllocator(_NPUAllocator):
    """An allocator loaded from a shared object, as torch_npu's
    ``NPUPluggableAllocator(path_to_so_file, alloc_fn_name, free_fn_name)``:
    ``void *alloc(ssize_t size, int device, aclrtStream stream)`` and
    ``void free(void *ptr, ssize_t size, int device, aclrtStream stream)``.

    The object may call ``aclrtMalloc``/``aclrtFree`` without linking any
    library: the package loaded libaclalloc with ``RTLD_GLOBAL``. Loading
    errors raise RuntimeError with the library's message.

    ``allocator()`` (also ``_allocator``) is torch_npu's allocator object:
    its ``set_init_fn``, ``set_reset_fn``, ``set_memory_fraction_fn``,
    ``set_base_alloc_fn``, ``set_record_stream_fn``, ``set_erase_stream_fn``,
    ``set_get_device_stats_fn`` and ``set_reset_peak_status_fn`` take C
    function pointers as ints (see this module's table); as an int
    it is the allocator descriptor (``aclrtAllocatorDesc``), for
    ``acl.rt.allocator_register`` or C code.
    """

    def __init__(self, path_to_so_file: str, alloc_fn_name: str, free_fn_name: str) -> None:
        for name, value in (
            ("path_to_so_file", path_to_so_file),
            ("alloc_fn_name", alloc_fn_name),
            ("free_fn_name", free_fn_name),
        ):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str, not {type(value).__name__}")
            if not value or "\0" in value:
                raise ValueError(f"{name} must be a non-empty string without NUL")
        config = PluggableConfig(
            path_to_so_file.encode(), alloc_fn_name.encode(), free_fn_name.encode()
        )
        handle, desc = c_void_p(), c_void_p()
        rc = lib.aclallocPluggableCreate(byref(config), byref(handle), byref(desc))
        if rc != 0:
            raise fail("aclallocPluggableCreate", rc)
        self._handle: int = handle.value or 0
        self._desc: int = desc.value or 0
        self.path = path_to_so_file
        super().__init__(_NPUPluggableAllocator(self._desc, self._handle))
        PLUGGABLES[self._handle] = self._allocator

    def allocator(self) -> _NPUPluggableAllocator:
        """torch_npu's allocator object (an int: the allocator descriptor)."""
        return self._allocator

    def get_base_allocation(self, ptr: int) -> Tuple[int, int]:
        """``(base, size)`` of the allocation ``ptr`` lies in: the base-alloc
        function's answer, else ``ptr`` and its size when it is a live block."""
        return base_allocation(self._handle, ptr)

    def record_stream(self, ptr: int, stream: int) -> None:
        """Tells the record-stream function that ``stream`` uses the live block ``ptr``."""
        stream_call(self._handle, ptr, stream, erase=False)

    def erase_stream(self, ptr: int, stream: int) -> None:
        """Tells the erase-stream function that ``stream`` no longer uses ``ptr``."""
        stream_call(self._handle, ptr, stream, erase=True)

    def handle(self) -> int:
        """Its ``aclallocPluggable`` handle (statistics from C)."""
        return self._handle

    def __repr__(self) -> str:
        return f"NPUPluggableAllocator({self.path!r})"


PLUGGABLES: Dict[int, _NPUPluggableAllocator] = {}
"""Every pluggable allocator's object, by handle (for
``aclalloc.npu.memory._get_current_allocator``)."""
