"""Python allocator callbacks and kernels behind C function pointers.

Design (why no crash is possible from C's side):

* C only ever receives five trampolines created once at import and never
  freed (alloc, free, allocAdvise, getAddrFromBlock, kernel). Nothing C holds
  can become a dangling code pointer, whatever the order of unregistering,
  destroying descriptors and exiting.
* A descriptor's C object is a *token* naming an immutable snapshot of the
  Python side (the user's object and functions). Each setter makes a new
  snapshot, so a registration keeps the callbacks it was registered with, as
  CANN's registration keeps a copy. A token unknown here (a forged object, a
  snapshot already released) makes the callback fail cleanly (NULL), with a
  message.
* ``getAddrFromBlock`` receives only the block, so the blocks C sees are
  tokens too, each naming (snapshot, the user's block); the user's functions
  always see their own values.

Snapshots stay alive while the descriptor holds them or a registration made
through this package uses them (checked against the library with
``aclrtAllocatorGetByStream``, the source of truth). Tokens carry the tag
0xACA7 in their top 16 bits, so they never collide with the library's own
handles (pools use 0xACA5).
"""

from __future__ import annotations

import atexit
import ctypes
import itertools
import threading
from typing import Any, Callable, NamedTuple, Optional

from . import _errors, _stacks
from ._lib import (
    ALLOC_ADVISE_FUNC,
    ALLOC_FUNC,
    FREE_FUNC,
    GET_ADDR_FUNC,
    KERNEL_FUNC,
    function_pointer,
    lib,
    query,
)

_TAG = 0xACA7 << 48
_MASK = (1 << 48) - 1
_POINTER_MAX = (1 << 64) - 1
_next_token = itertools.count(1).__next__


def _token() -> int:
    return _TAG | (_next_token() & _MASK)


class Snapshot(NamedTuple):
    """What one version of a descriptor means on the Python side."""

    obj: Any
    alloc: Optional[Callable[..., Any]]
    free: Optional[Callable[..., Any]]
    advise: Optional[Callable[..., Any]]
    get_addr: Optional[Callable[..., Any]]


class _Desc:
    """A descriptor's Python side: its fields and the token C holds now."""

    __slots__ = ("fields", "has_obj", "token")

    def __init__(self) -> None:
        self.fields = Snapshot(None, None, None, None, None)
        self.has_obj = False
        self.token: Optional[int] = None


_snapshots: dict[int, Snapshot] = {}
"""token -> snapshot, for every token C may pass to a trampoline."""
_descs: dict[int, _Desc] = {}
"""descriptor handle -> its Python side (live descriptors only)."""
_registrations: dict[int, int] = {}
"""stream -> token of the snapshot registered through this package."""
_blocks: dict[int, tuple[Snapshot, int]] = {}
"""block token -> (snapshot that allocated it, the user's block)."""
_kernels: dict[int, tuple[Optional[Callable[[int, int], Any]], int]] = {}
"""kernel token -> (fn, stream) for launches not yet run."""
_lock = threading.Lock()
"""Guards the tables across threads; never held while calling C or user code."""


