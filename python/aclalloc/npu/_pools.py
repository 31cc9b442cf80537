"""A caching pool's statistics and segments in PyTorch's shapes, for the
default pools (``aclalloc.npu.memory``) and the pools of MemPools
(``aclalloc.npu._mempool``) alike."""

from __future__ import annotations

import bisect
import ctypes
import struct
from ctypes import byref, c_size_t
from typing import Any, Dict, List, Tuple

from .._lib import ACLALLOC_STAT_KEY_COUNT, PoolStatEntry, lib
from . import _history
from ._default import fail

assert struct.calcsize("@Pq") == ctypes.sizeof(PoolStatEntry)
_KEY_NAMES: Dict[str, Any] = {}
"""The statistics' names, decoded once (see :func:`_key_names`)."""


def stats(pool: int) -> Tuple[List[str], List[int]]:
    """The pool's statistics: keys (sorted, PyTorch's) and values."""
    entries = (PoolStatEntry * ACLALLOC_STAT_KEY_COUNT)()
    count = c_size_t(0)
    rc = lib.aclallocPoolGetStatsKeyValues(pool, entries, ACLALLOC_STAT_KEY_COUNT, byref(count))
    if rc != 0:
        raise fail("aclallocPoolGetStatsKeyValues", rc)
    n = min(count.value, ACLALLOC_STAT_KEY_COUNT)
    # One unpack of the raw array: reading 121 ctypes structures field by
    # field costs several times the C call itself.
    flat = struct.unpack_from(f"@{'Pq' * n}", entries)
    addresses, values = flat[0::2], list(flat[1::2])
    names, sync_at = _key_names(addresses)
    # PyTorch counts synchronize_and_free_events calls; the pool has no
    # events to wait for (blocks come back when their launch is enqueued or
    # its kernel has run), so it never synchronizes all streams.
    values.insert(sync_at, 0)
    return names, values


def _key_names(addresses: Tuple[int, ...]) -> Tuple[List[str], int]:
    """The names at these addresses (static strings of the library, in the
    same order every time, so decoded once), with ``num_sync_all_streams``
    in its sorted place, and that place."""
    if _KEY_NAMES.get("addresses") != addresses:
        names = [ctypes.string_at(a).decode() for a in addresses]
        sync_at = bisect.bisect(names, "num_sync_all_streams")
        names.insert(sync_at, "num_sync_all_streams")
        _KEY_NAMES.update(addresses=addresses, names=names, sync_at=sync_at)
    return _KEY_NAMES["names"], _KEY_NAMES["sync_at"]


def segments(raw: Dict[str, Any], device: int) -> List[Dict[str, Any]]:
    """The library's JSON segments in PyTorch's snapshot shape (addresses and
    streams as integers: the JSON writes them as hex strings)."""
    integer = _history.integer
    frames = _history.block_frames(raw)
    out = []
    for seg in raw.get("segments", []):
        blocks = [
            {
                "address": integer(b["address"]),
                "size": b["size"],
                "requested_size": b["requested_size"],
                "state": b["state"],
                "frames": frames.get(integer(b["address"]), [])
                if b["state"] == "active_allocated"
                else [],
            }
            for b in seg["blocks"]
        ]
        out.append(
            {
                "device": seg.get("device", device),
                "address": integer(seg["address"]),
                "total_size": seg["total_size"],
                "allocated_size": seg["allocated_size"],
                "active_size": seg["active_size"],
                "requested_size": seg["requested_size"],
                "stream": integer(seg["stream"]),
                "segment_type": seg["segment_type"],
                "segment_pool_id": (0, 0),
                "is_expandable": bool(seg.get("is_expandable", False)),
                "frames": [],
                "blocks": blocks,
            }
        )
    return out
