"""Tagged regions (``aclallocRegionBegin`` / ``aclallocRegionEnd``): sleep
and wake for device memory the program allocates itself.

Inside ``with region("weights"):`` device memory the calling thread
allocates with ``aclrtMalloc``, ``aclrtMallocAlign32``, ``aclrtMallocCached``
or ``aclrtMallocPhysical`` (torch_npu's caching allocator and its
expandable segments, a model loader, ...) belongs to the tag. ``sleep()``
then gives its physical memory back with the addresses kept (offloaded to
host memory for the tags in ``offload_tags``, discarded for the others) and
``wake_up()`` maps new memory at the same addresses, all of it or none.
Regions are per thread and nest; the innermost tag wins.
"""

from __future__ import annotations

from contextlib import contextmanager
from ctypes import c_char_p, c_int
from typing import Iterator

from .._lib import declare, lib
from ._default import fail

__all__ = ["region"]

declare(
    {
        "aclallocRegionBegin": (c_int, (c_char_p,)),
        "aclallocRegionEnd": (c_int, ()),
    }
)


@contextmanager
def region(tag: str) -> Iterator[str]:
    """Device memory the calling thread allocates inside the ``with`` block
    belongs to ``tag`` (a non-empty str) for :func:`sleep` and
    :func:`wake_up`. Yields the tag. The region closes however the block
    ends; memory allocated in it stays the tag's until freed."""
    if not isinstance(tag, str):
        raise TypeError(f"tag must be a str, not {type(tag).__name__}")
    if not tag:
        raise ValueError("tag must not be empty")
    rc = lib.aclallocRegionBegin(tag.encode())
    if rc != 0:
        raise fail("aclallocRegionBegin", rc)
    try:
        yield tag
    finally:
        rc = lib.aclallocRegionEnd()
        if rc != 0:
            raise fail("aclallocRegionEnd", rc)