def _as_pointer(value: Any, what: str) -> int:
    """A callback's result as a C pointer: None or 0 is NULL."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must return an int (a block or an address), not {value!r}")
    if not 0 <= value <= _POINTER_MAX:
        raise ValueError(f"{what} returned {value}, which is not a 64-bit pointer value")
    return value


def _lookup(token: Optional[int], what: str) -> Snapshot:
    snapshot = _snapshots.get(token or 0)
    if snapshot is None:
        raise LookupError(
            f"{what}: the allocator object {token!r} names no live Python allocator "
            "(its descriptor was destroyed and no registration made through aclalloc uses it)"
        )
    return snapshot


def _new_block(snapshot: Snapshot, block: int) -> int:
    token = _token()
    _blocks[token] = (snapshot, block)
    return token


def _call_alloc(token: Optional[int], size: int, addr: Optional[int], advise: bool) -> Any:
    what = "the allocAdvise callback" if advise else "the alloc callback"
    try:
        snapshot = _lookup(token, what)
        if advise:
            function = snapshot.advise
            if function is None:
                raise LookupError("allocAdvise was called but no advise function is set")
            block = _as_pointer(function(snapshot.obj, size, addr or 0), what)
        else:
            assert snapshot.alloc is not None
            block = _as_pointer(snapshot.alloc(snapshot.obj, size), what)
        return _new_block(snapshot, block) if block else None
    except BaseException as exc:  # a callback must never unwind into C
        _errors.record_callback_exception(
            f"The {what[4:]} of a Python allocator (size {size})",
            exc,
            "the allocation fails (NULL)",
        )
        return None


@ALLOC_FUNC
def _alloc_trampoline(token, size):  # type: ignore[no-untyped-def]
    return _call_alloc(token, size, None, advise=False)


@ALLOC_ADVISE_FUNC
def _advise_trampoline(token, size, addr):  # type: ignore[no-untyped-def]
    return _call_alloc(token, size, addr, advise=True)


@GET_ADDR_FUNC
def _get_addr_trampoline(block_token):  # type: ignore[no-untyped-def]
    try:
        record = _blocks.get(block_token or 0)
        if record is None:
            raise LookupError(f"getAddrFromBlock got {block_token!r}, not a live block")
        snapshot, block = record
        assert snapshot.get_addr is not None
        return _as_pointer(snapshot.get_addr(block), "the getAddrFromBlock callback") or None
    except BaseException as exc:
        _errors.record_callback_exception(
            "The getAddrFromBlock callback of a Python allocator",
            exc,
            "the allocation fails (NULL)",
        )
        return None


@FREE_FUNC
def _free_trampoline(token, block_token):  # type: ignore[no-untyped-def]
    try:
        record = _blocks.pop(block_token or 0, None)
        if record is None:
            raise LookupError(
                f"free got {block_token!r}, not a live block of a Python allocator "
                "(freed twice, or never allocated)"
            )
        snapshot = _snapshots.get(token or 0, record[0])
        assert snapshot.free is not None
        snapshot.free(snapshot.obj, record[1])
    except BaseException as exc:
        _errors.record_callback_exception(
            "The free callback of a Python allocator", exc, "the block is not returned"
        )


@KERNEL_FUNC
def _kernel_trampoline(workspace, size, token):  # type: ignore[no-untyped-def]
    entry = _kernels.pop(token or 0, None)
    if entry is None or entry[0] is None:
        return
    try:
        entry[0](workspace or 0, size)
    except BaseException as exc:
        _errors.record_callback_exception(
            f"The kernel (workspace of {size} bytes)", exc, "the launch had been enqueued"
        )


# -- descriptors -------------------------------------------------------------

_FIELD_SETTERS = {
    "alloc": ("aclrtAllocatorSetAllocFuncToDesc", _alloc_trampoline),
    "free": ("aclrtAllocatorSetFreeFuncToDesc", _free_trampoline),
    "advise": ("aclrtAllocatorSetAllocAdviseFuncToDesc", _advise_trampoline),
    "get_addr": ("aclrtAllocatorSetGetAddrFromBlockFuncToDesc", _get_addr_trampoline),
}


def _in_use(token: Optional[int]) -> bool:
    if token is None:
        return False
    return any(d.token == token for d in _descs.values()) or token in _registrations.values()


def _release_if_unused(token: Optional[int]) -> None:
    with _lock:
        if token is not None and not _in_use(token):
            _snapshots.pop(token, None)


def set_field(desc: int, field: str, value: Any) -> int:
    """Sets the descriptor's object (``field == "obj"``) or one of its functions."""
    state = _descs.get(desc) or _Desc()
    fields = state.fields._replace(**{field: value})
    has_obj = state.has_obj or field == "obj"
    if field != "obj":
        name, trampoline = _FIELD_SETTERS[field]
        rc = getattr(lib, name)(desc, trampoline)
        if rc != 0:
            return rc
    new_token = None
    if has_obj:
        new_token = _token()
        _snapshots[new_token] = Snapshot(*fields)
        rc = lib.aclrtAllocatorSetObjToDesc(desc, new_token)
        if rc != 0:
            _snapshots.pop(new_token, None)
            return rc
    old = state.token
    state.fields, state.has_obj, state.token = fields, has_obj, new_token
    _descs[desc] = state
    _release_if_unused(old)
    return 0


