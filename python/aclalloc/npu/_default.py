"""The default allocator as torch_npu's memory API sees it: which allocator
it is, whether it has been built ("initialized" in PyTorch's words), its
object and the device it lives on."""

from __future__ import annotations

import contextlib
import ctypes
from ctypes import byref, c_int32, c_uint32, c_void_p
from typing import Any, Iterator, NamedTuple, Optional

from .._lib import ACL_ERROR_RT_MEMORY_ALLOCATION, lib, query, recent_c_message


class OutOfMemoryError(RuntimeError):
    """Raised when the allocator cannot serve a request (torch's OutOfMemoryError)."""


def fail(function: str, rc: int) -> RuntimeError:
    """The exception for a failed C call: the library's message, or the code."""
    message = recent_c_message() or f"{function} failed with error code {rc}."
    if rc == ACL_ERROR_RT_MEMORY_ALLOCATION:
        return OutOfMemoryError(message)
    return RuntimeError(message)


class Default(NamedTuple):
    """The default allocator once built."""

    kind: str
    """"pool", "device", "plugin" or "descriptor"."""
    obj: int
    """Its object: the pool's or the plugin's handle."""
    device: int
    """The device current when it was built (the pool's device)."""


def kind() -> Optional[str]:
    """What the default allocator is or will be (None: the environment is invalid)."""
    name: list[bytes] = []
    query(lambda: name.append(lib.aclallocGetDefaultAllocatorName()) or 0)
    return name[0].decode() if name and name[0] is not None else None


def built() -> Optional[Default]:
    """The default allocator if it has been built, else None."""
    obj = c_void_p()
    if query(lambda: lib.aclallocGetDefaultAllocator(byref(obj))) != 0:
        return None  # "not built yet" is an answer, not a failure
    device = c_int32(0)
    if lib.aclallocDefaultGetDevice(byref(device)) != 0:
        raise fail("aclallocDefaultGetDevice", -1)
    return Default(kind() or "descriptor", obj.value or 0, device.value)


def built_for(device: int) -> Optional[Default]:
    """The default allocator as it serves ``device``: for the caching pool
    (one per device) that device's pool, made now if the device has none."""
    state = built()
    if state is None or state.kind != "pool" or state.device == device:
        return state
    with on_device(device):
        return built()


def initialize() -> Default:
    """Builds the default allocator now (torch's lazy init), on the current
    device (device 0 if this thread has none, as torch_npu's lazy init)."""
    current_device(set_if_none=True)
    rc = lib.aclallocDefaultInit()
    if rc != 0:
        raise fail("aclallocDefaultInit", rc)
    state = built()
    assert state is not None
    return state


def device_count() -> int:
    """``aclrtGetDeviceCount``."""
    count = c_uint32(0)
    rc = lib.aclrtGetDeviceCount(byref(count))
    if rc != 0:
        raise fail("aclrtGetDeviceCount", rc)
    return count.value


def current_device(set_if_none: bool = False) -> int:
    """This thread's device; without one, 0 (made current if ``set_if_none``)."""
    device = c_int32(0)
    if query(lambda: lib.aclrtGetDevice(byref(device))) == 0:
        return device.value
    if set_if_none:
        rc = lib.aclrtSetDevice(0)
        if rc != 0:
            raise fail("aclrtSetDevice", rc)
    return 0


def device_index(device: Any) -> int:
    """A device argument as torch takes it: None (the current device), an int,
    ``"npu"``/``"npu:N"``, or an object with ``.index`` (a torch.device)."""
    if device is None:
        return current_device()
    index: Any = device
    if isinstance(device, str):
        name, _, number = device.partition(":")
        if name != "npu" or (number and not number.isdigit()):
            raise ValueError(f"Invalid device {device!r}: expected 'npu' or 'npu:N'.")
        index = int(number) if number else current_device()
    elif not isinstance(device, int) and hasattr(device, "index"):
        index = device.index if device.index is not None else current_device()
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"Invalid device {device!r}: expected an int, 'npu:N' or None.")
    count = device_count()
    if not 0 <= index < count:
        raise ValueError(f"Invalid device id {index}: this process has {count} device(s).")
    return index


@contextlib.contextmanager
def on_device(device: int) -> Iterator[None]:
    """Runs the body with ``device`` current on this thread, then restores the
    thread's context (and balances the device's set count)."""
    current = c_int32(0)
    if query(lambda: lib.aclrtGetDevice(byref(current))) == 0 and current.value == device:
        yield
        return
    saved = c_void_p()
    had_context = query(lambda: lib.aclrtGetCurrentContext(byref(saved))) == 0
    rc = lib.aclrtSetDevice(device)
    if rc != 0:
        raise fail("aclrtSetDevice", rc)
    try:
        yield
    finally:
        if had_context:
            lib.aclrtSetCurrentContext(saved)
        lib.aclrtResetDevice(device)


def size_argument(name: str, value: Any) -> int:
    """A byte count: TypeError for a non-int, ValueError for a negative one."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must not be negative (got {value})")
    if value >= 1 << 64:
        raise ValueError(f"{name} {value} is larger than any allocation can be")
    return value


def stream_argument(stream: Any) -> Optional[int]:
    """A stream: None, or a stream handle (an int)."""
    if stream is None:
        return None
    if isinstance(stream, bool) or not isinstance(stream, int) or not 0 <= stream < 1 << 64:
        raise TypeError(f"stream must be a stream handle (int) or None, not {stream!r}")
    return stream or None


def c_string(buffer_function: Any, pool: int) -> str:
    """Text from an snprintf-style pool function (summary, snapshot)."""
    length = ctypes.c_size_t(0)
    rc = buffer_function(pool, None, 0, byref(length))
    while rc == 0:
        buffer = ctypes.create_string_buffer(length.value + 1)
        rc = buffer_function(pool, buffer, len(buffer), byref(length))
        if rc == 0 and length.value < len(buffer):
            return buffer.value.decode("utf-8", "replace")
    raise fail("aclallocPool text", rc)
