"""Sleep and wake of tagged pools (``aclallocSleep`` / ``aclallocWakeUp``),
in the shape serving engines use: ``sleep(offload_tags=("weights",))`` and
``wake_up(tags=None)``.

A pool gets its tag before its first allocation (``MemPool(..., tag=...)``,
or ``aclallocPoolSetTag`` in C). At sleep, the physical memory of every
tagged pool goes back to the device; the virtual addresses stay reserved,
so the program's pointers stay valid. Tags in ``offload_tags`` are copied to
host memory first and restored at wake; the others come back as fresh
memory. While asleep a pool allocates nothing, and copies or sets touching
its memory fail with a message naming its tag.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char_p, c_int, c_size_t
from typing import Iterable, Optional, Tuple, Union

from .._lib import declare, lib
from ._default import fail

__all__ = ["sleep", "wake_up"]

declare(
    {
        "aclallocSleep": (c_int, (POINTER(c_char_p), c_size_t)),
        "aclallocWakeUp": (c_int, (POINTER(c_char_p), c_size_t)),
    }
)

Tags = Union[str, Iterable[str], None]


def _tags(name: str, tags: Tags) -> Tuple[str, ...]:
    """``tags`` as a tuple of strings (one string is one tag)."""
    if tags is None:
        return ()
    if isinstance(tags, str):
        return (tags,)
    try:
        out = tuple(tags)
    except TypeError:
        raise TypeError(
            f"{name} must be a str or an iterable of str, not {type(tags).__name__}"
        ) from None
    for tag in out:
        if not isinstance(tag, str):
            raise TypeError(f"{name} must hold str, not {type(tag).__name__}")
    return out


def _array(tags: Tuple[str, ...]) -> ctypes.Array:
    return (c_char_p * len(tags))(*(t.encode() for t in tags))


def sleep(offload_tags: Tags = None) -> None:
    """Puts every tagged pool to sleep: pools tagged with one of
    ``offload_tags`` (a str or an iterable of str; None: none) keep their
    contents in host memory, the others' contents are discarded. Their
    physical memory goes back to the device (``mem_get_info`` shows it);
    a pool already asleep stays as it is."""
    tags = _tags("offload_tags", offload_tags)
    rc = lib.aclallocSleep(_array(tags), len(tags))
    if rc != 0:
        raise fail("aclallocSleep", rc)


def wake_up(tags: Optional[Iterable[str]] = None) -> None:
    """Wakes the sleeping pools tagged with one of ``tags`` (None: every
    tagged pool) at the same addresses, restoring offloaded contents. A
    pool awake stays as it is. Raises ``OutOfMemoryError`` when the device
    lacks the memory; the pools not yet woken stay asleep."""
    if tags is None:
        rc = lib.aclallocWakeUp(None, 0)
    else:
        chosen = _tags("tags", tags)
        rc = lib.aclallocWakeUp(_array(chosen), len(chosen))
    if rc != 0:
        raise fail("aclallocWakeUp", rc)