def destroy_desc(desc: int) -> int:
    """``aclrtAllocatorDestroyDesc``; registrations made from it keep their snapshot."""
    rc = lib.aclrtAllocatorDestroyDesc(desc)
    if rc == 0:
        state = _descs.pop(desc, None)
        if state is not None:
            _release_if_unused(state.token)
    return rc


def _registered_token(stream: int) -> Optional[int]:
    """The object the library has registered for ``stream`` (None: nothing)."""
    desc, obj = ctypes.c_void_p(), ctypes.c_void_p()
    rc = query(
        lambda: lib.aclrtAllocatorGetByStream(
            stream, ctypes.byref(desc), ctypes.byref(obj), None, None, None, None
        )
    )
    return obj.value if rc == 0 else None


def register(stream: int, desc: int) -> int:
    """``aclrtAllocatorRegister``, keeping the registered snapshot alive."""
    rc = lib.aclrtAllocatorRegister(stream, desc)
    if rc != 0:
        return rc
    token = _registered_token(stream)
    with _lock:
        old = _registrations.pop(stream, None)
        if token in _snapshots:
            _registrations[stream] = token  # type: ignore[assignment]
    _release_if_unused(old)
    return 0


def unregister(stream: int) -> int:
    """``aclrtAllocatorUnregister``, releasing what only that registration kept."""
    rc = lib.aclrtAllocatorUnregister(stream)
    if rc == 0:
        with _lock:
            old = _registrations.pop(stream, None)
        _release_if_unused(old)
    return rc


def prune() -> None:
    """Drops registrations the library no longer has (a stream destroyed, a
    device reset, finalize, or a registration replaced from C)."""
    for stream, token in list(_registrations.items()):
        if _registered_token(stream) != token:
            with _lock:
                if _registrations.get(stream) == token:
                    del _registrations[stream]
            _release_if_unused(token)


# -- launches ------------------------------------------------------------------


_EMPTY_KERNEL = function_pointer("aclallocEmptyKernel", KERNEL_FUNC) or _kernel_trampoline
"""The library's ``aclallocEmptyKernel`` (the Python trampoline when an
older library, through ``ACLALLOC_LIB``, lacks it)."""


def launch(stream: int, size: int, fn: Optional[Callable[[int, int], Any]]) -> int:
    """``aclallocLaunchKernel`` with a Python kernel, or without one (then the
    library's empty kernel runs, and the stream's worker never needs the GIL)."""
    if fn is None:
        return _stacks.call(lib.aclallocLaunchKernel, stream or None, size, _EMPTY_KERNEL, None)
    token = _token()
    _kernels[token] = (fn, stream)
    rc = _stacks.call(lib.aclallocLaunchKernel, stream or None, size, _kernel_trampoline, token)
    if rc != 0:
        _kernels.pop(token, None)
    return rc


@atexit.register
def _quiesce() -> None:
    """At exit, before the interpreter goes: let pending Python kernels run and
    take Python allocators off their streams, so that no thread of the
    library calls into Python while it shuts down."""
    for stream in {s for _, s in list(_kernels.values())}:
        lib.aclrtSynchronizeStream(stream or None)
    for stream in list(_registrations):
        lib.aclrtSynchronizeStream(stream)
        lib.aclrtAllocatorUnregister(stream)
    _registrations.clear()
