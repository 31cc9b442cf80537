"""The allocation history of ``_record_memory_history`` / ``_snapshot()["device_traces"]``.

The default caching pool records it (``aclallocPoolRecordHistory(pool,
maxEntries)`` of libaclalloc: a ring of the last ``maxEntries`` events,
allocated when recording starts), and its JSON snapshot carries it as
``device_traces``: one list per device of entries with ``action`` (``alloc``,
``free_requested``, ``free_completed``, ``segment_alloc``, ``segment_free``,
``oom``), ``addr``, ``size``, ``stream`` (hex strings, so that no 64-bit
handle loses bits in JSON), ``block_size`` and ``time_us``. This module turns
them into PyTorch's trace entries (integers, ``frames`` empty: no stacks are
recorded).

The default pool is reached through the C API (``aclallocGetDefaultAllocator``
gives the pool's handle), never by keeping a handle here: whatever pool is
the default when the call is made is the one recorded.
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional

from .. import _stacks
from .._lib import lib
from . import _default

_ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom"}

DEFAULT_MAX_ENTRIES = 1_000_000
"""The events kept when ``max_entries`` is not given (PyTorch's default,
``sys.maxsize``, means unbounded; the library's ring is allocated up front,
56 bytes per event, so the default is bounded: 56 MB)."""

_context: Optional[str] = None
"""The ``context`` recording was started with."""


def record(
    enabled: Optional[str],
    max_entries: Optional[int],
    context: Optional[str] = None,
    stacks: str = "all",
) -> None:
    """Turns the default pool's history on (``"all"``: every event, at most
    ``max_entries``, :data:`DEFAULT_MAX_ENTRIES` when None) or off (None or
    ``"state"``: PyTorch's "state" keeps stacks of live blocks only, and no
    stacks are recorded here, so it records nothing). Builds the default
    allocator if it is not built yet, as PyTorch's lazy init does. Each call
    discards the events recorded before. Raises ``RuntimeError`` with the
    library's message when the ring cannot be allocated."""
    entries = 0
    if enabled == "all":
        entries = DEFAULT_MAX_ENTRIES if max_entries is None else max_entries
    state = _default.built()
    if state is None:
        if entries == 0:
            return  # nothing built, nothing recorded: nothing to switch off
        state = _default.initialize()
    if state.kind != "pool":
        if entries:
            warnings.warn(
                f"the default allocator is {state.kind!r}, not the caching pool: only the "
                "pool records allocation history, _snapshot()['device_traces'] stays empty",
                RuntimeWarning,
                stacklevel=3,
            )
        return
    rc = lib.aclallocPoolRecordHistory(state.obj, entries)
    if rc != 0:
        raise _default.fail("aclallocPoolRecordHistory", rc)
    global _context
    _context = context if entries else None
    # "state" keeps the stacks of live blocks: the pool keeps those of its
    # allocation events, which the trace entries then leave out.
    asked = "alloc" if _context == "state" else _context
    rc = lib.aclallocPoolRecordStacks(state.obj, asked.encode() if asked else None, stacks.encode())
    if rc != 0:
        raise _default.fail("aclallocPoolRecordStacks", rc)
    _stacks.want(_context is not None)


def integer(value: Any) -> int:
    """A handle or address as the JSON has it ("0x..." or an int), as an int."""
    if isinstance(value, str):
        return int(value, 16) if value.lower().startswith("0x") else int(value)
    return int(value or 0)


def _frames(event: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [
        {"filename": f["filename"], "line": int(f["line"]), "name": f["name"]}
        for f in event.get("frames") or []
    ]


def _entry(event: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "action": event["action"],
        "addr": integer(event["addr"]),
        "size": int(event["size"]),
        "stream": integer(event.get("stream", 0)),
        "time_us": int(event.get("time_us", 0)),
        "frames": [] if _context == "state" else _frames(event),
    }


def block_frames(raw: Dict[str, Any]) -> Dict[int, List[Dict[str, Any]]]:
    """The frames of the newest allocation at each address in the recorded
    history: a live block's stack."""
    frames: Dict[int, List[Dict[str, Any]]] = {}
    for events in raw.get("device_traces") or []:
        for e in events if isinstance(events, list) else []:
            if e.get("action") == "alloc":
                frames[integer(e["addr"])] = _frames(e)
    return frames


def device_traces(raw: Dict[str, Any], device_count: int) -> List[List[Dict[str, Any]]]:
    """One list of PyTorch trace entries per device (the JSON's list ``i`` is
    device ``i``'s)."""
    traces: List[List[Dict[str, Any]]] = [[] for _ in range(device_count)]
    for device, events in enumerate(raw.get("device_traces") or []):
        if device < device_count and isinstance(events, list):
            traces[device] = [_entry(e) for e in events if e.get("action") in _ACTIONS]
    return traces
